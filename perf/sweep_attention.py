"""Attention kernel configurations against cuDNN (SDPA's fastest backend here), interleaved, one run:
what generator/attention/heuristics.py's table is made from.

    python perf/sweep_attention.py [--build-only] [--json out.json] [--s 1024 4096 16384]
                                   [--block-n 64 128] [--pingpong] [--dims 128 64] [--overlap]
                                   [--epilogues] [--chain] [--variants DIR] [--table-only]
                                   [--also URI [URI ...]] [--hkv 8]

Per head dim (bf16), every candidate (Q tile, K/V tile, persistent or not; with --pingpong also the
ping-pong softmax; with --epilogues each also with the consumers' epilogues
free of their turns; with --chain each persistent overlapped 128-row one also with chained tiles) at
B * S = 16k tokens, H = 32, S in {1k, 4k, 16k} (or --s), causal and not:
TFLOP/s, the ratio to cuDNN, and each output's error against cuDNN's.  --variants DIR adds builds of
a kernel edit (perf/build_variants.py: DIR/<name>/lib.so) to the rows of their head dim and mask, with
each one's error against cuDNN; --table-only times only the table's pick per row (beside the variants
and, with --epilogues, beside the same kernel with the other epilogue order); --also adds kernels by URI
(bf16, built if missing) to the rows of their head dim and mask; --hkv gives K/V fewer heads (GQA; SDPA with
enable_gqa).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import List

import torch

import fused_gemm
from fused_gemm.attention.op import AttentionOp
from fused_gemm.bench.attention_ops import BACKENDS, TOKENS, flops, sdpa
from fused_gemm.bench.timing import paired_ratios, time_samples, warm_gpu
from fused_gemm.generator import AttentionSpec, build_many
from fused_gemm.generator.errors import SpecError
from fused_gemm.generator.attention import heuristics

from bench_attention import HEADS   # perf/, beside this script
from build_variants import load_builds

# Every candidate at bf16: Q tile x K/V tile x persistent or not; 192-row Q tiles fit D = 64 only, 64-row ones
# (two CTAs an SM) leave D = 128 three K/V stages, and two (too few) beside a persistent O tile.  64-key tiles
# lost at both head dims, and the ping-pong softmax lost or tied everywhere (perf/results/h100_sweep_attention.txt):
# --block-n 64 128 and --pingpong weigh them again.
def candidates(d, causal, block_n=(128,), pingpong=False, overlap=False, epilogues=False,
               chain=False) -> List[AttentionSpec]:
    specs = []
    for bm, bn, persistent, pp, ovl, ordered, ch in itertools.product(
            (64, 128, 192) if d == 64 else (64, 128), block_n, (False, True), (False, True), (False, True),
            (True, False), (False, True)):
        if ((pp and not (pingpong and bm > 64)) or (ovl and not (overlap and not pp)) or (not ordered and not epilogues)
                or (ch and not (chain and persistent and ovl and bm == 128))):
            continue
        try:
            specs.append(AttentionSpec("bf16", d, causal, bn, persistent, block_m=bm, pingpong=pp, overlap=ovl,
                                       ordered_epilogue=ordered, chain=ch))
        except SpecError as e:   # 64-row tiles whose two CTAs an SM leave too few K/V stages
            if bm != 64:
                raise
            print(f"skipped: {e}", file=sys.stderr)
    return specs


def table_specs(d, causal, s, epilogues=False) -> List[AttentionSpec]:
    """The table's kernel for this row, and with `epilogues` the same kernel with the other epilogue order."""
    picked = heuristics.pick("bf16", d, causal, s)
    return [picked, replace(picked, ordered_epilogue=not picked.ordered_epilogue)] if epilogues else [picked]


def poisoned(q, fn):
    """fn()'s result, its output most likely allocated where a NaN-filled tensor of q's size just was: without
    this, a kernel that writes nothing would read as correct from the previous variant's freed output."""
    torch.full_like(q, float("nan"))
    return fn()


