"""The pip-only CUDA toolchain: a fresh venv with the `toolchain` extra, the system toolkit hidden
(no nvcc on PATH, no CUDA_HOME, nothing under /usr/local/cuda on any path), builds one real kernel.

Marked `toolchain`: it downloads the wheels (about 200 MB, from pip's cache after the first run)
and compiles one kernel (about a minute).  Skipped with FUSED_GEMM_OFFLINE=1.
"""
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

pytestmark = pytest.mark.toolchain
ROOT = Path(__file__).resolve().parent.parent

BUILD_ONE = r"""
import ctypes, json, sys
from fused_gemm.generator import GemmSpec, TileConfig, build
from fused_gemm.generator.build import toolchain
from fused_gemm.generator.gemm.abi import PROBLEM
tc = toolchain()
spec = GemmSpec("bf16", epilogue="bias+silu", config=TileConfig((128, 64, 64), (1, 1, 1), "cooperative"))
r = build(spec)
lib = ctypes.CDLL(str(r.library))
lib.fg_spec_uri.restype = ctypes.c_char_p
print(json.dumps({"nvcc": str(tc.nvcc), "source": tc.nvcc_source, "version": tc.nvcc_version,
                  "library": str(r.library), "problems": r.problems, "abi": lib.fg_abi_version(),
                  "uri": lib.fg_spec_uri().decode(), "expected_uri": spec.uri, "log": r.entry.log.read_text(),
                  "torch": "torch" in sys.modules}))
"""


def _toolchain_requirements():
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs Python 3.11's tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    generator_deps = [d for d in project["dependencies"] if not d.startswith("torch")]
    return generator_deps, project["optional-dependencies"]["toolchain"]


def _hidden_system_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "CUDACXX", "FUSED_GEMM_NVCC", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if "cuda" not in p.lower())
    env["FUSED_GEMM_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def test_pip_only_toolchain_builds_a_kernel(tmp_path):
    generator_deps, toolchain_deps = _toolchain_requirements()
    venv_dir = tmp_path / "venv"
    venv.create(venv_dir, with_pip=True)
    py = venv_dir / "bin" / "python"
    env = _hidden_system_env(tmp_path)
    # The project itself without its torch dependency (the generator needs none), then exactly the
    # generator's dependencies and the `toolchain` extra, as pyproject.toml lists them.
    for args in (["--no-deps", str(ROOT)], [*generator_deps, *toolchain_deps]):
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", *args], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([str(py), "-c", BUILD_ONE], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(got["nvcc"]).resolve().is_relative_to(venv_dir.resolve()), got["nvcc"]
    assert got["source"].startswith("cuda.pathfinder"), got["source"]
    assert got["abi"] == 4 and got["uri"] == got["expected_uri"] and got["problems"] == []
    assert not got["torch"]
    command = got["log"].splitlines()[0]
    assert "/usr/local/cuda" not in command and str(venv_dir) in command, command
    r = subprocess.run([str(venv_dir / "bin" / "fused-gemm"), "info"], env=env, capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "found via cuda.pathfinder" in r.stdout and str(venv_dir) in r.stdout, r.stdout
