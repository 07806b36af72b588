"""The int4 family's command-line flags (`fused-gemm codegen/build --family int4 [--weight e4m3]
[--gated] [--decode-tokens 8] ...`).
The mainloop flags (--dtype, --out-dtype, --epilogue, --tile, --cluster, --schedule, --scheduler,
--no-pdl) are the GEMM family's, shared; int4 kernels are always swap-AB."""
from __future__ import annotations

from ..gemm.spec import TileConfig
from .spec import WEIGHTS, DecodeConfig, Int4Spec


def add_arguments(g) -> None:
    g.add_argument("--weight", default="s4", choices=WEIGHTS,
                   help="int4: s4 symmetric codes, u4 codes with zero offsets, or e4m3 fp8 weights (W8A16, "
                        "per-channel scales)")
    g.add_argument("--gated", action="store_true",
                   help="int4: int4_gated_linear's kernel (a quantize_int4(pack_gate_up(...)) weight; the "
                        "epilogue's activation is the gate's)")
    g.add_argument("--decode-tokens", type=int, choices=(8, 16),
                   help="int4: the decode kernel for up to this many tokens instead of a mixed-input tile")


def spec_from_args(args) -> Int4Spec:
    if args.decode_tokens:
        cfg = DecodeConfig(tokens=args.decode_tokens)
    else:
        cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, swap_ab=True)
    return Int4Spec(args.dtype, args.weight, args.out_dtype, epilogue=args.epilogue, config=cfg,
                    pdl=not args.no_pdl, gated=args.gated)
