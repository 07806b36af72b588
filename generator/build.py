"""Compiles specs of any family into shared libraries (through the cache), one nvcc per spec, many
in parallel, bounded by cores and by free memory (a CUTLASS sm90 nvcc peaks at a few GiB)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Sequence

from .cache import CacheEntry, entry_for, write_if_different
from .errors import BuildError, BuildWarning
from .registry import family_of
from .render import render
from .toolchain import Toolchain

NVCC_PEAK_BYTES = 4 << 30     # measured peak RSS of one CUTLASS sm90 kernel build, rounded up

# Diagnostics that mean a slow kernel, not a broken one.
_PERF_PATTERNS = [
    (re.compile(r"C7510"), "wgmma serialised (ptxas C7510): was -DNDEBUG lost?"),
    (re.compile(r"C7508"), "setmaxnreg ignored (ptxas C7508): register reallocation disabled"),
    # ptxas's other wgmma serialisations (C7514: accumulators read while in flight; C7519: an injected
    # warpgroup.arrive): each costs the overlap of consecutive wgmmas.
    (re.compile(r"\((C75(?:09|1[1-9]|2\d))\) Potential Performance Loss"), "wgmma serialised (ptxas {0})"),
    (re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads"), None),
]


def performance_problems(log: str) -> List[str]:
    problems = []
    for pattern, message in _PERF_PATTERNS:
        for m in pattern.finditer(log):
            if message is None:
                if int(m.group(1)) or int(m.group(2)):
                    problems.append(f"register spills: {m.group(0)}")
            elif message.format(*m.groups()) not in problems:
                problems.append(message.format(*m.groups()))
    return problems


@dataclass
class BuildResult:
    spec: Any
    entry: CacheEntry
    cached: bool
    seconds: float = 0.0
    problems: List[str] = field(default_factory=list)

    @property
    def library(self) -> Path:
        return self.entry.library


@lru_cache(maxsize=None)
def toolchain() -> Toolchain:
    return Toolchain.detect()


@lru_cache(maxsize=512)
def locate(spec) -> CacheEntry:
    """The cache entry of ``spec`` (built or not): renders the source and hashes it, once."""
    return entry_for(spec, render(spec), toolchain())


def build_command(spec) -> str:
    """The shell command that puts ``spec``'s library into the cache."""
    return f"fused-gemm build --uri {spec.uri}"


def build(spec, force: bool = False) -> BuildResult:
    """Returns the cached library of ``spec``, compiling it first if needed."""
    entry = locate(spec)
    if entry.is_built() and not force:
        return BuildResult(spec, entry, cached=True)
    with entry.locked():                        # one builder per kernel; other kernels build in parallel
        if entry.is_built() and not force:      # another process built it while we waited
            return BuildResult(spec, entry, cached=True)
        entry.remove_partial_builds()
        return _compile(entry)


def _compile(entry: CacheEntry) -> BuildResult:
    tc = toolchain()
    write_if_different(entry.source, render(entry.spec))
    tmp = entry.folder / f"{entry.library.name}.tmp{os.getpid()}"
    family = family_of(entry.spec)
    cmd = tc.command(entry.spec.arch, entry.source, tmp, family.cutlass_examples, family.nvcc_flags,
                     getattr(entry.spec, "include_folders", ()))
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise BuildError(f"could not start nvcc ({tc.nvcc}): {exc}") from exc
    seconds = time.monotonic() - start
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    entry.log.write_text(log)
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join(log.splitlines()[-40:])
        raise BuildError(
            f"nvcc failed (exit {proc.returncode}) building {entry.spec.uri}\n"
            f"  source: {entry.source}\n  full log: {entry.log}\n--- log tail ---\n{tail}")
    problems = performance_problems(log)
    entry.meta.write_text(json.dumps({
        "uri": entry.spec.uri, "key": entry.key, "seconds": round(seconds, 1),
        "nvcc": tc.nvcc_version, "cutlass": tc.cutlass_version, "problems": problems,
    }, indent=1))
    os.replace(tmp, entry.library)                # the entry exists only once complete
    if problems:
        warnings.warn(f"{entry.spec.uri}: " + "; ".join(problems) + f" (log: {entry.log})",
                      BuildWarning, stacklevel=3)
    return BuildResult(entry.spec, entry, cached=False, seconds=seconds, problems=problems)


def _available_memory() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def default_jobs() -> int:
    """As many nvcc processes as there are cores and as free memory holds (at least one)."""
    jobs = os.cpu_count() or 1
    free = _available_memory()
    if free is not None:
        jobs = min(jobs, free // NVCC_PEAK_BYTES)
    return max(1, jobs)


def _progress(done: int, total: int, label: str, stream=sys.stderr) -> None:
    width = 30
    filled = width * done // max(total, 1)
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:70]:<70}")
    if done == total:
        stream.write("\n")
    stream.flush()


def build_many(specs: Iterable, jobs: Optional[int] = None, progress: bool = True,
               on_result: Optional[Callable[[BuildResult], None]] = None) -> List[BuildResult]:
    """Builds every spec, ``jobs`` nvcc processes at a time (default: ``default_jobs()``).

    Every failure is collected; one BuildError naming them all is raised at the end.
    """
    specs: Sequence = list(dict.fromkeys(specs))
    jobs = min(jobs or default_jobs(), default_jobs())
    results, failures = [], []
    if progress:
        _progress(0, len(specs), f"({jobs} at a time)")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(build, s): s for s in specs}
        for i, fut in enumerate(as_completed(futures), 1):
            spec = futures[fut]
            try:
                res = fut.result()
                results.append(res)
                if on_result:
                    on_result(res)
            except BuildError as exc:
                failures.append(str(exc))
            if progress:
                _progress(i, len(specs), spec.uri)
    if failures:
        raise BuildError(f"{len(failures)} of {len(specs)} builds failed:\n\n" + "\n\n".join(failures))
    return results
