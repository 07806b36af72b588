"""The int4 family's command-line flags (`fused-gemm codegen/build --family int4 [--weight e4m3]
[--gated] [--decode-tokens 8] ...`).
The mainloop and decode flags (--dtype, --out-dtype, --epilogue, --tile, --cluster, --schedule,
--scheduler, --no-pdl, --decode-tokens/-warps/-blocks/-unroll) are the GEMM family's, shared; the mixed-input
kernels are always swap-AB."""
from __future__ import annotations

from ..gemm.cli import decode_config
from ..gemm.spec import TileConfig, canonical_dtype
from .spec import FP8_WEIGHTS, WEIGHTS, Int4Spec


def add_arguments(g) -> None:
    g.add_argument("--weight", default="s4", choices=WEIGHTS,
                   help="int4: s4 symmetric codes, u4 codes with zero offsets, or e4m3 fp8 weights (W8A16, "
                        "per-channel scales)")
    g.add_argument("--gated", action="store_true",
                   help="int4: int4_gated_linear's kernel (a quantize_int4(pack_gate_up(...)) weight; the "
                        "epilogue's activation is the gate's)")


def spec_from_args(args) -> Int4Spec:
    if args.decode_tokens:   # e4m3 weights: the dense decode kernel's one-block default, as the GEMM family's
        cfg = decode_config(args, blocks=1) if canonical_dtype(args.weight) in FP8_WEIGHTS else decode_config(args)
    else:
        cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, swap_ab=True)
    return Int4Spec(args.dtype, args.weight, args.out_dtype, epilogue=args.epilogue, config=cfg,
                    pdl=not args.no_pdl, gated=args.gated)
