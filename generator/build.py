"""Compiles specs into shared libraries (through the cache), one nvcc per spec, many in parallel."""
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
from typing import Callable, Iterable, List, Optional, Sequence

from .cache import CacheEntry, entry_for, write_if_different
from .render import render
from .spec import GemmSpec
from .toolchain import Toolchain, codegen_flags, include_flags


class BuildError(RuntimeError):
    """nvcc failed; the message carries the log tail and the source path."""


class BuildWarning(UserWarning):
    """A kernel built, but with a known performance bug (wgmma serialised, spills, ...)."""


# Diagnostics that mean a slow kernel, not a broken one.
_PERF_PATTERNS = [
    (re.compile(r"C7510"), "wgmma serialised (ptxas C7510): was -DNDEBUG lost?"),
    (re.compile(r"C7508"), "setmaxnreg ignored (ptxas C7508): register reallocation disabled"),
    (re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads"), None),
]


def performance_problems(log: str) -> List[str]:
    problems = []
    for pattern, message in _PERF_PATTERNS:
        for m in pattern.finditer(log):
            if message is None:
                if int(m.group(1)) or int(m.group(2)):
                    problems.append(f"register spills: {m.group(0)}")
            elif message not in problems:
                problems.append(message)
    return problems


@dataclass
class BuildResult:
    spec: GemmSpec
    entry: CacheEntry
    cached: bool
    seconds: float = 0.0
    problems: List[str] = field(default_factory=list)

    @property
    def library(self) -> Path:
        return self.entry.library


@lru_cache(maxsize=None)
def _toolchain() -> Toolchain:
    return Toolchain.detect()


@lru_cache(maxsize=512)
def locate(spec: GemmSpec) -> CacheEntry:
    """The cache entry of ``spec`` (built or not): renders the source and hashes it, once."""
    return entry_for(spec, render(spec), _toolchain())


def build(spec: GemmSpec, force: bool = False) -> BuildResult:
    """Returns the cached library of ``spec``, compiling it first if needed."""
    entry = locate(spec)
    if entry.is_built() and not force:
        return BuildResult(spec, entry, cached=True)
    with entry.locked():
        if entry.is_built() and not force:      # another process built it while we waited
            return BuildResult(spec, entry, cached=True)
        entry.remove_partial_builds()
        return _compile(entry)


def _compile(entry: CacheEntry) -> BuildResult:
    tc = _toolchain()
    write_if_different(entry.source, render(entry.spec))
    tmp = entry.folder / f"{entry.library.name}.tmp{os.getpid()}"
    cmd = [str(tc.nvcc), *codegen_flags(entry.spec.arch), *include_flags(), str(entry.source), "-o", str(tmp)]
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


def _progress(done: int, total: int, label: str, stream=sys.stderr) -> None:
    width = 30
    filled = width * done // max(total, 1)
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:70]:<70}")
    if done == total:
        stream.write("\n")
    stream.flush()


def build_many(specs: Iterable[GemmSpec], jobs: Optional[int] = None, progress: bool = True,
               on_result: Optional[Callable[[BuildResult], None]] = None) -> List[BuildResult]:
    """Builds every spec, ``jobs`` nvcc processes at a time (default: all cores).

    Every failure is collected; one BuildError naming them all is raised at the end.
    """
    specs: Sequence[GemmSpec] = list(dict.fromkeys(specs))
    jobs = jobs or os.cpu_count() or 1
    results, failures = [], []
    if progress:
        _progress(0, len(specs), "")
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
