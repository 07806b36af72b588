"""``fused_gemm.int4_linear``: W4A16, act(x @ dequant(w)^T + bias) + residual in one kernel, the int4
weight dequantised in the mainloop (the int4 family, chosen per M from generator/int4/heuristics.py).

    w = fused_gemm.quantize_int4(linear.weight, group_size=128)        # once, at load (or int4_from_gptq/awq)
    y = fused_gemm.int4_linear(x, w, bias, "silu", residual=r)

torch.library ops (each with a fake kernel; an Int4Weight is passed as its tensors):
    fused_gemm::int4_linear(x, packed, scales, zeros, group_size, bias, activation, residual) -> Tensor
    fused_gemm::int4_linear_out(x, packed, scales, zeros, group_size, bias, activation, residual,
                                Tensor(a!) out) -> ()
    fused_gemm::int4_gated_linear(x, packed, scales, zeros, group_size, bias, activation, residual) -> Tensor
    fused_gemm::int4_gated_linear_out(..., Tensor(a!) out) -> ()
``fused_gemm.int4_gated_linear`` is SwiGLU/GeGLU on a quantize_int4(pack_gate_up(...)) weight.
A plain eager call skips the dispatcher and runs the same implementation directly.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import jit
from ..torch_ops import define, no_output, route
from .op import Int4Op
from .select import select as choose_kernel
from .weight import Int4Weight, check_group_size

Tensor = torch.Tensor
_selection = jit.Selection("int4_linear")
_gated_selection = jit.Selection("int4_gated_linear")


def select(x, zeros, group_size: int, bias, activation, residual, m: int, k: int, n: int) -> Int4Op:
    """The kernel for this call's dtypes, weight kind (s4 without zeros, u4 with), epilogue, k-tile
    class, M bucket and weight shape (N, K: int4_linear's decode rows); memoised."""
    return choose_kernel(_selection, x, "s4" if zeros is None else "u4", group_size, bias, activation, residual, m, k,
                         n)


def _int4_linear(x, packed, scales, zeros, group_size, bias, activation, residual, out, gated=False):
    """The implementation every route ends in: picks the kernel for x's shape, runs it (which checks
    every argument).  gated: int4_gated_linear's (activation is the gate's; bias [2I], gate's then up's)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    xs = x.shape
    if not xs:
        raise ValueError("x must have at least one dim ([..., K])")
    k = xs[-1]
    if isinstance(scales, Tensor) and scales.dtype is not x.dtype:
        raise TypeError(f"w.scales has dtype {scales.dtype}, but x is {x.dtype}: an int4 weight serves activations "
                        "of its scales' dtype (quantize_int4(..., dtype=x.dtype))")
    check_group_size(group_size, k, "w.group_size")
    if out is not None and not isinstance(out, Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out is not None and out.dtype is not x.dtype:
        raise TypeError(f"out has dtype {out.dtype}; {'int4_gated_linear' if gated else 'int4_linear'} writes x's "
                        f"dtype {x.dtype}")
    m = xs[0] if len(xs) == 2 else xs[:-1].numel()
    n = packed.shape[0] if isinstance(packed, Tensor) and packed.dim() else 0   # checked by the op
    if gated:
        op = choose_kernel(_gated_selection, x, "s4" if zeros is None else "u4", group_size, bias, activation, residual,
                           m, k, n, gated=True)
    else:
        op = select(x, zeros, group_size, bias, activation, residual, m, k, n)
    return op.run(x, packed, scales, zeros, group_size, bias, residual, out)


def _weight(w) -> Int4Weight:
    if not isinstance(w, Int4Weight):
        raise TypeError(f"w must be a fused_gemm.Int4Weight (from quantize_int4, int4_from_gptq or int4_from_awq), "
                        f"got {type(w).__name__}")
    return w


def int4_linear(x: Tensor, w: Int4Weight, bias: Optional[Tensor] = None, activation: Optional[str] = None,
                residual: Optional[Tensor] = None, *, out: Optional[Tensor] = None) -> Tensor:
    """``activation(x @ dequant(w).T + bias) + residual`` in one kernel, fp32 accumulation.

    x: [..., K] bf16/fp16 (w's scales' dtype); w: an Int4Weight [N, K]; bias: [N] (x's dtype);
    residual: [..., N] (may be ``out`` for an in-place residual add); output x's dtype.  The kernel
    is chosen by M (= x.numel() // K) from generator/int4/heuristics.py, built on first use and
    cached on disk.  No sync, no allocation beyond the output: CUDA-graph capturable.
    """
    w = _weight(w)
    if isinstance(x, Tensor) and x.dim() and x.shape[-1] != w.K:
        raise ValueError(f"x has K = {x.shape[-1]}, but w is [N, K] = [{w.N}, {w.K}]")
    args = (x, w.packed, w.scales, w.zeros, w.group_size, bias, activation, residual)
    return route("int4_linear", _int4_linear, args, out, x, bias, residual)


def _int4_gated(x, packed, scales, zeros, group_size, bias, activation, residual, out):
    return _int4_linear(x, packed, scales, zeros, group_size, bias, activation, residual, out, gated=True)


def int4_gated_linear(x: Tensor, w: Int4Weight, activation: str = "silu", residual: Optional[Tensor] = None, *,
                      bias: Optional[Tensor] = None, out: Optional[Tensor] = None) -> Tensor:
    """SwiGLU/GeGLU on an int4 weight in one kernel: ``activation(x @ W_gate.T + b_gate) * (x @ W_up.T
    + b_up) + residual``, [..., I], the [M, 2I] intermediate never in memory.

    w: ``quantize_int4(pack_gate_up(w_gate, w_up), group_size)`` (the packed [2I, K] weight,
    quantised after packing: each group's scales are per packed row).  bias: [2I] in x's dtype,
    ``torch.cat([b_gate, b_up])`` (a merged gate/up projection's bias as checkpoints hold it; made
    once, at load).  M <= 16 runs the decode kernel, larger M the mixed-input kernel with the gated
    family's pair epilogue.
    """
    w = _weight(w)
    if isinstance(x, Tensor) and x.dim() and x.shape[-1] != w.K:
        raise ValueError(f"x has K = {x.shape[-1]}, but w is [2I, K] = [{w.N}, {w.K}]")
    if w.N % 16:
        raise ValueError(f"w has {w.N} rows: a pack_gate_up weight has 2I rows, a multiple of 16")
    args = (x, w.packed, w.scales, w.zeros, w.group_size, bias, activation, residual)
    return route("int4_gated_linear", _int4_gated, args, out, x, bias, residual)


# -- the torch.library registrations -----------------------------------------------------------
_ARGS = ("Tensor x, Tensor packed, Tensor scales, Tensor? zeros, int group_size, Tensor? bias, str? activation, "
         "Tensor? residual")


def _linear_impl(x, packed, scales, zeros, group_size, bias, activation, residual):
    return _int4_linear(x, packed, scales, zeros, group_size, bias, activation, residual, None)


def _linear_fake(x, packed, scales, zeros, group_size, bias, activation, residual):
    if packed.dim() != 2 or scales.dim() != 2 or x.dim() == 0:
        raise ValueError(f"x {tuple(x.shape)}, packed {tuple(packed.shape)}, scales {tuple(scales.shape)}: expected "
                         "[..., K], [N, K/2] and [K/group_size, N]")
    if bias is not None and tuple(bias.shape) != (packed.shape[0],):
        raise ValueError(f"bias has shape {tuple(bias.shape)}; expected [N] = [{packed.shape[0]}] (a gated weight's "
                         "2I rows: cat(b_gate, b_up))")
    return x.new_empty((*x.shape[:-1], packed.shape[0]))


def _linear_out_impl(x, packed, scales, zeros, group_size, bias, activation, residual, out) -> None:
    _int4_linear(x, packed, scales, zeros, group_size, bias, activation, residual, out)



define("int4_linear", f"({_ARGS}) -> Tensor", _linear_impl, _linear_fake)
define("int4_linear_out", f"({_ARGS}, Tensor(a!) out) -> ()", _linear_out_impl, no_output)

def _gated_impl(x, packed, scales, zeros, group_size, bias, activation, residual):
    return _int4_gated(x, packed, scales, zeros, group_size, bias, activation, residual, None)


def _gated_fake(x, packed, scales, zeros, group_size, bias, activation, residual):
    _linear_fake(x, packed, scales, zeros, group_size, bias, activation, residual)   # the same shape checks
    return x.new_empty((*x.shape[:-1], packed.shape[0] // 2))                      # contiguous, as the kernel's


def _gated_out_impl(x, packed, scales, zeros, group_size, bias, activation, residual, out) -> None:
    _int4_gated(x, packed, scales, zeros, group_size, bias, activation, residual, out)


define("int4_gated_linear", f"({_ARGS}) -> Tensor", _gated_impl, _gated_fake)
define("int4_gated_linear_out", f"({_ARGS}, Tensor(a!) out) -> ()", _gated_out_impl, no_output)
