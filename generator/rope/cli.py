"""The rope family's command-line flags (`fused-gemm codegen/build --family rope ...`); the
mainloop flags (--dtype, --tile, --cluster, --schedule, --swap-ab, --no-pdl) are the GEMM family's."""
from __future__ import annotations

from ..gemm.spec import TileConfig
from .spec import HEAD_DIMS, L1_RESERVES_KB, STYLES, RopeSpec


def add_arguments(g) -> None:
    g.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    g.add_argument("--rotary-dim", type=int, default=0, help="rotated dims per head (default: head dim)")
    g.add_argument("--style", default="neox", choices=STYLES, help="neox: j with j+R/2; gptj: 2j with 2j+1")
    g.add_argument("--qkv-bias", action="store_true", help="compile in a QKV bias (Qwen2-style)")
    g.add_argument("--l1-reserve", type=int, default=0, choices=L1_RESERVES_KB,
                   help="KB of shared memory kept for L1 (a mainloop stage less; large-M prefill)")


def spec_from_args(args) -> RopeSpec:
    cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, args.swap_ab)
    return RopeSpec(args.dtype, args.head_dim, args.rotary_dim, args.style, args.qkv_bias, config=cfg,
                    pdl=not args.no_pdl, l1_reserve_kb=args.l1_reserve)
