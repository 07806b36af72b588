"""Times candidate tile configs and launch options of the fp8 (W8A8, per-token x per-channel scales,
bf16 out) GEMM on Llama-3-8B's prefill shapes against torch._scaled_mm with the same scales and
accumulation mode, to choose generator/gemm/heuristics.py's FP8_RULES.

    python perf/sweep_fp8.py --build-only              # compile every candidate (no GPU needed)
    python perf/sweep_fp8.py [--json out.json] [--m 4096] [--accum precise fast] [--promotion 4 8 16]
                             [--configs t128x128x128_c1x2x1_coop_persist_e128x64 ...] [--variants DIR]

Variants are timed three at a time with _scaled_mm on the same inputs (ratios per repetition, as
`fused-gemm tune` does): dozens at once skew the baseline.  --variants DIR adds builds of a kernel edit
(perf/build_variants.py: DIR/<name>/lib.so, fp8 specs only) with each launch option, their relative error
against float64 printed beside.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from fused_gemm.generator import GemmSpec, LaunchOptions as L, TileConfig, build_many
from fused_gemm.generator.gemm.heuristics import FP8_EPILOGUE_TILE
from fused_gemm.generator.gemm.spec import FP8_PROMOTION, Epilogue

from build_variants import load_builds   # perf/, beside this script

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
# Without fast accumulation each consumer warpgroup keeps three copies of its accumulators (two of wgmma's,
# csrc/fused_gemm/fp8, and the fp32 sum): at most 64x128 of the tile per warpgroup, or it spills.
CONFIGS = {
    False: [TileConfig((128, 128, 128), cluster, "cooperative", epilogue_tile=FP8_EPILOGUE_TILE)
            for cluster in ((2, 1, 1), (1, 2, 1), (1, 1, 1))] + [   # 1x1: cuBLAS's (nvjet 128x128_128x6 coopA)
            TileConfig((64, 128, 128), (1, 2, 1), "pingpong"),
            TileConfig((64, 128, 128), (2, 1, 1), "pingpong")],
    True: [TileConfig((128, 128, 128), (2, 1, 1), "pingpong"),
           TileConfig((128, 128, 128), (1, 2, 1), "pingpong"),
           TileConfig((128, 128, 128), (1, 2, 1), "cooperative"),   # cuBLAS's tile and cluster (nvjet 128x128_128x6 1x2)
           TileConfig((128, 256, 128), (1, 2, 1), "cooperative"),
           TileConfig((256, 128, 128), (2, 1, 1), "cooperative")],
}
LAUNCHES = [L(), L(swizzle=4), L(swizzle=8, raster="along_m")]
EPILOGUE = Epilogue(row_scale=True, col_scale=True)


def specs(accums, promotions=(FP8_PROMOTION,), names=None):
    """Each accumulation's configs (those named, if any); without fast accumulation, at each of the
    fp32 promotion intervals (wgmmas between promotions)."""
    return [GemmSpec("e4m3", "e4m3", out_dtype="bf16", epilogue=EPILOGUE, config=c, fast_accum=fast, promotion=p)
            for fast in accums for c in CONFIGS[fast] if not names or c.name in names
            for p in ((FP8_PROMOTION,) if fast else promotions)]


def rel_error(out, x, w, xs, ws) -> float:
    """Relative error norm of a row/column-scaled fp8 GEMM against float64."""
    ref = (x.double() @ w.double().t()) * xs.double() * ws.double()
    return float((out.double() - ref).norm() / ref.norm())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--m", type=int, nargs="*", default=[4096])
    ap.add_argument("--accum", nargs="*", choices=("precise", "fast"), default=["precise", "fast"])
    ap.add_argument("--promotion", type=int, nargs="*", default=[FP8_PROMOTION],
                    help="precise: wgmmas between fp32 promotions")
    ap.add_argument("--configs", nargs="*", help="tile config names (default: every candidate)")
    ap.add_argument("--variants", type=Path, help="DIR/<name>/lib.so builds to time too (see above)")
    args = ap.parse_args(argv)
    accums = [a == "fast" for a in args.accum]
    build_many(specs(accums, args.promotion, args.configs), progress=False)
    if args.build_only:
        return 0
    import torch
    import fused_gemm
    from fused_gemm.bench.ops import fp8_scaled_operands
    from fused_gemm.bench.timing import paired_ratios, time_samples, warm_gpu
    from fused_gemm.gemm.op import GemmOp

    variant_ops = {n: GemmOp(*b) for n, b in load_builds(args.variants).items()} if args.variants else {}
    warm_gpu()
    rows = []
    for m in args.m:
        for layer, (n, k) in SHAPES.items():
            x, w, xs, ws = fp8_scaled_operands(m, n, k)
            for fast in accums:
                base = [lambda fast=fast: torch._scaled_mm(x, w.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16,
                                                           use_fast_accum=fast)]
                variants = [(spec.config.name + (f"_promo{spec.promotion}" if spec.promotion != FP8_PROMOTION else ""),
                             fused_gemm.compile(spec), launch)
                            for spec in specs([fast], args.promotion, args.configs) for launch in LAUNCHES]
                variants += [(name, op, launch) for name, op in variant_ops.items() if op.spec.fast_accum == fast
                             for launch in LAUNCHES]
                errors = {name: rel_error(op(x, w, row_scale=xs.view(-1), col_scale=ws.view(-1)), x, w, xs, ws)
                          for name, op, _ in variants if name in variant_ops} if variant_ops else {}
                for i in range(0, len(variants), 3):
                    group = {"base": base}
                    for j, (_, op, launch) in enumerate(variants[i:i + 3]):
                        group[str(j)] = [lambda op=op, launch=launch: op(x, w, row_scale=xs.view(-1),
                                                                         col_scale=ws.view(-1), launch=launch)]
                    samples = time_samples(group, min_calls=10, reps=9)
                    over = paired_ratios(samples, "base")
                    for j, (name, _, launch) in enumerate(variants[i:i + 3]):
                        rows.append({"M": m, "layer": layer, "fast": fast, "config": name,
                                     "launch": f"{launch.swizzle}/{launch.raster}", "vs_scaled_mm": 1 / over[str(j)],
                                     "us": statistics.median(samples[str(j)]) * 1e6})
                for name, err in errors.items():
                    print(f"M={m} {layer} {name}: rel err vs float64 {err:.2e}")
    for fast in accums:
        print(f"{'fast' if fast else 'precise'} accumulation: speed vs torch._scaled_mm (geomean over shapes, per M)")
        for m in args.m:
            table = {}
            for r in rows:
                if r["M"] == m and r["fast"] == fast:
                    table.setdefault((r["config"], r["launch"]), []).append(r["vs_scaled_mm"])
            ranked = sorted(table.items(), key=lambda kv: -statistics.geometric_mean(kv[1]))
            shown = ranked[:6] + [kv for kv in ranked[6:] if kv[0][0] in variant_ops or kv[0][0] in (args.configs or ())]
            for (config, launch), ratios in shown:
                print(f"  M={m:<6} {config:<40} {launch:<14} geomean {statistics.geometric_mean(ratios):.3f}  "
                      f"min {min(ratios):.3f}  " + " ".join(f"{v:.3f}" for v in ratios))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
