"""The quant family's command-line flags (`fused-gemm codegen/build --family quant --dtype bf16`): its
one parameter, the input dtype, is the GEMM family's --dtype."""
from __future__ import annotations

from .spec import QuantSpec


def add_arguments(g) -> None:
    del g   # nothing of its own


def spec_from_args(args) -> QuantSpec:
    return QuantSpec(args.dtype)
