"""W8A8 fp8: ``fp8_linear`` (e4m3 activations x e4m3 weights, the scales applied in the GEMM's
epilogue), the fused dynamic per-token activation quantiser ``quantize_fp8`` and the per-channel
weight quantiser ``quantize_fp8_weight``, so that a bf16 model runs W8A8 end to end:

    wq, ws = fused_gemm.quantize_fp8_weight(linear.weight)        # once, at load (an Fp8Weight: a pair)
    xq, xs = fused_gemm.quantize_fp8(x)                           # one kernel: row absmax, scale, cast
    y = fused_gemm.fp8_linear(xq, wq, xs, ws, bias, "silu")       # bf16 [..., N]

fp8_linear runs a GemmSpec("e4m3", ...) kernel (the GEMM family's GemmOp, chosen per weight shape and M
bucket from the GPU's tuned table, ops fp8 / fp8_fast, else per M from ``heuristics.FP8_RULES``);
per-token / per-channel scales are its row_scale / col_scale vectors, per-tensor scales its a_scale /
b_scale steps, which read the one value on the GPU (no sync).

torch.library ops (each with a fake kernel):
    fused_gemm::quantize_fp8(x) -> (Tensor q, Tensor scale)
    fused_gemm::fp8_linear(x, weight, x_scale, w_scale, bias, activation, residual, out_dtype,
                           use_fast_accum) -> Tensor
    fused_gemm::fp8_linear_out(x, weight, x_scale, w_scale, bias, activation, residual,
                               use_fast_accum, Tensor(a!) out) -> ()
A plain eager call skips the dispatcher and runs the same implementation directly.
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import torch

from .. import checks, jit
from ..generator import Epilogue, GemmSpec, LaunchOptions, QuantSpec, SpecError
from ..generator.gemm import tuned
from ..generator.gemm.heuristics import FP8_RULES, first_row
from ..generator.gemm.spec import ACTIVATIONS
from ..gemm.op import GemmOp
from ..kernel_op import DTYPE_NAMES, dtype_name
from ..torch_ops import define, _dispatch_modes, _is_compiling, no_output
from .fp8_weight import Fp8Weight
from .op import QuantOp

Tensor = torch.Tensor
FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0                                   # the largest finite e4m3 (torch.finfo(FP8).max)
_TINY = torch.finfo(torch.float32).tiny            # the scale of an all-zero row: positive, 1/scale finite
_selection: Dict[Tuple, Tuple[GemmOp, LaunchOptions]] = {}
_selection_lock = threading.Lock()
_quantizers = jit.Selection("quantize_fp8")


# -- quantisers ----------------------------------------------------------------------------------
def _quantizer(x: Tensor) -> QuantOp:
    return _quantizers.get(x.dtype, "x", x, lambda: jit.compile(QuantSpec(DTYPE_NAMES[x.dtype])))


def quantize_fp8(x: Tensor, *, out: Optional[Tensor] = None,
                 scale_out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Dynamic per-token quantisation in one kernel: ``(q, scale)`` with scale = max |x| / 448 per row
    (fp32, shape ``x.shape[:-1]``; an all-zero row gets the smallest normal fp32) and
    q = e4m3(x / scale) (float8_e4m3fn, x's shape), so x ~= q * scale[..., None].

    x: [..., K] bf16/fp16, K a multiple of 16.  ``out`` / ``scale_out`` (optional) receive the
    results.  No sync, no allocation beyond the outputs: CUDA-graph capturable.
    """
    if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        return _quantizer(x).run(x, out, scale_out)
    checks.refuse_grad("quantize_fp8", x)
    q, scale = torch.ops.fused_gemm.quantize_fp8(x)
    if out is not None:
        out.copy_(q)
        q = out
    if scale_out is not None:
        scale_out.copy_(scale)
        scale = scale_out
    return q, scale


