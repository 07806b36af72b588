"""The user-facing calls: ``linear`` (picks a kernel per shape) and ``compile`` (one spec)."""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import torch

from . import heuristics
from .generator import Epilogue, GemmSpec, SpecError, build
from .generator.spec import ACTIVATIONS
from .library import KernelLibrary
from .runtime import GemmOp, LaunchOptions

_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_ops: Dict[GemmSpec, GemmOp] = {}
_lock = threading.Lock()


def compile(spec: GemmSpec) -> GemmOp:
    """Builds ``spec`` if the cache lacks it, loads it, and returns a reusable callable op."""
    if not isinstance(spec, GemmSpec):
        raise TypeError(f"spec must be a fused_gemm.GemmSpec, got {type(spec).__name__}")
    op = _ops.get(spec)
    if op is None:
        with _lock:
            op = _ops.get(spec)
            if op is None:
                result = build(spec)
                op = _ops[spec] = GemmOp(spec, KernelLibrary(result.library, spec.uri))
    return op


def _dtype_name(name: str, t: Optional[torch.Tensor]) -> Optional[str]:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPE_NAMES:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: bfloat16, float16 (float32 for out)")
    return _DTYPE_NAMES[t.dtype]


_selection: Dict[Tuple, Tuple[GemmOp, LaunchOptions]] = {}


def _select(x, bias, activation, residual, row_scale, col_scale, out, m: int) -> Tuple[GemmOp, LaunchOptions]:
    """The op (and launch options) for this call's dtypes, epilogue and M bucket; memoised."""
    row = heuristics.row_index("sm90a", m)
    key = (x.dtype, activation, bias is None or bias.dtype, residual is None or residual.dtype,
           row_scale is None, col_scale is None, out is None or out.dtype, row)
    hit = _selection.get(key)
    if hit is None:
        act = "identity" if activation in (None, "none") else activation
        if act not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
        try:
            epilogue = Epilogue(row_scale=row_scale is not None, col_scale=col_scale is not None,
                                bias=bias is not None, activation=act, residual=residual is not None)
            rule = heuristics.RULES["sm90a"][row]
            spec = GemmSpec(_dtype_name("x", x), out_dtype=_dtype_name("out", out),
                            residual_dtype=_dtype_name("residual", residual),
                            bias_dtype=_dtype_name("bias", bias), epilogue=epilogue, config=rule.config)
        except SpecError as exc:
            raise TypeError(str(exc)) from None
        hit = _selection[key] = (compile(spec), rule.launch)
    return hit


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None, residual: Optional[torch.Tensor] = None, alpha: float = 1.0,
           out: Optional[torch.Tensor] = None, *, beta: float = 1.0, row_scale: Optional[torch.Tensor] = None,
           col_scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``activation(alpha * row_scale * col_scale * (x @ weight.T) + bias) + beta * residual``, one kernel.

    x: [..., K] bf16/fp16; weight: [N, K] (an nn.Linear weight); bias: [N]; residual: [..., N]
    (may be ``out`` for an in-place residual add); out: [..., N], its dtype picks the output type
    (bf16/fp16/fp32; default x.dtype).  The kernel is chosen by M (= x.numel() // K) from
    ``fused_gemm.heuristics``, built on first use and cached on disk.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dim ([..., K])")
    if x.get_device() < 0:
        raise ValueError(f"x is on {x.device}; fused-gemm kernels run on CUDA devices")
    if x.dtype is not torch.bfloat16 and x.dtype is not torch.float16:
        raise TypeError(f"x has dtype {x.dtype}; fused_gemm.linear takes bfloat16 or float16 activations")
    for name, t in (("weight", weight), ("bias", bias), ("residual", residual), ("row_scale", row_scale),
                    ("col_scale", col_scale), ("out", out)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    k = x.shape[-1]
    m = x.numel() // k if k else 0
    op, launch = _select(x, bias, activation, residual, row_scale, col_scale, out, m)
    return op(x, weight, bias, residual, row_scale=row_scale, col_scale=col_scale, alpha=alpha, beta=beta,
              out=out, launch=launch)
