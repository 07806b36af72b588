"""Builds variants of a kernel for side-by-side timing, without touching the kernel cache:

    python perf/build_variants.py DIR NAME=URI [NAME=URI ...] [--flags='-DFOO=1 ...'] [--shadow HEADERS]

Each NAME gets DIR/NAME/lib.so (URI's source as the generator renders it, compiled with the
toolchain's own nvcc line plus --flags, with --shadow's folder ahead of csrc/ on the include path)
and DIR/NAME/uri.txt.  --shadow HEADERS holds edited copies of csrc/ headers at their csrc/ paths
(e.g. HEADERS/fused_gemm/gemv/sm90_dense_decode.hpp): an experiment on a header that every kernel of
a family includes builds only the kernels it times, and the cache keeps its keys.  Timing scripts
that take --variants DIR (perf/int4_decode_launch.py, perf/bench_gemm_decode.py, perf/bench_decode.py,
perf/sweep_attention.py) load them.
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fused_gemm.generator import render, spec_from_uri
from fused_gemm.generator.build import performance_problems, toolchain
from fused_gemm.generator.registry import family_of
from fused_gemm.library import KernelLibrary


def build_one(folder: Path, uri: str, flags, shadow) -> str:
    spec = spec_from_uri(uri)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "kernel.cu"
    source.write_text(render(spec))
    family = family_of(spec)
    cmd = toolchain().command(spec.arch, source, folder / "lib.so", family.cutlass_examples, family.nvcc_flags,
                              getattr(spec, "include_folders", ()))
    cmd[1:1] = list(flags) + ([f"-I{shadow.resolve()}"] if shadow else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    (folder / "build.log").write_text(log)
    if proc.returncode != 0:
        raise SystemExit(f"{folder.name}: nvcc failed, see {folder / 'build.log'}\n{log[-2000:]}")
    (folder / "uri.txt").write_text(uri + "\n")
    problems = performance_problems(log)
    return f"{folder.name}: {uri}" + (f"  PROBLEMS: {'; '.join(problems)}" if problems else "")


def load_builds(folder: Path):
    """name -> (spec, library) for every DIR/<name>/lib.so this script built (its URI in uri.txt)."""
    builds = {}
    for d in sorted(p for p in folder.iterdir() if (p / "lib.so").is_file()):
        uri = (d / "uri.txt").read_text().strip()
        spec = spec_from_uri(uri)
        builds[d.name] = (spec, KernelLibrary(d / "lib.so", family_of(spec), uri))
    return builds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("variants", nargs="+", metavar="NAME=URI")
    ap.add_argument("--flags", default="", help="extra nvcc flags in one argument, e.g. --flags='-DFOO=1 -DBAR'")
    ap.add_argument("--shadow", type=Path, help="folder of edited csrc/ headers, searched before csrc/")
    args = ap.parse_args(argv)
    pairs = [v.split("=", 1) for v in args.variants]
    if any(len(p) != 2 for p in pairs):
        ap.error("variants are NAME=URI")
    with ThreadPoolExecutor(2) as pool:
        for line in pool.map(lambda p: build_one(args.dir / p[0], p[1], shlex.split(args.flags), args.shadow), pairs):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
