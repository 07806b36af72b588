"""Times named tile configs of linear(bias, gelu_tanh) against torch.mm, interleaved, at chosen cells:

    python perf/time_tiles.py --shape 14336x4096 --m 128,256 --configs NAME[,NAME...] [--launches L;L] [--runs 3]

A narrower tool than `fused-gemm tune`: only the configs named (any valid TileConfig name, in the
tuning space or not) and the table's current pick, each with the launch options given (labels as the
benchmarks print them, e.g. 'pdl=True' or 'swizzle=4,pdl=True'; default: pdl alone, plus the table
entry's own), timed with the tuner's method (groups of three variants each interleaved with torch.mm on
rotated inputs, ratios per repetition), --runs times over, then checked against float64.  Prints
torch.mm's time / ours per variant and run (higher is better).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

from fused_gemm.bench import environment
from fused_gemm.bench.timing import warm_gpu
from fused_gemm.bench.tune import LinearWork
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.gemm import tuned
from fused_gemm.generator.gemm.spec import config_from_name
from fused_gemm.generator.gemm.tuning_space import Candidate


def named_work(candidates):
    """LinearWork over these candidates instead of the tuning space's."""
    return type("NamedWork", (LinearWork,), {"space": classmethod(lambda cls, m, dtype: tuple(candidates))})


def time_cell(n, k, m, dtype, names, launches, runs, gpu):
    pick = tuned.rule_for(gpu, {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype], n, k, m, shared=True)  # or None
    names = list(dict.fromkeys(names + ([pick.config.name] if pick else [])))
    cands = [Candidate(config_from_name(name), 1, 1 << 30,
                       tuple(dict.fromkeys(launches + ((pick.launch,) if pick and pick.config.name == name else ()))))
             for name in names]
    work = named_work(cands)
    io = work(dtype, n, k, m)
    kept = work.candidates(m, dtype)           # the configs the epilogue takes
    for c in cands:
        if c not in kept:
            print(f"  skip {c.name}: the bias+gelu_tanh epilogue refuses it", file=sys.stderr)
    variants = [(c.name, launch) for c in kept for launch in c.launches if io.runnable((c.name, launch))]
    per_run = [io.time(variants, reps=9) for _ in range(runs)]
    for v in variants:
        speedups = [1.0 / r[v] for r in per_run]
        mark = "  <- table" if pick and (pick.config.name, pick.launch) == v else ""
        print(f"{n}x{k} M={m:<5} {v[0]:<44} {v[1].label:<22} " + " ".join(f"{s:.3f}" for s in speedups)
              + f"  median {statistics.median(speedups):.3f}  err {io.error(v):.1e}{mark}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", required=True, help="NxK, repeatable")
    ap.add_argument("--m", required=True, help="comma-separated M values")
    ap.add_argument("--configs", required=True, help="comma-separated tile config names")
    ap.add_argument("--launches", default="pdl=True", help="semicolon-separated launch labels")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    args = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    launches = tuple(LaunchOptions.from_label(text) for text in args.launches.split(";"))
    gpu = environment.gpu_slug()
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  table {gpu}")
    warm_gpu()
    for shape in args.shape:
        n, k = (int(v) for v in shape.split("x"))
        for m in (int(v) for v in args.m.split(",")):
            time_cell(n, k, m, dtype, args.configs.split(","), launches, args.runs, gpu)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
