"""One fp8 prefill shape: our kernel under several launch options against torch._scaled_mm, each pair timed
as perf/bench_fp8.py times its rows (10 calls a sample, 31 samples, ratio per repetition: sustained clocks), to
check what the tuner's shorter, grouped timings picked.

    python perf/fp8_launch_sustained.py --m 16384 --n 4096 --k 14336 --fast --config t128x128x128_c2x1x1_pp_persist
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

from fused_gemm.bench.timing import paired_ratios, require_gpu, time_samples, warm_gpu
from fused_gemm.bench.tune import FP8, WORKLOADS
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.gemm.tuned import FP8_OP

LAUNCHES = [LaunchOptions(swizzle=s, raster=r) for s in (1, 2, 4, 8) for r in ("heuristic", "along_m", "along_n")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=14336)
    ap.add_argument("--fast", action="store_true", help="fast accumulation on both sides")
    ap.add_argument("--config", nargs="+", required=True, help="the tuner's candidate names (fused-gemm tune --op fp8[_fast])")
    args = ap.parse_args(argv)
    require_gpu("fp8_launch_sustained")
    m, n, k = args.m, args.n, args.k
    work = WORKLOADS[FP8_OP[args.fast]](FP8, n, k, m)      # the tuner's operands, kernels and calls
    theirs = [(lambda s=s: work.baseline_call(s)) for s in work.sets]
    warm_gpu()
    print(f"{torch.cuda.get_device_name()}: {m}x{n}x{k} e4m3, {'fast' if args.fast else 'precise'} accumulation; "
          "TFLOP/s ratio ours / _scaled_mm (median of per-repetition ratios), each launch paired with it alone")
    for name in args.config:
        for launch in LAUNCHES:
            samples = time_samples({"theirs": theirs, "ours": work.calls((name, launch))}, min_calls=10, reps=31)
            ratio = 1.0 / paired_ratios(samples, "theirs")["ours"]
            print(f"  {name:<36} swizzle {launch.swizzle} raster {launch.raster:<10} {ratio:6.3f}  "
                  f"ours {statistics.median(samples['ours']) * 1e3:7.3f} ms  theirs "
                  f"{statistics.median(samples['theirs']) * 1e3:7.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
