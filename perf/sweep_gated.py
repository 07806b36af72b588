"""Times candidate tile configs and scheduler launch options of the gated (SwiGLU) kernel on
Llama-3-8B's MLP (K = 4096, I = 14336) against torch.mm on the concatenated [2I, K] weight, to
tune which kernel and LaunchOptions serve which M (generator/gemm/heuristics.py).

    python perf/sweep_gated.py --build-only    # compile every candidate (no GPU needed)
    python perf/sweep_gated.py [--json out.json] [--m 1024 4096 16384]
"""
from __future__ import annotations

import argparse
import json
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
    args = ap.parse_args(argv)
    build_many(specs(), progress=False)
    if args.build_only:
        return 0
    import torch
    import fused_gemm
    from fused_gemm.bench.timing import compare, warm_gpu

    warm_gpu()
    rows = []
    for m in args.m:
        x = torch.randn(m, K, dtype=torch.bfloat16, device="cuda")
        wg, wu = (torch.randn(I, K, dtype=torch.bfloat16, device="cuda") / K ** 0.5 for _ in range(2))
        packed, cat = fused_gemm.pack_gate_up(wg, wu), torch.cat((wg, wu))
        flop = 2 * m * 2 * I * K
        variants = {"torch.mm [2I,K]": [lambda: torch.mm(x, cat.t())]}
        for spec in specs():
            op = fused_gemm.compile(spec)
            for launch in LAUNCHES:
                name = f"{spec.config.name} {launch.swizzle}/{launch.raster}"
                variants[name] = [lambda op=op, launch=launch: op(x, packed, launch=launch)]
        t = compare(variants, min_calls=10, reps=5)
        base = t["torch.mm [2I,K]"]
        for name, sec in sorted(t.items(), key=lambda kv: kv[1]):
            rows.append({"M": m, "variant": name, "us": sec * 1e6, "tflops": flop / sec / 1e12, "vs_mm": base / sec})
        print(f"M={m}: best 12")
        for r in [r for r in rows if r["M"] == m][:12]:
            print(f"  {r['variant']:<48}{r['us']:>9.1f}us{r['tflops']:>6.0f} TF/s{r['vs_mm']:>7.3f}x")
        del x, wg, wu, packed, cat
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
