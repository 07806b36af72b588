"""``fused_gemm.linear``: picks a GEMM kernel per call shape, and the GEMM family's torch ops.

torch.library ops (each with a fake kernel, so torch.compile(fullgraph=True) and export see one
op per call):
    fused_gemm::linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale,
                       out_dtype) -> Tensor
    fused_gemm::linear_out(..., Tensor(a!) out) -> ()        # out=..., in-place residual included
    fused_gemm::gemm(uri, launch, x, weight, ...) -> Tensor     # a compiled GemmOp, by kernel URI
    fused_gemm::gemm_out(uri, launch, ..., Tensor(a!) out) -> ()
A plain eager call skips the dispatcher and runs the same implementation directly.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Dict, Optional, Tuple

import torch

from .. import checks, jit
from ..generator import Epilogue, GemmSpec, LaunchOptions, SpecError
from ..generator.gemm import heuristics, tuned
from ..generator.gemm.tuned import M_BUCKETS, bucket_of
from ..generator.gemm.launch import DECOMPOSITION, RASTER, REDUCTION
from ..generator.gemm.spec import ACTIVATIONS
from ..torch_ops import define, _dispatch_modes, _is_compiling, no_output
from ..kernel_op import TORCH_DTYPES, dtype_name
from .op import GemmOp

Tensor = torch.Tensor
_selection: Dict[Tuple, Tuple[GemmOp, LaunchOptions]] = {}
_selection_lock = threading.Lock()


def _dtype_of(name: str, t) -> Optional[torch.dtype]:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t.dtype


def select(x, bias, activation, residual, row_scale, col_scale, out_dtype, m: int, n: int, k: int
           ) -> Tuple[GemmOp, LaunchOptions]:
    """The op (and launch options) for this call's dtypes, epilogue, weight shape and M bucket;
    memoised, so the tuned-table lookup costs a dict hit per call."""
    bucket = bucket_of(m)
    try:
        key = (x.dtype, activation, None if bias is None else bias.dtype,
               None if residual is None else residual.dtype, row_scale is None, col_scale is None, out_dtype,
               n, k, bucket, x.get_device())   # the device: each GPU kind has its own tuned table
        hit = _selection.get(key)
    except AttributeError:   # a non-tensor argument: say which
        for name, t in (("bias", bias), ("residual", residual)):
            _dtype_of(name, t)
        raise
    if hit is None:
        hit = _select_miss(x, key)
    return hit


tuned_tables_enabled = tuned.tables_enabled


def gemm_rule(x, dtype: str, n: int, k: int, bucket: int, linear_only: bool = False) -> heuristics.Rule:
    """The tile config and launch options for (dtype, N, K, M bucket) on x's GPU: the tuned table's
    entry, else the heuristic's row (the families built on the GEMM's tiles choose with it too).  With
    ``linear_only`` (linear's own kernels), fp16 calls read bf16 entries (tuned.SHARED_TILES), a weight the table
    lacks takes its nearest tabled weight's entry (tuned.nearest_rule_for), else the heuristic's split-K rows for
    narrow long-K weights, before the M rows."""
    m = M_BUCKETS[bucket]
    if tuned_tables_enabled():
        gpu = tuned.gpu_key(torch.cuda.get_device_name(x.device))
        rule = tuned.rule_for(gpu, dtype, n, k, m, shared=linear_only)
        if rule is None and linear_only:
            rule = tuned.nearest_rule_for(gpu, dtype, n, k, m)
        if rule is not None:
            return rule
    return heuristics.pick_for_shape("sm90a", m, n, k) if linear_only else heuristics.pick("sm90a", m)


def _select_miss(x, key) -> Tuple[GemmOp, LaunchOptions]:
    dtype, activation, bias_dtype, residual_dtype, no_row_scale, no_col_scale, out_dtype, n, k, bucket, _ = key
    if x.get_device() < 0:   # before anything is built for it
        raise ValueError(f"x is on {x.device}; fused-gemm kernels run on CUDA devices")
    if dtype is not torch.bfloat16 and dtype is not torch.float16:
        raise TypeError(f"x has dtype {dtype}; fused_gemm.linear takes bfloat16 or float16 activations")
    act = "identity" if activation in (None, "none") else activation
    if act not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
    try:
        epilogue = Epilogue(row_scale=not no_row_scale, col_scale=not no_col_scale, bias=bias_dtype is not None,
                            activation=act, residual=residual_dtype is not None)
        a_dtype = dtype_name("x", dtype)
        rule = gemm_rule(x, a_dtype, n, k, bucket, linear_only=True)
        spec = GemmSpec(a_dtype, out_dtype=dtype_name("out", out_dtype),
                        residual_dtype=dtype_name("residual", residual_dtype),
                        bias_dtype=dtype_name("bias", bias_dtype), epilogue=epilogue, config=rule.config)
    except SpecError as exc:
        raise TypeError(str(exc)) from None
    hit = (jit.compile(spec), rule.launch)
    with _selection_lock:
        _selection[key] = hit
    return hit


def _linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out_dtype, out):
    """The implementation every route ends in: picks the kernel for x's shape, runs it (which checks
    every argument)."""
    xs = checks.leading_shape(x)
    out_dtype = checks.output_dtype(out, out_dtype, x.dtype)
    m = xs[0] if len(xs) == 2 else xs[:-1].numel()
    try:
        n, k = weight.shape
    except (AttributeError, TypeError, ValueError):   # not a 2-D tensor: the op's checks say so
        n = k = -1
    op, launch = select(x, bias, activation, residual, row_scale, col_scale, out_dtype, m, n, k)
    return op.run(x, weight, bias, residual, row_scale, col_scale, alpha, beta, None, out, launch)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, residual: Optional[torch.Tensor] = None, *, alpha: float = 1.0,
           beta: float = 1.0, row_scale: Optional[torch.Tensor] = None, col_scale: Optional[torch.Tensor] = None,
           out_dtype: Optional[torch.dtype] = None, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``activation(alpha * row_scale * col_scale * (x @ weight.T) + bias) + beta * residual``, one kernel.

    x: [..., K] bf16/fp16; weight: [N, K] (an nn.Linear weight); bias: [N]; residual: [..., N]
    (may be ``out`` for an in-place residual add); out_dtype (or out.dtype): bf16/fp16/fp32,
    default x.dtype.  The kernel is chosen by the weight's shape and M (= x.numel() // K) from the
    tuned table of the current GPU (``fused_gemm.generator.gemm.tuned``; fp16 calls take its bf16 entries), for a
    weight it lacks from the nearest tabled weight's entry (``tuned.nearest_rule_for``), else from the heuristic
    table (``...gemm.heuristics``); built on first use and cached on disk.
    """
    if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
        return _linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out_dtype, out)
    checks.refuse_grad("linear", x, weight, bias, residual, row_scale, col_scale)
    alpha, beta = float(alpha), float(beta)
    if out is None:
        return torch.ops.fused_gemm.linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale,
                                           out_dtype)
    torch.ops.fused_gemm.linear_out(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out)
    return out


