"""Times candidate tile configs and scheduler launch options of the gated (SwiGLU) kernel on
Llama-3-8B's MLP (K = 4096, I = 14336) against torch.compile of the eager SwiGLU and torch.mm on the
concatenated [2I, K] weight, on bench_gated's rotated inputs, to tune which kernel and LaunchOptions
serve which M (generator/gated/heuristics.py).

    python perf/sweep_gated.py --build-only    # compile every candidate (no GPU needed)
    python perf/sweep_gated.py [--json out.json] [--m 1024 4096 16384]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from fused_gemm.generator import GatedSpec, LaunchOptions as L, TileConfig, build_many

K, I = 4096, 14336
CONFIGS = [
    TileConfig((128, 128, 64), (1, 2, 1), "pingpong"),
    TileConfig((128, 128, 64), (2, 2, 1), "pingpong"),
    TileConfig((128, 128, 64), (2, 1, 1), "pingpong"),
    TileConfig((128, 256, 64), (2, 1, 1), "cooperative"),
    TileConfig((256, 128, 64), (1, 2, 1), "cooperative"),
    TileConfig((64, 256, 64), (1, 2, 1), "pingpong"),
    TileConfig((64, 256, 64), (2, 1, 1), "pingpong"),
    TileConfig((128, 192, 64), (1, 2, 1), "pingpong"),
    TileConfig((256, 192, 64), (1, 2, 1), "cooperative"),
]
LAUNCHES = [L(), L(swizzle=2), L(swizzle=4), L(swizzle=8), L(raster="along_n"), L(swizzle=4, raster="along_m"),
            L(swizzle=8, raster="along_m"), L(swizzle=4, raster="along_n"), L(swizzle=8, raster="along_n")]


def specs():
    return [GatedSpec("bf16", activation="silu", config=c) for c in CONFIGS]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--m", type=int, nargs="*", default=[1024, 4096, 16384])
    ap.add_argument("--group", type=int, default=3, help="candidates timed together with the baselines")
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    build_many(specs(), progress=False)
    if args.build_only:
        return 0
    import torch
    import fused_gemm
    from fused_gemm.bench.timing import paired_ratios, time_samples, warm_gpu
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_gated import VARIANTS, make_sets

    warm_gpu()
    rows = []
    for m in args.m:
        sets = make_sets(m)   # rotated inputs larger than L2, as bench_gated times them
        flop = 2 * m * 2 * I * K
        baselines = {"compiled": [VARIANTS["compiled"](s) for s in sets], "torch.mm [2I,K]": [VARIANTS["mm_cat"](s) for s in sets]}
        candidates = {}
        for spec in specs():
            op = fused_gemm.compile(spec)
            for launch in LAUNCHES:
                candidates[f"{spec.config.name} {launch.swizzle}/{launch.raster}"] = [
                    lambda op=op, launch=launch, s=s: op(s["x"], s["packed"], launch=launch) for s in sets]
        # Small groups, each timed with the baselines, as ratios per repetition: a large GEMM's clocks
        # sag with power over seconds, and a ratio of medians taken seconds apart records that instead.
        names = list(candidates)
        for i in range(0, len(names), args.group):
            group = {n: candidates[n] for n in names[i:i + args.group]}
            samples = time_samples({**baselines, **group}, min_calls=10 if m >= 4096 else 20, reps=args.reps)
            over, over_mm = paired_ratios(samples, "compiled"), paired_ratios(samples, "torch.mm [2I,K]")
            for name in [*baselines, *group] if i == 0 else group:
                us = statistics.median(samples[name]) * 1e6
                rows.append({"M": m, "variant": name, "us": us, "tflops": flop / us / 1e6, "vs_compiled": 1 / over[name],
                             "vs_mm": 1 / over_mm[name]})
        mine = sorted((r for r in rows if r["M"] == m), key=lambda r: -r["vs_compiled"])
        print(f"M={m}: best 12 (ratios per repetition against torch.compile and torch.mm in the same group)")
        for r in mine[:12]:
            print(f"  {r['variant']:<48}{r['us']:>9.1f}us{r['tflops']:>6.0f} TF/s  vs compiled {r['vs_compiled']:.3f}x"
                  f"  vs mm {r['vs_mm']:.3f}x")
        del sets, candidates, baselines
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
