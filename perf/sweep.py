"""Times candidate tile configs for one epilogue on the bar shapes, to tune the heuristics table
(generator/gemm/heuristics.py, installed as fused_gemm.generator.gemm.heuristics).

    python perf/sweep.py --build-only      # compile every candidate here (no GPU needed)
    python perf/sweep.py [--json out.json] # on the GPU: time each candidate against torch.mm
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fused_gemm.generator import GemmSpec, TileConfig, build_many  # noqa: E402

from fused_gemm.generator import LaunchOptions as L  # noqa: E402

EPILOGUE = "bias+gelu_tanh"
PREFILL_SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096)]
DECODE_SHAPES = [(1, 4096, 4096), (1, 14336, 4096), (16, 4096, 4096), (16, 14336, 4096)]
BIG = TileConfig((128, 256, 64), (2, 1, 1), "cooperative", "persistent")
DECODE = TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)
PREFILL_LAUNCHES = [L(), L(swizzle=2), L(swizzle=4), L(swizzle=8), L(raster="along_m"), L(raster="along_n"),
                    L(swizzle=4, raster="along_m"), L(swizzle=4, raster="along_n"), L(pdl=True)]
DECODE_LAUNCHES = [L(), L(pdl=True), L(decomposition="data_parallel"), L(decomposition="data_parallel", pdl=True),
                   L(splits=2), L(splits=3), L(splits=4), L(splits=4, reduction="nondeterministic"),
                   L(splits=4, pdl=True), L(splits=4, reduction="nondeterministic", pdl=True),
                   L(decomposition="stream_k"), L(decomposition="stream_k", reduction="nondeterministic", pdl=True)]
# (kind, spec, launch variants)
CANDIDATES = [
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=BIG), [L()]),
    ("prefill", GemmSpec("bf16", epilogue="none", config=BIG), [L()]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig((128, 256, 64), (1, 1, 1))), [L()]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig((128, 256, 64), (2, 2, 1))), [L()]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig((256, 128, 64), (1, 2, 1))), [L()]),
    ("prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig((128, 128, 64), (1, 2, 1), "pingpong")),
     [L()]),
    ("decode", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig(
        (64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True)), [L(pdl=True)]),
    ("decode", GemmSpec("bf16", epilogue=EPILOGUE, config=TileConfig(
        (64, 16, 128), (1, 2, 1), "warpspecialized", "persistent", swap_ab=True)), [L(pdl=True)]),
]


def candidates():
    for kind, spec, _ in CANDIDATES:
        yield kind, spec


def time_candidates():
    import torch
    import fused_gemm
    from bench_linear import cublas, make_sets
    from timing import compare, in_graph

    rows = []
    tiny = torch.zeros(256, dtype=torch.int32, device="cuda")
    t_memset = in_graph([lambda: tiny.zero_()])
    print(f"reference: one 1 KiB memset node in a graph: {t_memset * 1e6:.2f} us", flush=True)
    for kind, spec, launches in CANDIDATES:
        op = fused_gemm.compile(spec)
        bias = spec.epilogue.bias
        for m, n, k in (PREFILL_SHAPES if kind == "prefill" else DECODE_SHAPES):
            sets = make_sets(m, n, k, torch.bfloat16)
            graph = kind == "decode"
            for launch in launches:
                def call(s, launch=launch):
                    return lambda: op(s[0], s[1], s[2] if bias else None, launch=launch)
                t = compare({"mm": [cublas(s) for s in sets], "ours": [call(s) for s in sets]}, graph=graph,
                            min_calls=64 if graph else 20)
                t_mm, t_ours = t["mm"], t["ours"]
                rows.append({"config": spec.config.name, "epilogue": spec.epilogue.name, "M": m, "N": n, "K": k,
                             "launch": repr(launch), "ours_us": t_ours * 1e6, "mm_us": t_mm * 1e6,
                             "ratio": t_ours / t_mm})
                print(f"{spec.config.name:<40} {spec.epilogue.name:<15} {m}x{n}x{k:<6} ours {t_ours*1e6:8.1f}us "
                      f"mm {t_mm*1e6:8.1f}us ours/mm {t_ours/t_mm:.3f}  {launch!r}", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.build_only:
        build_many([s for _, s in candidates()])
        return 0
    rows = time_candidates()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