def dispatch_gemm(op: GemmOp, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out_dtype, out, launch):
    """A GemmOp call through torch.ops (traced, exported, or on tensor subclasses)."""
    checks.refuse_grad("gemm", x, weight, bias, residual, row_scale, col_scale)
    abi = list((launch or LaunchOptions()).abi)
    alpha, beta = float(alpha), float(beta)
    if out is None:
        return torch.ops.fused_gemm.gemm(op.spec.uri, abi, x, weight, bias, residual, alpha, beta, row_scale,
                                         col_scale, out_dtype)
    torch.ops.fused_gemm.gemm_out(op.spec.uri, abi, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out)
    return out


# -- the torch.library registrations -----------------------------------------------------------
_ARGS = ("Tensor x, Tensor weight, Tensor? bias, str? activation, Tensor? residual, float alpha, float beta, "
         "Tensor? row_scale, Tensor? col_scale")
_GEMM_ARGS = ("str uri, int[] launch, Tensor x, Tensor weight, Tensor? bias, Tensor? residual, float alpha, "
              "float beta, Tensor? row_scale, Tensor? col_scale")
_RASTER_NAMES = {v: k for k, v in RASTER.items()}
_DECOMPOSITION_NAMES = {v: k for k, v in DECOMPOSITION.items()}
_REDUCTION_NAMES = {v: k for k, v in REDUCTION.items()}


def _launch_from_abi(abi) -> LaunchOptions:
    splits, swizzle, raster, decomposition, reduction, pdl = abi
    return LaunchOptions(splits, swizzle, _RASTER_NAMES[raster], _DECOMPOSITION_NAMES[decomposition],
                         _REDUCTION_NAMES[reduction], bool(pdl))


def _fake_output(x, weight, out_dtype, nk: bool = True):
    if weight.dim() != 2 or x.dim() == 0:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: expected [..., K] and a 2-D weight")
    n = weight.shape[0] if nk else weight.shape[1]
    return x.new_empty((*x.shape[:-1], n), dtype=out_dtype or x.dtype)


def _linear_impl(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out_dtype):
    return _linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out_dtype, None)


def _linear_fake(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out_dtype):
    return _fake_output(x, weight, out_dtype)


def _linear_out_impl(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, out) -> None:
    _linear(x, weight, bias, activation, residual, alpha, beta, row_scale, col_scale, None, out)


@lru_cache(maxsize=None)
def _spec_of(uri: str) -> GemmSpec:
    return GemmSpec.from_uri(uri)


def _gemm_impl(uri, launch, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out_dtype):
    op = jit.compile(_spec_of(uri))
    return op.run(x, weight, bias, residual, row_scale, col_scale, alpha, beta, out_dtype, None,
                  _launch_from_abi(launch))


def _gemm_fake(uri, launch, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out_dtype):
    spec = _spec_of(uri)
    return _fake_output(x, weight, out_dtype or TORCH_DTYPES[spec.out_dtype], nk=spec.b_layout == "nk")


def _gemm_out_impl(uri, launch, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out) -> None:
    op = jit.compile(_spec_of(uri))
    op.run(x, weight, bias, residual, row_scale, col_scale, alpha, beta, None, out, _launch_from_abi(launch))



define("linear", f"({_ARGS}, ScalarType? out_dtype) -> Tensor", _linear_impl, _linear_fake)
define("linear_out", f"({_ARGS}, Tensor(a!) out) -> ()", _linear_out_impl, no_output)
define("gemm", f"({_GEMM_ARGS}, ScalarType? out_dtype) -> Tensor", _gemm_impl, _gemm_fake)
define("gemm_out", f"({_GEMM_ARGS}, Tensor(a!) out) -> ()", _gemm_out_impl, no_output)
