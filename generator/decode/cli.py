"""The decode family's command-line flags (`fused-gemm codegen/build --family decode ...`): --dtype
(the GEMM family's) and --head-dim (the rope family's) are shared."""
from __future__ import annotations

from .spec import DecodeSpec


def add_arguments(g) -> None:
    g.add_argument("--stages", type=int, default=3, help="decode: K/V tiles in flight per CTA")


def spec_from_args(args) -> DecodeSpec:
    return DecodeSpec(args.dtype, args.head_dim, args.stages)
