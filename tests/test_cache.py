"""Cache key stability, layout and the CLI's cache commands (no nvcc run here)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fused_gemm.generator import GemmSpec, Toolchain, ToolchainError, render
from fused_gemm.generator import cache, toolchain
from fused_gemm.generator.build import performance_problems

TC = Toolchain(Path("/opt/cuda-a/bin/nvcc"), "13.0.88", "4.2.0")
F = ("fused_gemm/common", "fused_gemm/gemm")   # the GEMM family's csrc folders


def test_key_ignores_host_paths_and_depends_on_what_matters():
    src = render(GemmSpec("bf16", epilogue="bias+gelu_tanh"))
    key = cache.cache_key(src, "sm90a", TC, F)
    assert key == cache.cache_key(src, "sm90a", Toolchain(Path("/elsewhere/nvcc"), "13.0.88", "4.2.0"), F)
    assert key != cache.cache_key(src + "\n", "sm90a", TC, F)
    assert key != cache.cache_key(src, "sm90a", Toolchain(TC.nvcc, "13.0.99", "4.2.0"), F)
    assert key != cache.cache_key(src, "sm90a", Toolchain(TC.nvcc, "13.0.88", "4.3.0"), F)
    assert key != cache.cache_key(src, "sm90a", TC, ("fused_gemm/common", "fused_gemm/gated"))


def test_a_family_key_ignores_other_families_headers():
    from fused_gemm.generator.registry import FAMILIES
    assert FAMILIES["gemm"].csrc_folders == F
    assert "fused_gemm/gemm" not in FAMILIES["gated"].csrc_folders


def test_flags_in_the_key_have_no_paths():
    for flag in toolchain.codegen_flags("sm90a"):
        assert "/" not in flag.replace("code=sm_90a", ""), flag
    assert "-DNDEBUG" in toolchain.codegen_flags("sm90a")


def test_key_is_the_same_in_another_process_and_folder(tmp_path):
    """No Python version, cwd or cache location leaks into the key."""
    code = ("from pathlib import Path; from fused_gemm.generator import GemmSpec, Toolchain, render, cache;"
            "print(cache.cache_key(render(GemmSpec('fp16', epilogue='bias+silu')), 'sm90a', "
            "Toolchain(Path('/x/nvcc'), '13.0.88', '4.2.0'), ('fused_gemm/common', 'fused_gemm/gemm')))")
    env = dict(os.environ, FUSED_GEMM_CACHE_DIR=str(tmp_path / "c"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    here = cache.cache_key(render(GemmSpec("fp16", epilogue="bias+silu")), "sm90a",
                           Toolchain(Path("/x/nvcc"), "13.0.88", "4.2.0"), F)
    assert out.stdout.strip() == here


def test_entry_layout_is_relative_to_the_root(tmp_cache):
    spec = GemmSpec("bf16", epilogue="bias")
    entry = cache.entry_for(spec, render(spec), TC)
    rel = entry.folder.relative_to(tmp_cache)
    assert rel.parts[:3] == ("cutlass-4.2.0_nvcc-13.0.88", "sm90a", spec.uri)
    assert not entry.is_built()


def test_write_if_different_keeps_mtime(tmp_path):
    p = tmp_path / "k.cu"
    assert cache.write_if_different(p, "a")
    mtime = p.stat().st_mtime_ns
    assert not cache.write_if_different(p, "a")
    assert p.stat().st_mtime_ns == mtime
    assert cache.write_if_different(p, "b") and p.read_text() == "b"


def test_performance_problems_are_found():
    log = ("ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized\n"
           "ptxas info    : Used 168 registers, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : 24 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n")
    problems = performance_problems(log)
    assert any("C7510" in p for p in problems)
    assert any("spill" in p for p in problems)
    assert performance_problems("ptxas info : 0 bytes spill stores, 0 bytes spill loads") == []
    c7514 = ("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
             "non wgmma instructions reading accumulator registers")
    assert performance_problems(c7514) == ["wgmma serialised (ptxas C7514)"]


def test_missing_nvcc_is_a_clear_error(monkeypatch):
    for var in ("FUSED_GEMM_NVCC", "CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(toolchain, "FALLBACK_NVCC", ())
    monkeypatch.setattr(toolchain, "_pathfinder_nvcc", lambda: None)
    with pytest.raises(ToolchainError, match="nvcc not found.*toolchain"):
        toolchain.find_nvcc()


def test_explicit_nvcc_variable_must_point_at_nvcc(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSED_GEMM_NVCC", str(tmp_path / "missing-nvcc"))
    with pytest.raises(ToolchainError, match="FUSED_GEMM_NVCC"):
        toolchain.find_nvcc()


def test_nvcc_search_order(monkeypatch, tmp_path):
    """Explicit variables, then CUDA_HOME, then cuda.pathfinder (pip wheels), then PATH."""
    def fake_nvcc(folder):
        path = tmp_path / folder / "bin" / "nvcc"
        path.parent.mkdir(parents=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path
    home, wheel, on_path = fake_nvcc("home"), fake_nvcc("wheel"), fake_nvcc("path")
    for var in ("FUSED_GEMM_NVCC", "CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setattr(toolchain, "_pathfinder_nvcc", lambda: str(wheel))
    assert toolchain.find_nvcc() == (wheel, "cuda.pathfinder (pip wheels, conda, CUDA toolkit)")
    monkeypatch.setenv("CUDA_HOME", str(home.parent.parent))
    assert toolchain.find_nvcc()[0] == home
    monkeypatch.setenv("FUSED_GEMM_NVCC", str(on_path))
    assert toolchain.find_nvcc() == (on_path, "$FUSED_GEMM_NVCC")
    monkeypatch.delenv("FUSED_GEMM_NVCC")
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setattr(toolchain, "_pathfinder_nvcc", lambda: None)
    assert toolchain.find_nvcc() == (on_path, "PATH")


def test_wheel_layout_gets_a_lib_dir_flag(tmp_path):
    nvcc = tmp_path / "nvidia" / "cu13" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.touch()
    assert toolchain.host_flags(nvcc) == []
    (tmp_path / "nvidia" / "cu13" / "lib").mkdir()
    assert toolchain.host_flags(nvcc) == [f"-L{tmp_path / 'nvidia' / 'cu13' / 'lib'}"]


def test_bad_cutlass_dir_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSED_GEMM_CUTLASS_DIR", str(tmp_path))
    with pytest.raises(ToolchainError, match="FUSED_GEMM_CUTLASS_DIR"):
        toolchain.find_cutlass()


def run_cli(*args, env=None):
    # Not from the checkout's root: there `python -m` would import the uninstalled source folder.
    return subprocess.run([sys.executable, "-m", "fused_gemm.generator.cli", *args], capture_output=True,
                          text=True, env=env, cwd=Path(__file__).resolve().parent)


def test_cli_codegen_writes_sources(tmp_path):
    r = run_cli("codegen", "--epilogue", "bias+gelu_tanh", "--tile", "128x128x64", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    files = list(tmp_path.glob("*.cu"))
    assert len(files) == 1 and "GELU_taylor" in files[0].read_text()
    r = run_cli("codegen", "--preset", "bench", "-o", str(tmp_path / "bench"))
    assert r.returncode == 0 and len(list((tmp_path / "bench").glob("*.cu"))) >= 3
    header = (tmp_path / "bench" / "fg_gemm_abi.h").read_text()
    assert "typedef struct FgGemmProblem" in header
    uri = files[0].name[:-3]
    r = run_cli("codegen", "--uri", uri, "-o", str(tmp_path / "by-uri"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "by-uri" / files[0].name).read_text() == files[0].read_text()


def test_cli_codegen_takes_the_gated_and_rope_families(tmp_path):
    r = run_cli("codegen", "--family", "gated", "--activation", "silu", "--with-bias", "--with-residual",
                "--tile", "128x128x64", "--cluster", "1x2x1", "--schedule", "pingpong", "-o", str(tmp_path / "g"))
    assert r.returncode == 0, r.stderr
    (src,) = (tmp_path / "g").glob("gated_*.cu")
    assert "fused_gemm::FastSiLu" in src.read_text() and "bias" in src.name and (tmp_path / "g" / "fg_gated_abi.h").is_file()
    r = run_cli("codegen", "--family", "rope", "--head-dim", "128", "--rotary-dim", "64", "--style", "gptj",
                "--qkv-bias", "--l1-reserve", "64", "--tile", "128x128x64", "--cluster", "1x2x1", "--schedule",
                "pingpong", "-o", str(tmp_path / "r"))
    assert r.returncode == 0, r.stderr
    (src,) = (tmp_path / "r").glob("rope_*.cu")
    assert src.name == "rope_sm90a_a-bf16_bias-bf16_d128_r64_gptj_t128x128x64_c1x2x1_pp_persist_l1r64.cu"
    assert "fused_gemm/rope/sm90_rope.hpp" in src.read_text()


@pytest.mark.parametrize("args, fragment", [
    (["codegen", "--epilogue", "silu+bias"], "out of order"),
    (["build", "--tile", "100x128x64"], "tile M"),
    (["build", "--preset", "nope"], "unknown preset"),
    (["codegen", "--dtype", "int8"], "unknown dtype"),
    (["codegen", "--uri", "gemm_bogus"], "not a GEMM kernel URI"),
])
def test_cli_errors_are_one_line(args, fragment, tmp_path):
    r = run_cli(*args, "-o" if args[0] == "codegen" else "-q", *([str(tmp_path)] if args[0] == "codegen" else []))
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], r.stderr


def test_cli_info_and_cache(tmp_path):
    env = dict(os.environ, FUSED_GEMM_CACHE_DIR=str(tmp_path / "cache"))
    r = run_cli("info", env=env)
    assert r.returncode == 0 and str(tmp_path / "cache") in r.stdout
    r = run_cli("cache", "list", env=env)
    assert r.returncode == 0 and "0 kernels" in r.stdout
    r = run_cli("cache", "clear", env=env)
    assert r.returncode == 0 and "removed 0" in r.stdout


def test_prebuilt_libraries_are_found_by_uri(tmp_path, monkeypatch):
    """$FUSED_GEMM_PREBUILT_DIR (os.pathsep-separated) holds CMake's lib<uri>.so: found without a toolchain."""
    spec = GemmSpec("bf16", epilogue="bias")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / f"lib{spec.uri}.so").write_bytes(b"")
    monkeypatch.setenv("FUSED_GEMM_PREBUILT_DIR", os.pathsep.join([str(first), str(second)]))
    assert cache.find_prebuilt(spec) == second / f"lib{spec.uri}.so"
    assert cache.find_prebuilt(GemmSpec("fp16", epilogue="bias")) is None
    monkeypatch.delenv("FUSED_GEMM_PREBUILT_DIR")
    assert cache.find_prebuilt(spec) is None


