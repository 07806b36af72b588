"""The `fused-gemm` command line: codegen, build, cache, info, demo.

codegen/build/cache work on any registered kernel family and import no torch.  Errors print one
line ("error: ...") and exit non-zero.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List

from . import cache
from .build import build_many, default_jobs, toolchain
from .errors import BuildError, SpecError, ToolchainError
from .registry import FAMILIES, family_of, preset, preset_names, spec_from_uri
from .render import render, render_abi_header
from .toolchain import driver_cuda_version, host_flags


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("which kernels (one of --preset, --uri, or a family's flags)")
    g.add_argument("--preset", help=f"a named list of specs: {', '.join(preset_names())}")
    g.add_argument("--uri", action="append", help="a kernel URI, as in the cache and in error messages (repeatable)")
    g.add_argument("--family", default="gemm", choices=sorted(FAMILIES), help="family of the flags below")
    for family in FAMILIES.values():
        if family.cli is not None:
            family.cli.add_arguments(p.add_argument_group(f"{family.name} spec (ignored with --preset/--uri)"))


def _specs(args) -> List:
    if args.preset:
        return preset(args.preset)
    if args.uri:
        return [spec_from_uri(u) for u in args.uri]
    return [FAMILIES[args.family].cli.spec_from_args(args)]


def cmd_codegen(args) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    families = {}
    for spec in _specs(args):
        path = out / f"{spec.uri}.cu"
        cache.write_if_different(path, render(spec))
        families[spec.family] = family_of(spec)
        print(path)
    for family in families.values():   # the struct a C++ caller fills, for every family written
        header = out / f"fg_{family.name}_abi.h"
        cache.write_if_different(header, render_abi_header(family))
        print(header)
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
    print(f"families  : {', '.join(sorted(FAMILIES))}")
    try:
        tc = toolchain()
        print(f"nvcc      : {tc.nvcc} ({tc.nvcc_version}), found via {tc.nvcc_source}")
        extra = host_flags(tc.nvcc)
        if extra:
            print(f"            host flags: {' '.join(extra)}")
        print(f"CUTLASS   : {tc.cutlass_version} at {tc.cutlass_root}")
    except ToolchainError as exc:
        print(f"toolchain : unavailable: {exc}")
    print(f"build jobs: {default_jobs()} at a time (cores and free memory)")
    driver = driver_cuda_version()
    print("driver    : " + (f"supports CUDA {driver[0]}.{driver[1]} (cuda.bindings)" if driver else
                             "no NVIDIA driver found (cuda.bindings)"))
    try:
        import torch
    except ImportError:
        print("GPU       : torch not installed")
        return 0
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            cap = torch.cuda.get_device_capability(i)
            print(f"GPU {i}     : {torch.cuda.get_device_name(i)} (sm_{cap[0]}{cap[1]})")
    else:
        print("GPU       : none visible to torch (kernels can be generated and compiled, not run)")
    return 0


def cmd_demo(args) -> int:
    from fused_gemm.demo import run_demo
    return run_demo(m=args.m, n=args.n, k=args.k)


def parser(extend=None) -> argparse.ArgumentParser:
    """``extend(subparsers)`` adds commands from a layer above (the runtime's sweep/tune/plot)."""
    ap = argparse.ArgumentParser(prog="fused-gemm", description="CUTLASS GEMMs with fused epilogues")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("codegen", help="write the .cu source of a spec or preset, and the ABI header")
    _add_spec_args(p)
    p.add_argument("-o", "--output", default="fused_gemm_src", help="folder for the .cu files")
    p.set_defaults(func=cmd_codegen)
    p = sub.add_parser("build", help="compile specs into the cache, in parallel")
    _add_spec_args(p)
    p.add_argument("-j", "--jobs", type=int, help="parallel nvcc processes (default and cap: cores and free memory)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help="exit 1 if a kernel has spills/C7510/C7508")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("cache", help="list or clear the kernel cache")
    p.add_argument("action", choices=("list", "clear"))
    p.set_defaults(func=cmd_cache)
    p = sub.add_parser("info", help="toolchain, driver, GPUs and cache dir")
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("demo", help="build and run a fused GEMM; check it and time it against torch")
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=14336)
    p.add_argument("--k", type=int, default=4096)
    p.set_defaults(func=cmd_demo)
    if extend is not None:
        extend(sub)
    return ap


def main(argv=None, extend=None) -> int:
    args = parser(extend).parse_args(argv)
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
