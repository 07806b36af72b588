"""Real nvcc builds of real CUTLASS kernels (no GPU needed); marked `compile`."""
import ctypes
import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fused_gemm.generator import BuildError, GemmSpec, TileConfig, build, build_many, family_of, locate, preset
from fused_gemm.generator.gemm.abi import PROBLEM
from fused_gemm.generator.toolchain import ARCH_FLAGS

pytestmark = pytest.mark.compile
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ci_builds(tmp_path_factory):
    old = os.environ.get("FUSED_GEMM_CACHE_DIR")
    os.environ["FUSED_GEMM_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))
    locate.cache_clear()
    try:
        yield build_many(preset("compile-ci") + preset("gated-compile-ci") + preset("attention-compile-ci") +
                         preset("attention-sm80-compile-ci") +
                         preset("decode-compile-ci") + preset("quant-compile-ci") +
                         preset("int4-compile-ci") + preset("rope-compile-ci"), progress=False)
    finally:
        if old is None:
            os.environ.pop("FUSED_GEMM_CACHE_DIR", None)
        else:
            os.environ["FUSED_GEMM_CACHE_DIR"] = old
        locate.cache_clear()


def _gemm(builds):
    """The first GEMM-family build (builds finish in any order)."""
    return next(r for r in builds if r.spec.family == "gemm")


def test_representative_kernels_compile_without_perf_bugs(ci_builds):
    assert len(ci_builds) == 16
    for r in ci_builds:
        assert not r.cached and r.library.is_file()
        assert r.problems == [], f"{r.spec.uri}: {r.problems}"   # no C7510 / C7508 / spills
        log = r.entry.log.read_text()
        assert "-DNDEBUG" in log and ARCH_FLAGS[r.spec.arch][0] in log
        if r.spec.arch == "sm80":      # example 41's kernel, assembled for Ampere and for Hopper
            assert "for 'sm_80'" in log and "for 'sm_90'" in log
        assert ("--use_fast_math" in log) == bool(family_of(r.spec).nvcc_flags)


def test_libraries_export_the_c_abi(ci_builds):
    for r in ci_builds:
        lib = ctypes.CDLL(str(r.library))   # static cudart: loads without a GPU or driver
        lib.fg_spec_uri.restype = ctypes.c_char_p
        lib.fg_problem_size.restype = ctypes.c_size_t
        problem = family_of(r.spec).abi
        assert lib.fg_abi_version() == problem.version
        assert lib.fg_spec_uri().decode() == r.spec.uri
        assert lib.fg_problem_size() == problem.size
        assert lib.fg_features() == (1 if getattr(r.spec, "pdl", False) else 0)
        for name in ("fg_prepare", "fg_can_implement", "fg_workspace_size", "fg_run", "fg_last_error"):
            assert hasattr(lib, name)


def test_library_loads_through_the_runtime_without_a_gpu(ci_builds):
    from fused_gemm.library import KernelLibrary
    r = _gemm(ci_builds)
    lib = KernelLibrary(r.library, family_of(r.spec), r.spec.uri)
    assert lib.supports_pdl
    # A problem on a device ordinal out of range is refused with a message, not a crash.
    fields = [0] * len(PROBLEM.fields)
    fields[PROBLEM.names.index("device")] = 999
    assert lib.can_implement(*fields) == 1 and "out of range" in lib.last_error()


def test_no_jit_mode_loads_from_the_cache_without_a_toolchain(ci_builds, monkeypatch):
    """A serving host with a copied cache and no nvcc at all."""
    import fused_gemm
    from fused_gemm import jit
    spec = _gemm(ci_builds).spec
    jit._ops.pop(spec, None)
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")
    monkeypatch.setenv("FUSED_GEMM_NVCC", "/nonexistent/nvcc")   # any toolchain lookup would fail
    op = fused_gemm.compile(spec)
    assert op.library.path == _gemm(ci_builds).library


def test_failed_build_names_source_and_log(tmp_cache, monkeypatch):
    build_mod = importlib.import_module("fused_gemm.generator.build")  # the package re-exports build()
    spec = GemmSpec("fp16", epilogue="sigmoid", config=TileConfig((128, 64, 64), (1, 1, 1)))
    monkeypatch.setattr(build_mod, "render", lambda s: "#error fused_gemm_broken_on_purpose\n")
    locate.cache_clear()
    try:
        with pytest.raises(BuildError) as info:
            build(spec)
    finally:
        locate.cache_clear()
    msg = str(info.value)
    assert "nvcc failed" in msg and "fused_gemm_broken_on_purpose" in msg
    source = Path(msg.split("source: ")[1].splitlines()[0])
    assert source.is_file() and not (source.parent / "lib.so").exists()


BUILDER = """
import sys
from fused_gemm.generator import GemmSpec, TileConfig, build
r = build(GemmSpec("fp16", epilogue="bias+relu", config=TileConfig((128, 128, 64), (1, 1, 1))))
print("cached" if r.cached else "built", r.library)
"""


def _builder(env):
    return subprocess.Popen([sys.executable, "-c", BUILDER], env=env, cwd=Path(env["FUSED_GEMM_CACHE_DIR"]).parent, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_killed_build_then_two_concurrent_builders(tmp_path):
    env = dict(os.environ, FUSED_GEMM_CACHE_DIR=str(tmp_path / "cache"))
    # 1. a builder killed halfway through nvcc leaves no library and no lock that blocks others
    victim = _builder(env)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "cache").rglob("kernel.cu")):
        assert victim.poll() is None and time.monotonic() < deadline, victim.stderr.read() if victim.poll() else ""
        time.sleep(0.2)
    time.sleep(2)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not list((tmp_path / "cache").rglob("lib.so"))
    # 2. two processes race for the same kernel: one compiles, the other waits and reuses it
    a, b = _builder(env), _builder(env)
    outs = [p.communicate(timeout=600) for p in (a, b)]
    assert a.returncode == 0 and b.returncode == 0, outs
    states = sorted(o[0].split()[0] for o in outs)
    assert states == ["built", "cached"], outs
    libs = list((tmp_path / "cache").rglob("lib.so"))
    assert len(libs) == 1 and not list((tmp_path / "cache").rglob("lib.so.tmp*"))
