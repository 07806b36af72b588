"""Times candidate tile configs for one epilogue on the bar shapes, to tune fused_gemm.heuristics.

    python perf/sweep.py --build-only      # compile every candidate here (no GPU needed)
    python perf/sweep.py [--json out.json] # on the GPU: time each candidate against torch.mm
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fused_gemm.generator import GemmSpec, TileConfig, build_many  # noqa: E402

EPILOGUE = "bias+gelu_tanh"
PREFILL_SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096)]
DECODE_SHAPES = [(1, 4096, 4096), (1, 14336, 4096), (16, 4096, 4096), (16, 14336, 4096)]
PREFILL_CONFIGS = [
    TileConfig((128, 256, 64), (2, 1, 1), "cooperative", "persistent"),
    TileConfig((128, 256, 64), (1, 2, 1), "cooperative", "persistent"),
    TileConfig((256, 128, 64), (2, 1, 1), "cooperative", "persistent"),
    TileConfig((128, 256, 64), (2, 1, 1), "cooperative", "stream_k"),
]
DECODE_CONFIGS = [
    TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True),
    TileConfig((128, 16, 64), (1, 1, 1), "cooperative", "stream_k", swap_ab=True),
]


def candidates():
    for cfg in PREFILL_CONFIGS:
        yield "prefill", GemmSpec("bf16", epilogue=EPILOGUE, config=cfg)
    for cfg in DECODE_CONFIGS:
        yield "decode", GemmSpec("bf16", epilogue=EPILOGUE, config=cfg)


def time_candidates():
    import torch
    import fused_gemm
    from perf.bench_linear import cublas, make_sets
    from perf.timing import in_graph, per_call

    rows = []
    for kind, spec in candidates():
        op = fused_gemm.compile(spec)
        for m, n, k in (PREFILL_SHAPES if kind == "prefill" else DECODE_SHAPES):
            sets = make_sets(m, n, k, torch.bfloat16)
            for splits in ((1,) if kind == "prefill" else (1, 2, 4)):
                def call(s, splits=splits):
                    return lambda: op(s[0], s[1], s[2], splits=splits)
                timer = per_call if kind == "prefill" else in_graph
                t_ours = timer([call(s) for s in sets])
                t_mm = timer([cublas(s) for s in sets])
                rows.append({"config": spec.config.name, "M": m, "N": n, "K": k, "splits": splits,
                             "ours_us": t_ours * 1e6, "mm_us": t_mm * 1e6, "ratio": t_ours / t_mm})
                print(f"{spec.config.name:<45} {m}x{n}x{k:<6} splits={splits} ours {t_ours*1e6:9.1f}us "
                      f"mm {t_mm*1e6:9.1f}us  ours/mm {t_ours/t_mm:.3f}", flush=True)
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
