"""The persistent kernel cache.

Layout (FlashInfer-style, one folder per toolchain and arch):
    $FUSED_GEMM_CACHE_DIR (default ~/.cache/fused-gemm)
      cutlass-4.2.0_nvcc-13.0.88/sm90a/<spec uri>/<key>/{kernel.cu, lib.so, build.log, meta.json}
(any family: the URI starts with the family's name)

The key hashes what decides the machine code: the rendered source, the hand-written headers its
family includes (csrc/fused_gemm/common and the family's own folder: adding a family leaves the
others' kernels valid), the codegen flags and the toolchain versions.  Host paths and the Python version never
enter it, so a cache copied to another machine with the same nvcc and CUTLASS is valid there.

Concurrency: builders of one entry serialise on an flock'd file (the kernel releases it when a
process dies, so a killed build leaves no stale lock), and lib.so appears only by atomic rename,
so a half-finished build is never mistaken for a finished one.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, List, Tuple

from .paths import csrc_dir
from .toolchain import Toolchain, codegen_flags

LIBRARY_NAME = "lib.so"


def cache_root() -> Path:
    env = os.environ.get("FUSED_GEMM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fused-gemm"


@lru_cache(maxsize=None)
def _csrc_digest(root: Path, folders: Tuple[str, ...]) -> str:
    h = hashlib.sha256()
    paths = (p for folder in folders for p in (root / folder).rglob("*"))
    for path in sorted(p for p in paths if p.is_file() and p.suffix in (".h", ".hpp", ".inl", ".cuh")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(source: str, arch: str, toolchain: Toolchain, csrc_folders: Tuple[str, ...],
              extra_flags: Tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for part in (source, _csrc_digest(csrc_dir(), csrc_folders), " ".join(codegen_flags(arch, extra_flags)),
                 *toolchain.key_parts()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class CacheEntry:
    spec: Any
    key: str
    folder: Path

    @property
    def library(self) -> Path:
        return self.folder / LIBRARY_NAME

    @property
    def source(self) -> Path:
        return self.folder / "kernel.cu"

    @property
    def log(self) -> Path:
        return self.folder / "build.log"

    @property
    def meta(self) -> Path:
        return self.folder / "meta.json"

    def is_built(self) -> bool:
        return self.library.is_file()

    @contextmanager
    def locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder.parent / f"{self.key}.lock", "a+") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def remove_partial_builds(self) -> None:
        """Temp outputs of builds that were killed; call with the lock held."""
        for stale in self.folder.glob(f"{LIBRARY_NAME}.tmp*"):
            stale.unlink(missing_ok=True)


def csrc_folders_of(spec) -> Tuple[str, ...]:
    """The csrc/ folders whose headers enter the spec's key: its family's, and the shared ones the spec alone
    includes (an EVT node only some kernels use), so that editing those leaves the family's other kernels valid."""
    from .registry import family_of
    return family_of(spec).csrc_folders + tuple(f"fused_gemm/{name}" for name in getattr(spec, "csrc_includes", ()))


def entry_for(spec, source: str, toolchain: Toolchain) -> CacheEntry:
    from .registry import family_of
    family = family_of(spec)
    key = cache_key(source, spec.arch, toolchain, csrc_folders_of(spec), family.nvcc_flags)
    tc = f"cutlass-{toolchain.cutlass_version}_nvcc-{toolchain.nvcc_version}"
    return CacheEntry(spec, key, cache_root() / tc / spec.arch / spec.uri / key)


def write_if_different(path: Path, text: str) -> bool:
    """Keeps mtimes (and anything watching them) still when nothing changed."""
    if path.is_file() and path.read_text() == text:
        return False
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


def list_entries() -> List[Path]:
    root = cache_root()
    return sorted(p.parent for p in root.glob(f"*/*/*/*/{LIBRARY_NAME}")) if root.is_dir() else []


def find_prebuilt(spec) -> "Path | None":
    """``lib<uri>.so`` in a folder of $FUSED_GEMM_PREBUILT_DIR (os.pathsep-separated): what the
    CMake build of `fused-gemm codegen` output makes.  Such a library is used as it is, without a
    toolchain; the loader still checks its ABI version and the spec URI it reports."""
    for folder in filter(None, os.environ.get("FUSED_GEMM_PREBUILT_DIR", "").split(os.pathsep)):
        path = Path(folder).expanduser() / f"lib{spec.uri}.so"
        if path.is_file():
            return path
    return None


def find_built(spec) -> "Path | None":
    """The newest built library of ``spec`` under any toolchain folder, found without a toolchain
    (for FUSED_GEMM_NO_JIT hosts that were handed a cache and have no nvcc)."""
    root = cache_root()
    found = sorted(root.glob(f"*/{spec.arch}/{spec.uri}/*/{LIBRARY_NAME}"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def clear() -> int:
    """Removes the whole cache; returns how many built kernels it held."""
    n = len(list_entries())
    root = cache_root()
    if root.is_dir():
        shutil.rmtree(root)
    return n
