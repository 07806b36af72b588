"""The build toolchain: where nvcc, the CUDA headers and CUTLASS are, their versions, and the flags.

nvcc is looked for, in order, at FUSED_GEMM_NVCC / CUDACXX (explicit), $CUDA_HOME / $CUDA_PATH,
then through cuda-python's ``cuda.pathfinder`` (NVIDIA pip wheels such as those of
`pip install "fused-gemm[toolchain]"`, conda, the CUDA toolkit), then PATH and /usr/local/cuda.
Versions and codegen flags feed the cache key; host paths never do, so a cache built on one
machine serves another with the same nvcc and CUTLASS.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, List, Optional, Tuple

from .errors import ToolchainError
from .paths import csrc_dir

# Every flag that changes the generated machine code.  -Xptxas=-v prints registers and spills,
# which the builder scans for; -DNDEBUG keeps ptxas from serialising wgmma (warning C7510).
ARCH_FLAGS = {
    "sm90a": ["-gencode=arch=compute_90a,code=sm_90a"],
    # sm80 kernels also serve Hopper (a forced fallback) and later GPUs: sm_80 SASS does not run on
    # sm_90 (SASS is compatible within one major version only), so the same compute_80 PTX is also
    # assembled for sm_90 (no driver JIT on H100/H200, and its ptxas report is scanned for spills)
    # and embedded for anything newer.
    "sm80": ["-gencode=arch=compute_80,code=[sm_80,sm_90,compute_80]"],
}
COMMON_FLAGS = [
    "-O3", "-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr",
    "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
    "-shared", "-Xcompiler=-fPIC", "-Xcompiler=-fvisibility=hidden", "-Xlinker=-Bsymbolic",
    "-cudart=static", "-Xptxas=-v", "-lineinfo",
]
FALLBACK_NVCC = ("/usr/local/cuda/bin/nvcc",)


def _pathfinder_nvcc() -> Optional[str]:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:  # cuda-python missing or older than find_nvidia_binary_utility
        return None
    try:
        return find_nvidia_binary_utility("nvcc")
    except Exception:  # noqa: BLE001 - a discovery helper must never break the search order
        return None


def _candidates() -> Iterable[Tuple[str, Optional[str]]]:
    for home_var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(home_var)
        if home:
            yield f"${home_var}", str(Path(home) / "bin" / "nvcc")
    yield "cuda.pathfinder (pip wheels, conda, CUDA toolkit)", _pathfinder_nvcc()
    yield "PATH", shutil.which("nvcc")
    for path in FALLBACK_NVCC:
        yield "default install location", path


def _usable(path: Optional[str]) -> bool:
    return bool(path) and Path(path).is_file() and os.access(path, os.X_OK)


def find_nvcc() -> Tuple[Path, str]:
    """(nvcc, how it was found)."""
    for var in ("FUSED_GEMM_NVCC", "CUDACXX"):
        value = os.environ.get(var)
        if value:
            if not _usable(value):
                raise ToolchainError(f"{var}={value} is not an executable nvcc")
            return Path(value), f"${var}"
    for source, path in _candidates():
        if _usable(path):
            return Path(path), source
    raise ToolchainError(
        "nvcc not found: `pip install \"fused-gemm[toolchain]\"` for NVIDIA's pip-packaged CUDA compiler, "
        "install the CUDA toolkit (12.4 or newer), or point FUSED_GEMM_NVCC / CUDA_HOME at one")


@lru_cache(maxsize=None)
def nvcc_version(nvcc: Path) -> str:
    """'13.0.88' from `nvcc --version`."""
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"could not run {nvcc} --version: {exc}") from exc
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    if not m:
        raise ToolchainError(f"could not read the version from `{nvcc} --version`: {out[-200:]!r}")
    return m.group(1)


def host_flags(nvcc: Path) -> List[str]:
    """Flags that depend on where the toolkit lives (never in the cache key).  NVIDIA's pip wheels
    keep libraries (libcudart_static.a) in lib/, where nvcc.profile only looks in lib64/."""
    root = nvcc.resolve().parent.parent
    if not (root / "lib64").is_dir() and (root / "lib").is_dir():
        return [f"-L{root / 'lib'}"]
    return []


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
def cutlass_version(root: Path) -> str:
    text = (root / "include" / "cutlass" / "version.h").read_text()
    parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise ToolchainError("could not read the CUTLASS version from version.h")
    return ".".join(m.group(1) for m in parts)


def codegen_flags(arch: str, extra: Tuple[str, ...] = ()) -> List[str]:
    """Flags that go into the cache key (no paths); ``extra``: a family's own."""
    return COMMON_FLAGS + ARCH_FLAGS[arch] + list(extra)


def driver_cuda_version() -> Optional[Tuple[int, int]]:
    """The CUDA version the installed driver supports, through cuda.bindings; None without a driver."""
    try:
        from cuda.bindings import driver
        err, version = driver.cuDriverGetVersion()
    except Exception:  # noqa: BLE001 - no cuda-python, no libcuda: nothing to report
        return None
    if int(err) != 0:
        return None
    return version // 1000, (version % 1000) // 10


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    nvcc_version: str
    cutlass_version: str
    cutlass_root: Optional[Path] = None
    nvcc_source: str = "given"

    @classmethod
    def detect(cls) -> "Toolchain":
        nvcc, source = find_nvcc()
        root = find_cutlass()
        return cls(nvcc, nvcc_version(nvcc), cutlass_version(root), root, source)

    def key_parts(self) -> Tuple[str, str]:
        return (f"nvcc-{self.nvcc_version}", f"cutlass-{self.cutlass_version}")

    def include_flags(self, cutlass_examples: Tuple[str, ...] = (), csrc_folders: Tuple[str, ...] = ()) -> List[str]:
        """``csrc_folders``: csrc/ folders searched for <...> includes too (a kernel's own shims)."""
        root = self.cutlass_root or find_cutlass()
        flags = [f"-I{csrc_dir()}", *(f"-I{csrc_dir() / folder}" for folder in csrc_folders),
                 f"-I{root / 'include'}", f"-I{root / 'tools' / 'util' / 'include'}"]
        for example in cutlass_examples:
            folder = root / "examples" / example
            if not folder.is_dir():
                raise ToolchainError(f"CUTLASS example {example!r} is not shipped at {folder}")
            flags.append(f"-I{folder}")
        if cutlass_examples:
            flags.append(f"-I{root / 'examples' / 'common'}")
        return flags

    def command(self, arch: str, source: Path, output: Path, cutlass_examples: Tuple[str, ...] = (),
                extra_flags: Tuple[str, ...] = (), csrc_folders: Tuple[str, ...] = ()) -> List[str]:
        return [str(self.nvcc), *codegen_flags(arch, extra_flags), *host_flags(self.nvcc),
                *self.include_flags(cutlass_examples, csrc_folders),
                str(source), "-o", str(output)]
