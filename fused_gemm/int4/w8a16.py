"""``fused_gemm.fp8_weight_linear``: W8A16, act(x @ dequant(w)^T + bias) + residual in one kernel for
bf16/fp16 activations and an fp8 (e4m3) weight with per-output-channel fp32 scales.  The int4 family's
e4m3 kernels (chosen per M, and at M <= 16 per weight shape, from generator/int4/heuristics.py): up to 16
tokens the dense decode kernel streams the weight and converts it to x's dtype in registers, above that
CUTLASS's mixed-input mainloop does; both exactly, and both multiply the fp32 accumulator by scale[n]
before the bias.

    w = fused_gemm.quantize_fp8_weight(linear.weight)        # once, at load: Fp8Weight(e4m3 [N, K], fp32 [N])
    y = fused_gemm.fp8_weight_linear(x, w, bias, "silu", residual=r)

torch.library ops (each with a fake kernel; an Fp8Weight is passed as its two tensors):
    fused_gemm::fp8_weight_linear(x, weight, scale, bias, activation, residual) -> Tensor
    fused_gemm::fp8_weight_linear_out(x, weight, scale, bias, activation, residual, Tensor(a!) out) -> ()
A plain eager call skips the dispatcher and runs the same implementation directly.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import checks, jit
from ..quant.fp8_weight import Fp8Weight
from ..torch_ops import define, no_output, route
from .select import select

Tensor = torch.Tensor
WEIGHT = "e4m3"
_selection = jit.Selection("fp8_weight_linear")


def _fp8_weight_linear(x, weight, scale, bias, activation, residual, out):
    """The implementation every route ends in: picks the kernel for x's shape, runs it (which checks
    every argument)."""
    xs = checks.leading_shape(x)
    k = xs[-1]
    if out is not None and not isinstance(out, Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out is not None and out.dtype is not x.dtype:
        raise TypeError(f"out has dtype {out.dtype}; fp8_weight_linear writes x's dtype {x.dtype}")
    m = xs[0] if len(xs) == 2 else xs[:-1].numel()
    # Per channel (group = K); N picks the decode rows (the op checks the weight itself).
    n = weight.shape[0] if isinstance(weight, Tensor) and weight.dim() == 2 else 0
    op = select(_selection, x, WEIGHT, k, bias, activation, residual, m, k, n)
    return op.run(x, weight, scale, None, k, bias, residual, out)


def _weight(w) -> Fp8Weight:
    if isinstance(w, Fp8Weight):
        return w
    if isinstance(w, tuple) and len(w) == 2:
        return Fp8Weight(*w)
    raise TypeError(f"w must be a fused_gemm.Fp8Weight (from quantize_fp8_weight) or a (weight, scale) pair, "
                    f"got {type(w).__name__}")


def fp8_weight_linear(x: Tensor, w: Fp8Weight, bias: Optional[Tensor] = None, activation: Optional[str] = None,
                      residual: Optional[Tensor] = None, *, out: Optional[Tensor] = None) -> Tensor:
    """``activation(x @ (w.weight * w.scale[:, None]).T + bias) + residual`` in one kernel, fp32
    accumulation, the scale applied to the accumulator.

    x: [..., K] bf16/fp16; w: an Fp8Weight [N, K] (or a (weight, scale) pair: float8_e4m3fn [N, K]
    contiguous, float32 [N]), N a multiple of 8, K of 16; bias: [N] (x's dtype, or fp32); residual:
    [..., N] (may be ``out`` for an in-place residual add); output x's dtype.  The kernel is chosen by
    M (= x.numel() // K) from generator/int4/heuristics.py, built on first use and cached on disk.  No
    sync, no allocation beyond the output: CUDA-graph capturable.  Pass an Fp8Weight made once at load
    time: a (weight, scale) pair is checked again on every call, and a per-tensor scale in it is
    expanded to [N] by a copy each time (inside a graph capture, that copy is captured with it).
    """
    w = _weight(w)
    if isinstance(x, Tensor) and x.dim() and x.shape[-1] != w.K:
        raise ValueError(f"x has K = {x.shape[-1]}, but w is [N, K] = [{w.N}, {w.K}]")
    args = (x, w.weight, w.scale, bias, activation, residual)
    return route("fp8_weight_linear", _fp8_weight_linear, args, out, x, bias, residual)


# -- the torch.library registrations -----------------------------------------------------------
_ARGS = "Tensor x, Tensor weight, Tensor scale, Tensor? bias, str? activation, Tensor? residual"


def _linear_impl(x, weight, scale, bias, activation, residual):
    return _fp8_weight_linear(x, weight, scale, bias, activation, residual, None)


def _linear_fake(x, weight, scale, bias, activation, residual):
    if weight.dim() != 2 or x.dim() == 0:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: expected [..., K] and [N, K]")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _linear_out_impl(x, weight, scale, bias, activation, residual, out) -> None:
    _fp8_weight_linear(x, weight, scale, bias, activation, residual, out)


define("fp8_weight_linear", f"({_ARGS}) -> Tensor", _linear_impl, _linear_fake)
define("fp8_weight_linear_out", f"({_ARGS}, Tensor(a!) out) -> ()", _linear_out_impl, no_output)