def quantize_fp8_weight(weight: Tensor) -> Fp8Weight:
    """Per output channel: ``Fp8Weight(w_fp8, scale)`` with scale[n] = max_k |w[n, k]| / 448 (fp32 [N];
    a row of zeros gets the smallest normal fp32) and w_fp8 = e4m3(w / scale[:, None]) ([N, K],
    contiguous).  A (w_fp8, scale) pair for fp8_linear (W8A8); fp8_weight_linear (W8A16) takes it
    whole.  Plain torch, for load time (it makes an fp32 copy of the weight)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [N, K], got shape {tuple(weight.shape)}")
    if not weight.is_floating_point() or weight.dtype.itemsize == 1:
        raise TypeError(f"weight has dtype {weight.dtype}; quantize_fp8_weight takes a 16- or 32-bit float weight")
    with torch.no_grad():
        w = weight.float()
        scale = (w.abs().amax(dim=1) / E4M3_MAX).clamp_min_(_TINY)
        q = (w * scale.reciprocal()[:, None]).clamp_(-E4M3_MAX, E4M3_MAX).to(FP8)
    return Fp8Weight(q.contiguous(), scale.contiguous())


# -- the fp8 GEMM --------------------------------------------------------------------------------
def _scale(name: str, t, x: Tensor, length: int, dim: str, what: str) -> Tuple[bool, Tensor]:
    """(per-tensor?, the scale as the kernel reads it: one value, or a [length] vector)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a float32 torch.Tensor, got {type(t).__name__}")
    if t.dtype is not torch.float32:
        raise TypeError(f"{name} has dtype {t.dtype}; scales are float32")
    if t.get_device() != x.get_device():
        raise ValueError(f"{name} is on {t.device}, but x is on {x.device}")
    numel = t.numel()
    if numel == 1 and (t.dim() == 0 or length != 1):   # at M = 1 a [1] x_scale is per token: shape () is per tensor
        return True, (t if t.dim() <= 1 else t.view(()))
    if numel != length:
        raise ValueError(f"{name} has shape {tuple(t.shape)}: expected one value (per tensor) or "
                         f"{dim} = {length} values ({what})")
    if t.dim() != 1:
        try:
            t = t.view(length)
        except RuntimeError:
            raise ValueError(f"{name} with shape {tuple(t.shape)} and strides {t.stride()} cannot be viewed as "
                             f"[{length}] without a copy; call .contiguous()") from None
    if t.stride(0) != 1:
        raise ValueError(f"{name} has stride {t.stride(0)}: scales {what} must be contiguous")
    if t.data_ptr() % 16:
        raise ValueError(f"{name}'s data pointer is not 16-byte aligned (the epilogue reads scales 16 bytes at a "
                         "time); pass a fresh or .clone()d tensor")
    return False, t


def select(x, x_per_tensor: bool, w_per_tensor: bool, bias, activation, residual, out_dtype,
           use_fast_accum: bool, m: int, n: int = -1, k: int = -1) -> Tuple[GemmOp, LaunchOptions]:
    """The fp8 GEMM (and launch options) for this call's scales, epilogue, weight shape [n, k] and M;
    memoised.  The GPU's tuned table (`fused-gemm tune --op fp8`, or `--op fp8_fast` for fast accumulation)
    serves the shapes and M buckets it has, FP8_RULES the rest."""
    row = first_row(FP8_RULES[use_fast_accum], m)
    try:
        key = (x.dtype, x_per_tensor, w_per_tensor, None if bias is None else bias.dtype, activation,
               None if residual is None else residual.dtype, out_dtype, use_fast_accum, row, tuned.bucket_of(m),
               n, k, x.get_device())
    except AttributeError:   # a non-tensor argument: say which
        for name, t in (("bias", bias), ("residual", residual)):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}") from None
        raise
    hit = _selection.get(key)
    if hit is None:
        hit = _select_miss(x, key)
    return hit


def _select_miss(x, key) -> Tuple[GemmOp, LaunchOptions]:
    dtype, x_per_tensor, w_per_tensor, bias_dtype, activation, residual_dtype, out_dtype, fast, row, bucket, n, k, _ = key
    if x.get_device() < 0:   # before anything is built for it
        raise ValueError(f"x is on {x.device}; fused-gemm kernels run on CUDA devices")
    if dtype is not FP8:
        raise TypeError(f"x has dtype {dtype}; fp8_linear takes float8_e4m3fn activations "
                        "(fused_gemm.quantize_fp8 makes them from bf16/fp16)")
    act = "identity" if activation in (None, "none") else activation
    if act not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
    try:
        epilogue = Epilogue(row_scale=not x_per_tensor, a_scale=x_per_tensor, col_scale=not w_per_tensor,
                            b_scale=w_per_tensor, bias=bias_dtype is not None, activation=act,
                            residual=residual_dtype is not None)
        rule = None
        if tuned.tables_enabled():
            rule = tuned.rule_for(tuned.gpu_key(torch.cuda.get_device_name(x.device)), "e4m3", n, k,
                                  tuned.M_BUCKETS[bucket], tuned.FP8_OP[fast])
        rule = rule or FP8_RULES[fast][row]
        spec = GemmSpec("e4m3", "e4m3", out_dtype=dtype_name("out", out_dtype),
                        residual_dtype=dtype_name("residual", residual_dtype),
                        bias_dtype=dtype_name("bias", bias_dtype), epilogue=epilogue, config=rule.config,
                        fast_accum=fast, promotion=rule.promotion)
    except SpecError as exc:
        raise TypeError(str(exc)) from None
    hit = (jit.compile(spec), rule.launch)
    with _selection_lock:
        _selection[key] = hit
    return hit


