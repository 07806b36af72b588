"""The build toolchain: where nvcc and the CUTLASS headers are, their versions, and the flags.

Versions and flags feed the cache key; host paths never do, so a cache built on one machine
serves another with the same nvcc and CUTLASS.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Tuple

from .paths import csrc_dir


class ToolchainError(RuntimeError):
    """nvcc or CUTLASS cannot be found or used."""


# Every flag that changes the generated machine code.  -Xptxas=-v prints registers and spills,
# which the builder scans for; -DNDEBUG keeps ptxas from serialising wgmma (warning C7510).
ARCH_FLAGS = {"sm90a": ["-gencode=arch=compute_90a,code=sm_90a"]}
COMMON_FLAGS = [
    "-O3", "-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr",
    "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
    "-DCUTLASS_ENABLE_GDC_FOR_SM90=1",  # griddepcontrol: lets a launch with PDL overlap its prologue
    "-shared", "-Xcompiler=-fPIC", "-Xcompiler=-fvisibility=hidden", "-Xlinker=-Bsymbolic",
    "-cudart=static", "-Xptxas=-v", "-lineinfo",
]


FALLBACK_NVCC = ("/usr/local/cuda/bin/nvcc",)


def find_nvcc() -> Path:
    """FUSED_GEMM_NVCC, CUDACXX, $CUDA_HOME/bin/nvcc, nvcc on PATH, /usr/local/cuda/bin/nvcc."""
    candidates = [os.environ.get("FUSED_GEMM_NVCC"), os.environ.get("CUDACXX")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home:
            candidates.append(str(Path(home) / "bin" / "nvcc"))
    candidates += [shutil.which("nvcc"), *FALLBACK_NVCC]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    raise ToolchainError(
        "nvcc not found: install the CUDA toolkit (12.4 or newer) or point FUSED_GEMM_NVCC / "
        "CUDA_HOME at it")


@lru_cache(maxsize=None)
def nvcc_version(nvcc: Optional[Path] = None) -> str:
    """'13.0.88' from `nvcc --version`."""
    nvcc = nvcc or find_nvcc()
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"could not run {nvcc} --version: {exc}") from exc
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    if not m:
        raise ToolchainError(f"could not read the version from `{nvcc} --version`: {out[-200:]!r}")
    return m.group(1)


def find_cutlass() -> Path:
    """The CUTLASS source root (holding include/cutlass): FUSED_GEMM_CUTLASS_DIR, or the headers
    that the nvidia-cutlass wheel ships under cutlass_library/source."""
    env = os.environ.get("FUSED_GEMM_CUTLASS_DIR")
    if env:
        root = Path(env)
        if not (root / "include" / "cutlass" / "version.h").is_file():
            raise ToolchainError(f"FUSED_GEMM_CUTLASS_DIR={env} has no include/cutlass/version.h")
        return root
    try:
        import cutlass_library  # the nvidia-cutlass wheel
    except ImportError as exc:
        raise ToolchainError(
            "CUTLASS headers not found: `pip install nvidia-cutlass` or set FUSED_GEMM_CUTLASS_DIR") from exc
    root = Path(cutlass_library.__file__).resolve().parent / "source"
    if not (root / "include" / "cutlass" / "version.h").is_file():
        raise ToolchainError(f"the nvidia-cutlass package at {root.parent} ships no headers")
    return root


@lru_cache(maxsize=None)
def cutlass_version(root: Optional[Path] = None) -> str:
    text = ((root or find_cutlass()) / "include" / "cutlass" / "version.h").read_text()
    parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise ToolchainError("could not read the CUTLASS version from version.h")
    return ".".join(m.group(1) for m in parts)


def codegen_flags(arch: str) -> List[str]:
    """Flags that go into the cache key (no paths)."""
    return COMMON_FLAGS + ARCH_FLAGS[arch]


def include_flags() -> List[str]:
    root = find_cutlass()
    return [f"-I{csrc_dir()}", f"-I{root / 'include'}", f"-I{root / 'tools' / 'util' / 'include'}"]


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    nvcc_version: str
    cutlass_version: str

    @classmethod
    def detect(cls) -> "Toolchain":
        nvcc = find_nvcc()
        return cls(nvcc, nvcc_version(nvcc), cutlass_version(find_cutlass()))

    def key_parts(self) -> Tuple[str, str]:
        return (f"nvcc-{self.nvcc_version}", f"cutlass-{self.cutlass_version}")
