"""The GEMM family's decode kernel (weight-streaming GEMV) against the kernel linear ships and torch.mm,
on every layer of a model preset at M = 1 and 16, inside CUDA graphs, bf16, bias+gelu_tanh (the tuner's
epilogue).

    python perf/bench_gemm_decode.py [--preset llama3-8b] [--m 1 16] [--splits 1 2 4] [--json results.json]
                                     [--configs NAME ..] [--variants DIR]

Per shape: the decode kernel's configs (the tuner's candidates, with its own K split and forced splits of
2 and 4, or those --splits names), linear as shipped (the tuned table's or the heuristic's kernel) and
torch.mm (no epilogue), timed interleaved in shuffled order with rotated weights larger than L2; times over the HBM floor
(weight bytes / the copy bandwidth measured first: issue 9's decode bar is <= 1.2x) and ratios per
repetition against linear.  Every variant's output is checked against float64 first.  --configs
names the decode configs timed (any, not only the tuner's); --variants DIR adds builds of a kernel edit (perf/build_variants.py:
DIR/<name>/lib.so and uri.txt, decode kernels with this epilogue), with the kernel's own K split.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import fused_gemm
from fused_gemm.bench.models import layers
from fused_gemm.bench.timing import copy_bandwidth, paired_ratios, require_gpu, rotation_count, time_samples, warm_gpu
from fused_gemm.generator import GemmSpec, LaunchOptions
from fused_gemm.generator.gemv import DecodeConfig
from fused_gemm.generator.gemm.presets import decode_configs
from fused_gemm.gemm.op import GemmOp

from build_variants import load_builds   # perf/, beside this script

EPILOGUE = "bias+gelu_tanh"
SPLITS = (1, 2, 4)   # 1: the kernel's own choice


def reference(x, w, b):
    return F.gelu(x.double() @ w.double().T + b.double(), approximate="tanh")


def shape_rows(n, k, m, floor_s, splits_list, configs=None, variant_ops=None):
    per_set = n * k * 2 + n * 2 + m * k * 2
    sets = []
    for _ in range(rotation_count(per_set)):
        sets.append((torch.randn(m, k, dtype=torch.bfloat16, device="cuda"),
                     torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5,
                     torch.randn(n, dtype=torch.bfloat16, device="cuda")))
    outs = [torch.empty(m, n, dtype=torch.bfloat16, device="cuda") for _ in sets]
    variants = {
        "linear": [lambda s=s, o=o: fused_gemm.linear(*s[:2], s[2], "gelu_tanh", out=o) for s, o in zip(sets, outs)],
        "torch.mm": [lambda s=s: torch.mm(s[0], s[1].t()) for s in sets],
    }
    errors = {"linear": float((fused_gemm.linear(*sets[0][:2], sets[0][2], "gelu_tanh").double()
                               - reference(*sets[0])).norm() / reference(*sets[0]).norm())}
    timed = [(f"{config.name} s{splits if splits > 1 else '-auto'}",
              fused_gemm.compile(GemmSpec("bf16", epilogue=EPILOGUE, config=config)), splits)
             for config in ([DecodeConfig.from_name(c) for c in configs] if configs else decode_configs())
             if m <= config.tokens
             for splits in splits_list]
    timed += [(name, op, 1) for name, op in (variant_ops or {}).items() if m <= op.spec.config.tokens]
    for name, op, splits in timed:
        launch = LaunchOptions(splits=splits, pdl=True)
        got = op(*sets[0][:2], sets[0][2], "gelu_tanh", launch=launch)
        ref = reference(*sets[0])
        errors[name] = float((got.double() - ref).norm() / ref.norm())
        variants[name] = [lambda s=s, o=o, launch=launch, op=op: op(*s[:2], s[2], "gelu_tanh", out=o,
                                                                    launch=launch)
                          for s, o in zip(sets, outs)]
    samples = time_samples(variants, graph=True, reps=15, min_calls=64)
    over = paired_ratios(samples, "linear")
    rows = []
    for name, ts in samples.items():
        t = statistics.median(ts)
        rows.append({"N": n, "K": k, "M": m, "variant": name, "us": t * 1e6, "floor_us": floor_s * 1e6,
                     "vs_floor": t / floor_s, "vs_linear": 1 / over[name], "rel_err": errors.get(name, float("nan"))})
    del sets, outs
    torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="llama3-8b")
    ap.add_argument("--m", type=int, nargs="*", default=[1, 16])
    ap.add_argument("--splits", type=int, nargs="*", default=list(SPLITS), help="K splits to force (1: the kernel's own)")
    ap.add_argument("--json")
    ap.add_argument("--configs", nargs="+", help="decode config names to time (default: the tuner's)")
    ap.add_argument("--variants", type=Path, help="DIR/<name>/lib.so builds to time too (see above)")
    args = ap.parse_args(argv)
    require_gpu("bench_gemm_decode")
    variant_ops = {name: GemmOp(*build) for name, build in load_builds(args.variants).items()} if args.variants else {}
    bandwidth = copy_bandwidth()
    warm_gpu()
    rows = []
    shapes = {(n, k): name for name, n, k in reversed(layers(args.preset))}   # each shape once, its first layer's name
    with torch.no_grad():
        for (n, k), layer in reversed(list(shapes.items())):
            for m in args.m:
                for r in shape_rows(n, k, m, n * k * 2 / bandwidth, args.splits, args.configs, variant_ops):
                    rows.append({"layer": layer, **r})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bandwidth, "rows": rows}, f, indent=1)
    print(f"{torch.cuda.get_device_name()}, bf16 {EPILOGUE}, CUDA graphs, copy bandwidth {bandwidth / 1e9:.0f} GB/s; "
          "steady-state clocks; vs linear: time ratio per repetition (>1: faster than linear as shipped)")
    print(f"{'layer':<9}{'N x K':>13}{'M':>4}  {'variant':<28}{'us':>8}{'/floor':>8}{'vs linear':>10}{'rel err':>9}")
    for r in rows:
        print(f"{r['layer']:<9}{r['N']:>6}x{r['K']:<6}{r['M']:>4}  {r['variant']:<28}{r['us']:>8.2f}{r['vs_floor']:>8.3f}"
              f"{r['vs_linear']:>9.3f}x{r['rel_err']:>9.1e}")
    bad = [r for r in rows if not r["rel_err"] < 1e-2 and r["variant"] != "torch.mm"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