def _fp8_linear(x, weight, x_scale, w_scale, bias, activation, residual, out_dtype, use_fast_accum, out):
    """The implementation every route ends in: checks the scales, picks the kernel for x's shape,
    runs it (GemmOp.run checks every other argument)."""
    xs = checks.leading_shape(x)
    out_dtype = checks.output_dtype(out, out_dtype, torch.bfloat16)
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        checks.tensor("weight", weight, FP8, None)
        raise ValueError(f"weight must be 2-D [N, K], got shape {tuple(weight.shape)}")
    m = xs[0] if len(xs) == 2 else xs[:-1].numel()
    x_per_tensor, x_scale = _scale("x_scale", x_scale, x, m, "M", "per token")
    w_per_tensor, w_scale = _scale("w_scale", w_scale, x, weight.shape[0], "N", "per output channel")
    op, launch = select(x, x_per_tensor, w_per_tensor, bias, activation, residual, out_dtype,
                        bool(use_fast_accum), m, *weight.shape)
    return op.run(x, weight, bias, residual, x_scale, w_scale, 1.0, 1.0, None, out, launch)


def fp8_linear(x: Tensor, weight: Tensor, x_scale: Tensor, w_scale: Tensor, bias: Optional[Tensor] = None,
               activation: Optional[str] = None, residual: Optional[Tensor] = None, *,
               out_dtype: Optional[torch.dtype] = None, out: Optional[Tensor] = None,
               use_fast_accum: bool = False) -> Tensor:
    """``activation((x * x_scale) @ (weight * w_scale).T + bias) + residual`` in one fp8 GEMM.

    x: [..., K] float8_e4m3fn (K a multiple of 16); weight: [N, K] float8_e4m3fn (nn.Linear's
    layout; fp8 needs it K-major); x_scale: fp32, one value (shape () or (1,)) or one per token
    (M = x.numel() // K values, e.g. quantize_fp8's [...] or [M, 1]); w_scale: fp32, one value or one
    per output channel ([N] or [N, 1]); bias: [N] (default dtype: the output's); residual: [..., N]
    (may be ``out``).  Output: out_dtype (or out.dtype), bf16 by default, fp16 or fp32.  fp32
    accumulation, the tensor cores' sums added into fp32 every 128 of K at decode sizes and every 256
    or 512 in prefill (the GPU's tuned table, else 256: generator/gemm/heuristics.py FP8_RULES);
    ``use_fast_accum=True`` leaves it to the tensor cores (faster, less accurate at large K:
    torch._scaled_mm's flag of the same name).
    """
    args = (x, weight, x_scale, w_scale, bias, activation, residual)
    if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
        return _fp8_linear(*args, out_dtype, use_fast_accum, out)
    checks.refuse_grad("fp8_linear", x, weight, x_scale, w_scale, bias, residual)
    if out is None:
        return torch.ops.fused_gemm.fp8_linear(*args, out_dtype, bool(use_fast_accum))
    torch.ops.fused_gemm.fp8_linear_out(*args, bool(use_fast_accum), out)
    return out


# -- the torch.library registrations -----------------------------------------------------------
_ARGS = ("Tensor x, Tensor weight, Tensor x_scale, Tensor w_scale, Tensor? bias, str? activation, "
         "Tensor? residual")


def _linear_impl(x, weight, x_scale, w_scale, bias, activation, residual, out_dtype, use_fast_accum):
    return _fp8_linear(x, weight, x_scale, w_scale, bias, activation, residual, out_dtype, use_fast_accum, None)


def _linear_fake(x, weight, x_scale, w_scale, bias, activation, residual, out_dtype, use_fast_accum):
    if weight.dim() != 2 or x.dim() == 0:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: expected [..., K] and [N, K]")
    return x.new_empty((*x.shape[:-1], weight.shape[0]), dtype=out_dtype or torch.bfloat16)


def _linear_out_impl(x, weight, x_scale, w_scale, bias, activation, residual, use_fast_accum, out) -> None:
    _fp8_linear(x, weight, x_scale, w_scale, bias, activation, residual, None, use_fast_accum, out)



def _quantize_impl(x):
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    return _quantizer(x).run(x)


def _quantize_fake(x):
    return (torch.empty_like(x, dtype=FP8, memory_format=torch.contiguous_format),
            x.new_empty(x.shape[:-1], dtype=torch.float32))


define("fp8_linear", f"({_ARGS}, ScalarType? out_dtype, bool use_fast_accum) -> Tensor", _linear_impl, _linear_fake)
define("fp8_linear_out", f"({_ARGS}, bool use_fast_accum, Tensor(a!) out) -> ()", _linear_out_impl, no_output)
define("quantize_fp8", "(Tensor x) -> (Tensor, Tensor)", _quantize_impl, _quantize_fake)
