"""The int4 decode kernel's shapes x K-splits at perf/bench_int4.py's decode rows, in CUDA graphs.

    python perf/int4_decode_launch.py [--m 1 16] [--splits 0 2 4 8]

Each cell: microseconds per call and its ratio to the int4 HBM floor (codes + scales / measured copy
bandwidth), every (config, splits) of a row timed interleaved.  Splits 0 is the launcher's own
choice; 2..8 a cluster of that many CTAs along K.  Informational: which decode shape and split a
table should take (preset 'int4-sweep' builds the configs).
"""
from __future__ import annotations

import argparse
import sys

import torch

import fused_gemm
from fused_gemm import jit
from fused_gemm.bench.timing import compare, copy_bandwidth, require_gpu, rotation_count, warm_gpu
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.int4.heuristics import DECODE_SWEEP_CONFIGS
from fused_gemm.generator.int4.spec import DecodeConfig, Int4Spec

SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336)]     # (N, K), Llama-3-8B: bench_int4's
GROUP = 128


def row(m: int, n: int, k: int, configs, splits, bandwidth: float):
    per_set = n * k // 2 + n * (k // GROUP) * 2 + 2 * m * k + 2 * m * n
    w0 = fused_gemm.quantize_int4(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5, GROUP)
    sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             w0 if i == 0 else fused_gemm.Int4Weight(w0.packed.clone(), w0.scales.clone(), None, GROUP, n, k))
            for i in range(rotation_count(per_set))]
    variants = {}
    for cfg in configs:
        op = jit.compile(Int4Spec("bf16", "s4", config=cfg))
        for s in splits:
            launch = LaunchOptions(pdl=True, splits=max(s, 1))
            variants[(cfg.name, s)] = [
                (lambda x=x, w=w, op=op, launch=launch:
                 op.run(x, w.packed, w.scales, None, GROUP, None, None, None, launch)) for x, w in sets]
    t = compare(variants, graph=True, min_calls=64, reps=11)
    floor = (n * k // 2 + n * (k // GROUP) * 2) / bandwidth
    return {key: (sec * 1e6, sec / floor) for key, sec in t.items()}, floor * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--splits", type=int, nargs="+", default=[0, 2, 4, 8])
    ap.add_argument("--configs", nargs="+", help="decode config names (default: the sweep's)")
    args = ap.parse_args(argv)
    require_gpu("int4_decode_launch")
    configs = [DecodeConfig.from_name(c) for c in args.configs] if args.configs else list(DECODE_SWEEP_CONFIGS)
    bandwidth = copy_bandwidth()
    warm_gpu()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s; int4 decode kernels in "
          "CUDA graphs, us per call (x the int4 HBM floor); splits 0 = the launcher's choice")
    with torch.no_grad():
        for m in args.m:
            fits = [c for c in configs if m <= c.tokens]
            for n, k in SHAPES:
                cells, floor = row(m, n, k, fits, args.splits, bandwidth)
                print(f"\n{m}x{n}x{k}  floor {floor:.1f} us")
                print(f"{'config':<26}" + "".join(f"{'splits ' + str(s):>16}" for s in args.splits))
                for cfg in fits:
                    print(f"{cfg.name:<26}" + "".join(
                        f"{cells[(cfg.name, s)][0]:>9.1f} ({cells[(cfg.name, s)][1]:.2f})" for s in args.splits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
