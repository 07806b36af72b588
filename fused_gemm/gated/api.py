"""``fused_gemm.gated_linear``: SwiGLU/GeGLU in one kernel, and its torch ops.

    fused_gemm::gated_linear(x, weight, bias_gate, bias_up, activation, residual, alpha, beta,
                             out_dtype) -> Tensor
    fused_gemm::gated_linear_out(..., Tensor(a!) out) -> ()
``weight`` is the packed [2I, K] weight of ``pack_gate_up``.  A plain eager call skips the
dispatcher, as ``linear`` does.
"""
from __future__ import annotations

import warnings
from typing import Optional, Tuple

import torch

from .. import checks, jit
from ..generator import LaunchOptions
from ..generator.gated import GatedSpec
from ..generator.gated import heuristics
from ..generator.gemm import tuned
from ..generator.gemm.spec import ACTIVATIONS
from ..generator.gemm.tuned import gpu_key
from ..kernel_op import dtype_name
from ..torch_ops import define, _dispatch_modes, _is_compiling, no_output
from .op import GatedOp, pack_gate_up

Tensor = torch.Tensor
_selection = jit.Selection("gated_linear")


def select(x, bias_gate, bias_up, activation, residual, out_dtype, m: int, n: int = -1,
           k: int = -1) -> Tuple[GatedOp, LaunchOptions]:
    """The op (and launch options) for this call's dtypes, epilogue, packed weight shape [n = 2I, k]
    and M; memoised.  The GPU's tuned table (`fused-gemm tune --op gated`) serves the shapes it has,
    the heuristic table the rest."""
    bias = bias_gate if bias_gate is not None else bias_up
    for arg, t in (("x", x), ("bias_gate", bias_gate), ("bias_up", bias_up), ("residual", residual)):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{arg} must be a torch.Tensor, got {type(t).__name__}")
    row = heuristics.row_index("sm90a", m)
    key = (x.dtype, activation, None if bias is None else bias.dtype, None if residual is None else residual.dtype,
           out_dtype, row, tuned.bucket_of(m), n, k, x.get_device())

    def choose():
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
        gpu = gpu_key(torch.cuda.get_device_name(x.device))
        rule = tuned.rule_for(gpu, dtype_name("x", x.dtype), n, k, m, "gated") if tuned.tables_enabled() else None
        rule = rule or heuristics.rule_for("sm90a", gpu, row)
        spec = GatedSpec(dtype_name("x", x.dtype), dtype_name("out", out_dtype), activation, bias=bias is not None,
                         residual=residual is not None, bias_dtype=dtype_name("bias", key[2]),
                         residual_dtype=dtype_name("residual", key[3]), config=rule.config,
                         vector_store=heuristics.vector_store(rule.config))
        return jit.compile(spec), rule.launch
    return _selection.get(key, "x", x, choose)


def _gated(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, out_dtype, out):
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dim ([..., K])")
    if out is not None and not isinstance(out, Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    out_dtype = checks.output_dtype(out, out_dtype, x.dtype)
    n, k = weight.shape if isinstance(weight, Tensor) and weight.dim() == 2 else (-1, -1)   # run() says what is wrong
    op, launch = select(x, bias_gate, bias_up, activation, residual, out_dtype, x.shape[:-1].numel(), n, k)
    return op.run(x, weight, bias_gate, bias_up, residual, alpha, beta, None, out, launch)


_warned_unpacked = False


def gated_linear(x: Tensor, w_gate: Tensor, w_up: Optional[Tensor] = None, activation: str = "silu",
                 bias_gate: Optional[Tensor] = None, bias_up: Optional[Tensor] = None,
                 residual: Optional[Tensor] = None, *, alpha: float = 1.0, beta: float = 1.0,
                 out_dtype: Optional[torch.dtype] = None, out: Optional[Tensor] = None) -> Tensor:
    """``act(alpha * x W_gate^T + bias_gate) * (alpha * x W_up^T + bias_up) + beta * residual`` in one
    kernel; the [..., 2I] intermediate never reaches memory.

    Pass the packed weight ``fused_gemm.pack_gate_up(w_gate, w_up)`` as ``w_gate`` with ``w_up=None``
    (pack once, at load time).  Given separate ``w_gate`` and ``w_up`` ([I, K] each), the call packs
    them first, an extra copy of both weights per call.  activation: silu (SwiGLU), gelu / gelu_tanh
    (GeGLU), relu (ReGLU), sigmoid (GLU), identity (bilinear).  x: [..., K] bf16/fp16; biases: [I];
    residual/out: [..., I] (out may be the residual: in place).  Returns [..., I].
    """
    global _warned_unpacked
    if w_up is not None:
        if not _warned_unpacked:
            _warned_unpacked = True
            warnings.warn("gated_linear(x, w_gate, w_up) packs the two weights on every call; pack them once "
                          "with fused_gemm.pack_gate_up and pass the result as w_gate", stacklevel=2)
        w_gate = pack_gate_up(w_gate, w_up)
    if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
        return _gated(x, w_gate, bias_gate, bias_up, activation, residual, alpha, beta, out_dtype, out)
    checks.refuse_grad("gated_linear", x, w_gate, bias_gate, bias_up, residual)
    alpha, beta = float(alpha), float(beta)
    if out is None:
        return torch.ops.fused_gemm.gated_linear(x, w_gate, bias_gate, bias_up, activation, residual, alpha, beta,
                                                 out_dtype)
    torch.ops.fused_gemm.gated_linear_out(x, w_gate, bias_gate, bias_up, activation, residual, alpha, beta, out)
    return out


def _impl(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, out_dtype):
    return _gated(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, out_dtype, None)


def _fake(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, out_dtype):
    if weight.dim() != 2 or x.dim() == 0:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: expected [..., K] and [2I, K]")
    return x.new_empty((*x.shape[:-1], weight.shape[0] // 2), dtype=out_dtype or x.dtype)


def _out_impl(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, out) -> None:
    _gated(x, weight, bias_gate, bias_up, activation, residual, alpha, beta, None, out)



_ARGS = ("Tensor x, Tensor weight, Tensor? bias_gate, Tensor? bias_up, str activation, Tensor? residual, "
         "float alpha, float beta")
define("gated_linear", f"({_ARGS}, ScalarType? out_dtype) -> Tensor", _impl, _fake)
define("gated_linear_out", f"({_ARGS}, Tensor(a!) out) -> ()", _out_impl, no_output)
