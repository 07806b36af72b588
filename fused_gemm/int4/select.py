"""Which int4-family kernel a call of int4_linear, int4_gated_linear or fp8_weight_linear runs: the
spec for its x dtype, weight kind, epilogue, k-tile class, M bucket and weight shape (N and K pick
int4_linear's decode rows; generator/int4/heuristics.py), compiled on first use and memoised per op
(``jit.Selection``), so a call costs one dict hit."""
from __future__ import annotations

import torch

from .. import jit
from ..generator import Epilogue, SpecError
from ..generator.gemm.spec import ACTIVATIONS
from ..generator.int4.heuristics import row_index, spec_for
from ..kernel_op import dtype_name
from .op import Int4Op

Tensor = torch.Tensor


def select(selection: jit.Selection, x, weight: str, group_size: int, bias, activation, residual, m: int,
           k: int, n: int, gated: bool = False) -> Int4Op:
    """The kernel for weight kind ``weight`` ('s4', 'u4' or 'e4m3') and this call's other arguments
    (n: the weight's rows; gated: int4_gated_linear's)."""
    row = row_index("sm90a", weight, m)
    for name, t in (("bias", bias), ("residual", residual)):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    # The k-tile depends on the group size only through these two (heuristics.config_for).
    k_class = (group_size == k, group_size % 128)
    # The weight's shape itself, not its class (heuristics.shape_class): a call then adds no table walk.
    key = (x.dtype, weight, None if bias is None else bias.dtype, activation,
           None if residual is None else residual.dtype, k_class, row, gated, n, k)

    def choose() -> Int4Op:
        act = "identity" if activation in (None, "none") else activation
        if act not in ACTIVATIONS:
            raise ValueError(f"activation {activation!r} is not one of {ACTIVATIONS}")
        try:
            spec = spec_for(dtype_name("x", x.dtype), weight,
                            Epilogue(bias=bias is not None, activation=act, residual=residual is not None),
                            group_size, k, m,
                            bias_dtype=dtype_name("bias", None if bias is None else bias.dtype),
                            residual_dtype=dtype_name("residual", None if residual is None else residual.dtype),
                            gated=gated, n=n)
        except SpecError as exc:
            raise TypeError(str(exc)) from None
        return jit.compile(spec)
    return selection.get(key, "x", x, choose)
