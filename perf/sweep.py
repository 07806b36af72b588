"""Times candidate tile configs for one epilogue on the bar shapes, to tune the heuristics table
(generator/gemm/heuristics.py, installed as fused_gemm.generator.gemm.heuristics).

    python perf/sweep.py --build-only      # compile every candidate here (no GPU needed)
    python perf/sweep.py [--json out.json] # on the GPU: time each candidate against torch.mm
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

from fused_gemm.generator import GemmSpec, TileConfig, build_many  # noqa: E402

from fused_gemm.generator import LaunchOptions as L  # noqa: E402

EPILOGUE = "bias+gelu_tanh"
PREFILL_SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096)]
DECODE_SHAPES = [(1, 4096, 4096), (1, 14336, 4096), (16, 4096, 4096), (16, 14336, 4096)]
BIG = TileConfig((128, 256, 64), (2, 1, 1), "cooperative", "persistent")
PP = TileConfig((128, 128, 64), (1, 2, 1), "pingpong")          # the table's prefill row
# (kind, spec, launch variants)
CANDIDATES = [
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=PP),
     [L(), L(swizzle=2), L(swizzle=4), L(raster="along_m"), L(raster="along_n"), L(swizzle=2, raster="along_m")]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig((128, 128, 64), (2, 1, 1), "pingpong")),
     [L(), L(swizzle=2), L(swizzle=4)]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=BIG), [L(), L(swizzle=2)]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig(
        (128, 256, 64), (2, 1, 1), "cooperative", "stream_k")), [L(), L(decomposition="stream_k")]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig(
        (256, 128, 64), (2, 1, 1), "cooperative", "persistent")), [L(), L(swizzle=2)]),
    ("decode", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig(
        (64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True)), [L(pdl=True)]),
]


def candidates(kinds=("prefill", "decode")):
    for kind, spec, _ in CANDIDATES:
        if kind in kinds:
            yield kind, spec


def launch_name(launch) -> str:
    """The launch options that differ from the defaults, e.g. 'swizzle=2,raster=along_m'."""
    diff = [f"{f.name}={getattr(launch, f.name)}" for f in dataclasses.fields(launch)
            if f.init and getattr(launch, f.name) != f.default]
    return ",".join(diff) or "default"


def time_candidates(kinds=("prefill", "decode"), reps: int = 31):
    """Per shape, every candidate (config x launch) and torch.mm timed interleaved in one run, each
    ranked by the median of its per-repetition time / torch.mm's (drift between rows cancels)."""
    import torch
    import fused_gemm
    from bench_linear import cublas, make_sets
    from timing import paired_ratios, time_samples, warm_gpu

    warm_gpu()
    rows = []
    for kind in ("prefill", "decode"):
        if kind not in kinds:
            continue
        entries = [(spec, launch) for k, spec, launches in CANDIDATES if k == kind for launch in launches]
        ops = {spec: fused_gemm.compile(spec) for spec, _ in entries}
        for m, n, k in (PREFILL_SHAPES if kind == "prefill" else DECODE_SHAPES):
            sets = make_sets(m, n, k, torch.bfloat16)
            variants = {"torch.mm": [cublas(s) for s in sets]}
            for spec, launch in entries:
                op, bias = ops[spec], spec.epilogue.bias
                variants[f"{spec.config.name} {launch_name(launch)}"] = [
                    (lambda s=s, op=op, bias=bias, launch=launch: op(s[0], s[1], s[2] if bias else None, launch=launch))
                    for s in sets]
            samples = time_samples(variants, graph=kind == "decode", reps=reps,
                                   min_calls=64 if kind == "decode" else 10)
            ratios = paired_ratios(samples, "torch.mm")
            print(f"{m}x{n}x{k} ({kind}, {EPILOGUE} vs plain torch.mm, {reps} interleaved repetitions)", flush=True)
            for name in sorted(ratios, key=ratios.get):
                us = statistics.median(samples[name]) * 1e6
                tflops = 2 * m * n * k / us / 1e6
                print(f"  {name:<60} {us:8.1f}us {tflops:6.0f} TF/s  vs mm {ratios[name]:.3f}", flush=True)
                rows.append({"kind": kind, "M": m, "N": n, "K": k, "variant": name, "us": us,
                             "ratio_to_mm": ratios[name]})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--kind", choices=("prefill", "decode"), action="append",
                    help="time only these rows (default: both)")
    args = ap.parse_args(argv)
    if args.build_only:
        build_many([s for _, s in candidates(args.kind or ("prefill", "decode"))])
        return 0
    rows = time_candidates(args.kind or ("prefill", "decode"))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
