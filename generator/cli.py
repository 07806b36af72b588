"""The `fused-gemm` command line: codegen, build, cache, info, demo.

Errors print one line ("error: ...") and exit non-zero.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List

from . import cache
from .build import BuildError, build_many
from .render import render
from .spec import ACTIVATIONS, SCHEDULES, TILE_SCHEDULERS, GemmSpec, SpecError, TileConfig
from .toolchain import Toolchain, ToolchainError, find_cutlass


def _triple(text: str):
    try:
        vals = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not like 128x256x64") from None
    if len(vals) != 3:
        raise argparse.ArgumentTypeError(f"{text!r} is not like 128x256x64")
    return vals


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("spec (ignored with --preset)")
    g.add_argument("--preset", help="a named list of specs: gpu-tests, bench, compile-ci")
    g.add_argument("--dtype", default="bf16", help="A/B dtype: bf16 or fp16")
    g.add_argument("--out-dtype", help="D dtype: bf16, fp16 or fp32 (default: --dtype)")
    g.add_argument("--epilogue", default="none",
                   help=f"e.g. 'bias+gelu_tanh', 'bias+silu+residual'; activations: {', '.join(ACTIVATIONS)}")
    g.add_argument("--b-layout", default="nk", choices=("nk", "kn"), help="weight [N,K] (nn.Linear) or [K,N]")
    g.add_argument("--tile", type=_triple, default=(128, 256, 64))
    g.add_argument("--cluster", type=_triple, default=(2, 1, 1))
    g.add_argument("--schedule", default="cooperative", choices=SCHEDULES)
    g.add_argument("--scheduler", default="persistent", choices=TILE_SCHEDULERS)
    g.add_argument("--swap-ab", action="store_true")


def _specs(args) -> List[GemmSpec]:
    if args.preset:
        from fused_gemm.presets import preset  # the presets follow the runtime's heuristics table
        try:
            return preset(args.preset)
        except KeyError as exc:
            raise SpecError(exc.args[0]) from None
    cfg = TileConfig(args.tile, args.cluster, args.schedule, args.scheduler, args.swap_ab)
    return [GemmSpec(args.dtype, out_dtype=args.out_dtype, b_layout=args.b_layout,
                     epilogue=args.epilogue, config=cfg)]


def cmd_codegen(args) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for spec in _specs(args):
        path = out / f"{spec.uri}.cu"
        cache.write_if_different(path, render(spec))
        print(path)
    return 0


def cmd_build(args) -> int:
    specs = _specs(args)
    results = build_many(specs, jobs=args.jobs, progress=not args.quiet)
    for r in sorted(results, key=lambda r: r.spec.uri):
        state = "cached" if r.cached else f"built in {r.seconds:.0f}s"
        warn = f"  WARNING: {'; '.join(r.problems)}" if r.problems else ""
        print(f"{r.spec.uri}: {state} -> {r.library}{warn}")
    return 1 if any(r.problems for r in results) and args.strict else 0


def cmd_cache(args) -> int:
    if args.action == "list":
        entries = cache.list_entries()
        for e in entries:
            print(e.relative_to(cache.cache_root()))
        print(f"{len(entries)} kernels in {cache.cache_root()}")
    else:
        print(f"removed {cache.clear()} kernels from {cache.cache_root()}")
    return 0


def cmd_info(args) -> int:
    print(f"cache dir : {cache.cache_root()}")
    try:
        tc = Toolchain.detect()
        print(f"nvcc      : {tc.nvcc} ({tc.nvcc_version})")
        print(f"CUTLASS   : {tc.cutlass_version} at {find_cutlass()}")
    except ToolchainError as exc:
        print(f"toolchain : unavailable: {exc}")
    try:
        import torch
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                cap = torch.cuda.get_device_capability(i)
                print(f"GPU {i}     : {torch.cuda.get_device_name(i)} (sm_{cap[0]}{cap[1]})")
        else:
            print("GPU       : none visible to torch (kernels can be generated and compiled, not run)")
    except ImportError:
        print("GPU       : torch not installed")
    return 0


def cmd_demo(args) -> int:
    from fused_gemm.demo import run_demo
    return run_demo(m=args.m, n=args.n, k=args.k)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fused-gemm", description="CUTLASS GEMMs with fused epilogues")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("codegen", help="write the .cu source of a spec or preset")
    _add_spec_args(p)
    p.add_argument("-o", "--output", default="fused_gemm_src", help="folder for the .cu files")
    p.set_defaults(func=cmd_codegen)
    p = sub.add_parser("build", help="compile specs into the cache, in parallel")
    _add_spec_args(p)
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count(), help="parallel nvcc processes")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help="exit 1 if a kernel has spills/C7510/C7508")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("cache", help="list or clear the kernel cache")
    p.add_argument("action", choices=("list", "clear"))
    p.set_defaults(func=cmd_cache)
    p = sub.add_parser("info", help="nvcc, CUTLASS, GPU and cache dir")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("demo", help="build and run a fused GEMM; check it and time it against torch")
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=14336)
    p.add_argument("--k", type=int, default=4096)
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except BuildError as exc:
        first, _, rest = str(exc).partition("\n")
        paths = [ln.strip() for ln in rest.splitlines() if ln.strip().startswith(("source:", "full log:"))]
        print(f"error: {first} ({'; '.join(paths)})", file=sys.stderr)
    except (SpecError, ToolchainError, ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
