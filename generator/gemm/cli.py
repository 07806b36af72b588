"""The GEMM family's command-line flags (`fused-gemm codegen/build --family gemm ...`)."""
from __future__ import annotations

import argparse

from ..gemv import UNROLLS as DECODE_UNROLLS, WARPS as DECODE_WARPS, DecodeConfig
from .spec import ACTIVATIONS, SCHEDULES, TILE_SCHEDULERS, GemmSpec, TileConfig


def _triple(text: str):
    try:
        vals = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not like 128x256x64") from None
    if len(vals) != 3:
        raise argparse.ArgumentTypeError(f"{text!r} is not like 128x256x64")
    return vals


def add_arguments(g) -> None:
    g.add_argument("--dtype", default="bf16", help="A (activation) dtype: bf16, fp16 or e4m3 (fp8, W8A8)")
    g.add_argument("--b-dtype", help="B (weight) dtype (default: --dtype)")
    g.add_argument("--out-dtype", help="D dtype: bf16, fp16 or fp32 (default: --dtype; bf16 for e4m3)")
    g.add_argument("--epilogue", default="none",
                   help=f"e.g. 'bias+gelu_tanh', 'bias+silu+residual'; activations: {', '.join(ACTIVATIONS)}")
    g.add_argument("--b-layout", default="nk", choices=("nk", "kn"), help="weight [N,K] (nn.Linear) or [K,N]")
    g.add_argument("--tile", type=_triple, default=(128, 256, 64))
    g.add_argument("--cluster", type=_triple, default=(2, 1, 1))
    g.add_argument("--schedule", default="cooperative", choices=tuple(SCHEDULES))
    g.add_argument("--scheduler", default="persistent", choices=tuple(TILE_SCHEDULERS))
    g.add_argument("--swap-ab", action="store_true")
    g.add_argument("--no-pdl", action="store_true", help="build without grid-dependency control")
    g.add_argument("--fast-accum", action="store_true", help="e4m3: FP8FastAccum schedules (no fp32 promotion)")
    g.add_argument("--decode-tokens", type=int, choices=(8, 16),
                   help="gemm/int4: the family's decode kernel (a weight-streaming GEMV) for up to this many "
                        "tokens instead of a tile config")
    g.add_argument("--decode-warps", type=int, choices=DECODE_WARPS, help="with --decode-tokens: warps per CTA")
    g.add_argument("--decode-blocks", type=int, choices=(1, 2, 4, 8),
                   help="with --decode-tokens: 16-row weight blocks per CTA (the dense decode kernel, gemm and int4 "
                        "--weight e4m3: at most 4)")
    g.add_argument("--decode-unroll", type=int, choices=DECODE_UNROLLS,
                   help="the dense decode kernel (gemm, int4 --weight e4m3), with --decode-tokens and one block: K "
                        "chunks a register stage")


def decode_config(args, **defaults) -> DecodeConfig:
    """--decode-tokens/--decode-warps/--decode-blocks/--decode-unroll, each unset one the family's default."""
    given = {"tokens": args.decode_tokens, "warps": args.decode_warps, "blocks": args.decode_blocks,
             "unroll": getattr(args, "decode_unroll", None)}
    return DecodeConfig(**{**defaults, **{k: v for k, v in given.items() if v}})


def spec_from_args(args) -> GemmSpec:
    if args.decode_tokens:
        cfg = decode_config(args, blocks=1)
    else:
        cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, args.swap_ab)
    return GemmSpec(args.dtype, args.b_dtype, out_dtype=args.out_dtype, b_layout=args.b_layout,
                    epilogue=args.epilogue, config=cfg, pdl=not args.no_pdl, fast_accum=args.fast_accum)