def test_every_csrc_folder_a_kernel_includes_is_in_its_key():
    """A kernel's cache key hashes only the csrc/fused_gemm folders cache.csrc_folders_of names for its spec:
    every folder its rendered source reaches through `#include "fused_gemm/<folder>/..."` (or <...>), header by
    header, must be one of them, or an edit there would leave stale builds in the cache.  Every spec of every
    preset; headers reach each other by such paths only (a relative `../` include would hide a folder)."""
    import re
    from fused_gemm.generator.paths import csrc_dir
    from fused_gemm.generator.registry import preset, preset_names
    root = csrc_dir() / "fused_gemm"
    include = re.compile(r'#\s*include\s*[<"]fused_gemm/(\w+)/([^">]+)[">]')
    for header in root.rglob("*"):
        if header.is_file():
            assert not re.search(r'#\s*include\s*"\.\./', header.read_text()), header

    def reached(text: str) -> set:
        seen, todo, folders = set(), list(include.findall(text)), set()
        while todo:
            folder, name = todo.pop()
            folders.add(folder)
            if (folder, name) not in seen:
                seen.add((folder, name))
                todo += include.findall((root / folder / name).read_text())
        return folders

    specs = {spec.uri: spec for name in preset_names() for spec in preset(name)}
    missing = {}
    for uri, spec in specs.items():
        outside = reached(render(spec)) - {f.split("/", 1)[1] for f in cache.csrc_folders_of(spec)}
        if outside:
            missing[uri] = outside
    assert len(specs) > 100 and missing == {}
