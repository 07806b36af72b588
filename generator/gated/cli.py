"""The gated family's command-line flags (`fused-gemm codegen/build --family gated ...`).  The
mainloop flags (--dtype, --out-dtype, --tile, --cluster, --schedule, --swap-ab, --no-pdl) are the
GEMM family's, shared."""
from __future__ import annotations

from ..gemm.spec import ACTIVATIONS, TileConfig
from .spec import GatedSpec


def add_arguments(g) -> None:
    g.add_argument("--activation", default="silu", choices=ACTIVATIONS, help="gate activation (silu: SwiGLU)")
    g.add_argument("--with-bias", action="store_true", help="compile in gate/up bias vectors")
    g.add_argument("--with-residual", action="store_true", help="compile in a residual add")


def spec_from_args(args) -> GatedSpec:
    cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, args.swap_ab)
    return GatedSpec(args.dtype, args.out_dtype, args.activation, bias=args.with_bias, residual=args.with_residual,
                     config=cfg, pdl=not args.no_pdl)
