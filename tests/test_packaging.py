"""`pip install .` ships the templates and C++ headers inside the package; CMake mirrors our flags."""
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fused_gemm.generator import toolchain

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_templates_and_csrc(tmp_path):
    try:
        import setuptools  # noqa: F401
        isolation = ["--no-build-isolation"]
    except ImportError:
        isolation = []
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(tmp_path),
                        str(ROOT)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(r.stderr[-2000:])
    wheel = next(tmp_path.glob("fused_gemm-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    # Everything under templates/ and csrc/ ships, so that an installed package can JIT-build.
    for folder in ("templates", "csrc"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = f"fused_gemm/{path.relative_to(ROOT).as_posix()}"
                assert rel in names, rel
    # Every Python module of the runtime and the generator ships (packages are listed by hand).
    for folder, installed in (("fused_gemm", "fused_gemm"), ("generator", "fused_gemm/generator")):
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                rel = f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
                assert rel in names, rel
    assert not any(n.startswith(("tests/", "perf/", "generator/")) for n in names)


def test_cmake_flags_match_the_generator():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    block = re.search(r"set\(FUSED_GEMM_CUDA_FLAGS(.*?)\)", cmake, re.S).group(1).split()
    for flag in toolchain.COMMON_FLAGS:
        if flag.startswith(("-D", "-O", "--expt", "-Xptxas", "-lineinfo")):
            assert flag in block, f"{flag} is in toolchain.COMMON_FLAGS but not in CMakeLists.txt"
    for flag in block:
        assert flag in toolchain.COMMON_FLAGS, f"{flag} is in CMakeLists.txt but not in toolchain.COMMON_FLAGS"
