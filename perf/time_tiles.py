"""Times named tile configs of linear(bias, gelu_tanh) against torch.mm, interleaved, at chosen cells:

    python perf/time_tiles.py --shape 14336x4096 --m 128,256 --configs NAME[,NAME...] [--launches SPEC;SPEC] [--runs 3]

A narrower tool than `fused-gemm tune`: only the configs named (any valid TileConfig name, in the
tuning space or not) and the table's current pick, each with the launch options given (default: pdl
alone, and the table entry's own), timed with the tuner's method (groups of three variants each
interleaved with torch.mm on rotated inputs, ratios per repetition), --runs times over, then checked
against float64.  Prints torch.mm's time / ours per variant and run (higher is better).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

from fused_gemm.bench.tune import LinearWork
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.gemm import tuned
from fused_gemm.generator.gemm.spec import config_from_name
from fused_gemm.generator.gemm.tuning_space import Candidate
from fused_gemm.bench import environment
from fused_gemm.bench.ops import launch_name
from fused_gemm.bench.timing import warm_gpu


def launch_from(text: str) -> LaunchOptions:
    """'swizzle=4,pdl=1' -> LaunchOptions(swizzle=4, pdl=True)."""
    kw = {}
    for item in filter(None, text.split(",")):
        key, value = item.split("=")
        kw[key] = value if key in ("raster", "decomposition", "reduction") else int(value)
    if "pdl" in kw:
        kw["pdl"] = bool(kw["pdl"])
    return LaunchOptions(**kw)


class NamedWork(LinearWork):
    """LinearWork over the configs named on the command line instead of the tuning space."""
    chosen: tuple = ()

    @classmethod
    def space(cls, m, dtype):
        return cls.chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", required=True, help="NxK, repeatable")
    ap.add_argument("--m", required=True, help="comma-separated M values")
    ap.add_argument("--configs", required=True, help="comma-separated tile config names")
    ap.add_argument("--launches", default="pdl=1", help="semicolon-separated launch options, e.g. 'pdl=1;swizzle=4,pdl=1'")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    args = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    launches = tuple(launch_from(t) for t in args.launches.split(";"))
    gpu = environment.gpu_slug()
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  table {gpu}")
    warm_gpu()
    rows = []
    for shape in args.shape:
        n, k = (int(v) for v in shape.split("x"))
        for m in (int(v) for v in args.m.split(",")):
            entry = tuned.rule_for(gpu, args.dtype, n, k, m)    # the table's pick (a Rule), or None
            names = list(dict.fromkeys(args.configs.split(",") + ([entry.config.name] if entry else [])))
            cands = []
            for name in names:
                extra = (entry.launch,) if entry and entry.config.name == name else ()
                cands.append(Candidate(config_from_name(name), 1, 1 << 30, tuple(dict.fromkeys(launches + extra))))
            NamedWork.chosen = tuple(cands)
            io = NamedWork(dtype, n, k, m)
            variants = [(c.name, l) for c in cands for l in c.launches if io.runnable((c.name, l))]
            per_run = [io.time(variants, reps=9) for _ in range(args.runs)]
            for v in variants:
                speedups = [1.0 / r[v] for r in per_run]
                err = io.error(v)
                pick = "  <- table" if entry and (entry.config.name, entry.launch) == v else ""
                rows.append((n, k, m, v, speedups, err, pick))
                print(f"{n}x{k} M={m:<5} {v[0]:<44} {launch_name(v[1]):<22} "
                      + " ".join(f"{s:.3f}" for s in speedups) + f"  median {statistics.median(speedups):.3f}"
                      + f"  err {err:.1e}{pick}", flush=True)
            del io
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
