"""The int4 decode kernel's shapes x K-splits at perf/bench_int4.py's decode rows, in CUDA graphs.

    python perf/int4_decode_launch.py [--m 1 16] [--splits 0 2 4 8] [--configs NAME ..] [--variants DIR]
                                      [--shapes NxK ..] [--weight s4|e4m3]

Each cell: microseconds per call and its ratio to the HBM floor (the weight's bytes and its scales' / measured
copy bandwidth), every (config, splits) of a row timed interleaved.  --weight e4m3 times fp8_weight_linear's
decode kernels (the dense decode kernel reading an e4m3 weight) instead of int4_linear's.  Splits 0 is the launcher's own
choice; 2..8 a cluster of that many CTAs along K.  Informational: which decode shape and split a
table should take (preset 'int4-sweep' builds the configs).  --variants DIR adds builds of a kernel
edit side by side (perf/build_variants.py: DIR/<name>/lib.so and uri.txt; the int4 family's decode kernels of
--weight, bf16 x, no epilogue).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import fused_gemm
from fused_gemm import jit
from fused_gemm.bench.timing import compare, copy_bandwidth, require_gpu, rotation_count, warm_gpu
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.int4.heuristics import DECODE_SWEEP_CONFIGS, FP8_DECODE_SWEEP_CONFIGS
from fused_gemm.generator.int4.spec import DecodeConfig, Int4Spec
from fused_gemm.int4.op import Int4Op

from build_variants import load_builds   # perf/, beside this script

SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336)]     # (N, K), Llama-3-8B: bench_int4's
GROUP = 128


def weight_bytes(weight: str, n: int, k: int) -> int:
    """What the floor counts: int4 codes and g128 bf16 scales, or e4m3 values and fp32 per-channel scales."""
    return n * k + 4 * n if weight == "e4m3" else n * k // 2 + n * (k // GROUP) * 2


def weights(weight: str, n: int, k: int, count: int):
    """`count` copies of one weight, as (tensor, scales, group) for Int4Op.run."""
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    if weight == "e4m3":
        w0 = fused_gemm.quantize_fp8_weight(w)
        return [(w0.weight.clone(), w0.scale.clone(), k) for _ in range(count)]
    w0 = fused_gemm.quantize_int4(w, GROUP)
    return [(w0.packed.clone(), w0.scales.clone(), GROUP) for _ in range(count)]


def row(m: int, n: int, k: int, configs, splits, bandwidth: float, weight: str = "s4"):
    """configs: name -> op (a decode kernel of the int4 family, bf16 x, `weight` weights, no epilogue)."""
    per_set = weight_bytes(weight, n, k) + 2 * m * k + 2 * m * n
    count = rotation_count(per_set)
    sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), w) for w in weights(weight, n, k, count)]
    variants = {}
    for name, op in configs.items():
        for s in splits:
            launch = LaunchOptions(pdl=True, splits=max(s, 1))
            variants[(name, s)] = [
                (lambda x=x, w=w, op=op, launch=launch:
                 op.run(x, w[0], w[1], None, w[2], None, None, None, launch)) for x, w in sets]
    t = compare(variants, graph=True, min_calls=64, reps=11)
    floor = weight_bytes(weight, n, k) / bandwidth
    return {key: (sec * 1e6, sec / floor) for key, sec in t.items()}, floor * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--splits", type=int, nargs="+", default=[0, 2, 4, 8])
    ap.add_argument("--configs", nargs="+", help="decode config names (default: the sweep's, or none with --variants)")
    ap.add_argument("--variants", type=Path, help="DIR/<name>/lib.so builds to time too (see above)")
    ap.add_argument("--shapes", nargs="+", metavar="NxK", help="weight shapes (default: bench_int4's decode rows)")
    ap.add_argument("--weight", choices=("s4", "e4m3"), default="s4",
                    help="s4 (int4_linear's decode kernel) or e4m3 (fp8_weight_linear's: the dense decode kernel)")
    args = ap.parse_args(argv)
    require_gpu("int4_decode_launch")
    if args.configs:
        configs = [DecodeConfig.from_name(c) for c in args.configs]
    else:   # with --variants, only they
        sweep = DECODE_SWEEP_CONFIGS if args.weight == "s4" else FP8_DECODE_SWEEP_CONFIGS
        configs = [] if args.variants else list(sweep)
    ops = {c.name: (c.tokens, jit.compile(Int4Spec("bf16", args.weight, config=c))) for c in configs}
    ops.update({name: (spec.config.tokens, Int4Op(spec, library))
                for name, (spec, library) in load_builds(args.variants).items()} if args.variants else {})
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    bandwidth = copy_bandwidth()
    warm_gpu()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s; {args.weight} decode kernels in "
          "CUDA graphs, us per call (x the HBM floor of the weight and its scales); splits 0 = the launcher's choice")
    with torch.no_grad():
        for m in args.m:
            fits = {name: op for name, (tokens, op) in ops.items() if m <= tokens}
            for n, k in shapes:
                cells, floor = row(m, n, k, fits, args.splits, bandwidth, args.weight)
                print(f"\n{m}x{n}x{k}  floor {floor:.1f} us")
                print(f"{'config':<26}" + "".join(f"{'splits ' + str(s):>16}" for s in args.splits))
                for name in fits:
                    print(f"{name:<26}" + "".join(
                        f"{cells[(name, s)][0]:>9.1f} ({cells[(name, s)][1]:.2f})" for s in args.splits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