def name(spec: AttentionSpec) -> str:
    return (f"{spec.block_m}x{spec.block_n}{'p' if spec.persistent else ''}{'-pp' if spec.pingpong else ''}"
            f"{'-ovl' if spec.overlap else ''}{'-chain' if spec.chain else ''}"
            f"{'' if spec.ordered_epilogue else '-free'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--pingpong", action="store_true", help="each candidate also with the ping-pong softmax")
    ap.add_argument("--block-n", type=int, nargs="+", default=[128], help="K/V tiles to weigh")
    ap.add_argument("--dims", type=int, nargs="+", default=[128, 64], help="head dims")
    ap.add_argument("--overlap", action="store_true", help="each candidate also with the overlapped mainloop")
    ap.add_argument("--epilogues", action="store_true", help="each candidate with ordered and free epilogues")
    ap.add_argument("--chain", action="store_true", help="persistent overlapped candidates also with chained tiles")
    ap.add_argument("--s", type=int, nargs="+", default=[1024, 4096, 16384], help="sequence lengths")
    ap.add_argument("--variants", type=Path, help="DIR/<name>/lib.so builds to time too (see above)")
    ap.add_argument("--table-only", action="store_true", help="time only the table's kernel per row")
    ap.add_argument("--hkv", type=int, default=HEADS, help="K/V heads (GQA when under H = 32)")
    ap.add_argument("--also", nargs="+", default=[], metavar="URI", help="more kernels, timed in their rows")
    args = ap.parse_args(argv)
    if args.hkv < 1 or HEADS % args.hkv:
        ap.error(f"--hkv: a divisor of H = {HEADS}")
    if not all(0 < s <= TOKENS for s in args.s):
        ap.error(f"--s: lengths from 1 to {TOKENS} (the batch holds {TOKENS} tokens)")
    if args.chain and not args.overlap:
        ap.error("--chain weighs chained tiles of the overlapped candidates: add --overlap")
    also = [AttentionSpec.from_uri(u) for u in args.also]
    if any(a.dtype != "bf16" or a.head_dim not in args.dims for a in also):
        ap.error("--also: bf16 kernels of a head dim in --dims")

    def row_specs(d, causal, s):
        picked = (table_specs(d, causal, s, args.epilogues) if args.table_only else
                  candidates(d, causal, tuple(args.block_n), args.pingpong, args.overlap, args.epilogues, args.chain))
        return list(dict.fromkeys(picked + [a for a in also if (a.head_dim, a.causal) == (d, causal)]))

    build_many(list(dict.fromkeys(spec for d in args.dims for s in args.s for causal in (False, True)
                                  for spec in row_specs(d, causal, s))), progress=False)
    if args.build_only:
        return 0
    variant_ops = {}
    if args.variants:
        variant_ops = {n: (spec_, AttentionOp(spec_, lib)) for n, (spec_, lib) in load_builds(args.variants).items()
                       if spec_.dtype == "bf16"}
    warm_gpu()
    rows = []
    with torch.no_grad():
        for d in args.dims:
            for s in args.s:
                for causal in (False, True):
                    b = TOKENS // s
                    q, k, v = (torch.randn(b, s, h, d, dtype=torch.bfloat16, device="cuda")
                               for h in (HEADS, args.hkv, args.hkv))
                    variants = {"cudnn": [sdpa(BACKENDS["cudnn"], q, k, v, causal, gqa=args.hkv != HEADS)]}
                    for spec in row_specs(d, causal, s):
                        op = fused_gemm.compile(spec)
                        assert name(spec) not in variants, f"two kernels named {name(spec)}"
                        variants[name(spec)] = [lambda op=op: op(q, k, v)]
                    for label, (spec_, op) in variant_ops.items():
                        if (spec_.head_dim, spec_.causal) == (d, causal):
                            variants[label] = [lambda op=op: op(q, k, v)]
                    want = variants["cudnn"][0]().transpose(1, 2).float()   # SDPA gives [B, H, S, D]
                    errs = {label: float((poisoned(q, fn)[0].float() - want).norm() / want.norm())
                            for label, (fn,) in variants.items() if label != "cudnn"}
                    err = max(errs.values(), key=lambda e: math.inf if math.isnan(e) else e)   # NaN: unwritten
                    samples = time_samples(variants, reps=7, min_calls=max(2, 16384 // s))
                    over = paired_ratios(samples, "cudnn")
                    t_cudnn = sorted(samples["cudnn"])[len(samples["cudnn"]) // 2]
                    fl = flops(b, HEADS, s, s, d, causal)
                    row = {"D": d, "S": s, "causal": causal, "cudnn_tflops": fl / t_cudnn / 1e12, "max_rel_err": err,
                           "rel_err": errs,
                           "ours": {n: 1 / over[n] for n in variants if n != "cudnn"}}
                    rows.append(row)
                    print(row, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "hkv": args.hkv, "rows": rows},
                                              indent=1))
    print(f"\ndevice: {torch.cuda.get_device_name()}; bf16, B*S = {TOKENS}, H = {HEADS}, Hkv = {args.hkv}; "
          "speed vs cuDNN (>1: faster)")
    own = set(variant_ops) | {name(a) for a in also}   # kernels outside the table: their own errors
    for r in rows:
        cands = "  ".join(f"{k}={v:.3f}" + (f" (err {r['rel_err'][k]:.1e})" if k in own else "")
                          for k, v in r["ours"].items())
        print(f"D={r['D']:<4} S={r['S']:<6} causal={str(r['causal']):<6} cudnn {r['cudnn_tflops']:.0f} TF/s  {cands}"
              f"  err vs cudnn {r['max_rel_err']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
