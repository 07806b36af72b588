"""The family protocol and the layering around it (no GPU, no nvcc)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fused_gemm.generator import FAMILIES, GemmSpec, LaunchOptions, SpecError, family_of
import importlib

from fused_gemm.generator import abi, toolchain
from fused_gemm.generator.gemm.abi import PROBLEM
from fused_gemm.generator.paths import csrc_dir, templates_dir

HERE = Path(__file__).resolve().parent


def _run(code: str) -> subprocess.CompletedProcess:
    # Run outside the checkout's root, where `python -c` would import the uninstalled source folder.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE)


def test_generator_and_codegen_import_no_torch(tmp_path):
    r = _run("import sys, fused_gemm.generator, fused_gemm; print('torch' in sys.modules)")
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    r = _run("import sys\nfrom fused_gemm.generator.cli import main\n"
             f"rc = main(['codegen', '--preset', 'bench', '-o', {str(tmp_path)!r}])\n"
             "print(rc, 'torch' in sys.modules)")
    assert r.returncode == 0 and r.stdout.split()[-2:] == ["0", "False"], r.stderr
    assert len(list(tmp_path.glob("*.cu"))) >= 3


def test_runtime_names_load_on_first_use():
    r = _run("import sys, fused_gemm\nassert 'torch' not in sys.modules\nf = fused_gemm.linear\n"
             "print('torch' in sys.modules, f.__module__)")
    assert r.returncode == 0 and r.stdout.split() == ["True", "fused_gemm.gemm.linear"], r.stderr


def test_every_family_has_its_files():
    assert {"gemm", "gated", "rope", "attention", "decode"} <= set(FAMILIES)
    for family in FAMILIES.values():
        spec = next(iter(family.presets.values()))()[0]
        assert family_of(spec) is family and spec.uri.startswith(family.name + "_")
        assert (templates_dir() / family.template(spec)).is_file()
        assert (csrc_dir() / "fused_gemm" / family.name).is_dir()
        module, _, name = family.op.partition(":")
        assert Path(__import__(module, fromlist=[name]).__file__).parent.name == family.name


def test_abi_table_matches_what_the_runtime_packs():
    from fused_gemm.gated.op import PACK_ORDER as GATED_PACK_ORDER
    from fused_gemm.gemm.op import PACK_ORDER
    assert PACK_ORDER == PROBLEM.names
    assert GATED_PACK_ORDER == FAMILIES["gated"].abi.names
    from fused_gemm.rope.op import PACK_ORDER as ROPE_PACK_ORDER
    assert ROPE_PACK_ORDER == FAMILIES["rope"].abi.names
    from fused_gemm.attention.op import PACK_ORDER as ATTENTION_PACK_ORDER
    assert ATTENTION_PACK_ORDER == FAMILIES["attention"].abi.names
    from fused_gemm.decode.op import PACK_ORDER as DECODE_PACK_ORDER
    assert DECODE_PACK_ORDER == FAMILIES["decode"].abi.names
    names = PROBLEM.names
    assert names[names.index("splits"):names.index("pdl") + 1] == (
        "splits", "swizzle", "raster", "decomposition", "reduction", "pdl")
    assert len(LaunchOptions().abi) == 6
    assert PROBLEM.size == 176 and PROBLEM.names.index("stream") == len(PROBLEM.fields) - 1


def test_split_k_parallel_checks_in_python_match_the_header():
    """The thresholds GemmOp's split-K checks refuse at are the header's own (slice alignment, reduction vector)."""
    import re
    from fused_gemm.gemm.op import REDUCE_VECTOR, SLICE_ALIGN
    header = (csrc_dir() / "fused_gemm/splitk/sm90_split_k_parallel.hpp").read_text()
    assert int(re.search(r"kSliceAlign = (\d+);", header)[1]) == SLICE_ALIGN
    assert int(re.search(r"kVector = (\d+);", header)[1]) == REDUCE_VECTOR


def test_families_built_on_the_gemm_tiles_refuse_split_k_parallel():
    from fused_gemm.generator.gated.spec import GatedSpec
    from fused_gemm.generator.gemm.spec import TileConfig
    from fused_gemm.generator.int4.spec import Int4Spec
    from fused_gemm.generator.rope.spec import RopeSpec
    plain = TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel")
    swapped = TileConfig((64, 64, 128), (4, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True)
    for config in (plain, swapped):
        for make in (lambda: GatedSpec("bf16", config=config), lambda: RopeSpec("bf16", 128, config=config)):
            with pytest.raises(SpecError, match="persistent tile scheduler"):
                make()
    with pytest.raises(SpecError, match="no split_k_parallel"):   # int4 kernels are all swap-AB
        Int4Spec("bf16", config=swapped)


def test_abi_declaration_asserts_every_offset():
    text = PROBLEM.c_declaration()
    assert "#define FG_GEMM_PROBLEM_ABI_VERSION 4" in text
    for f, offset in PROBLEM.offsets():
        assert f"offsetof(FgGemmProblem, {f.name}) == {offset}" in text
    with pytest.raises(ValueError, match="aligned"):
        abi.AbiStruct("FgBad", 1, (abi.Field("a", "i32"), abi.Field("b", "i64")))
    with pytest.raises(ValueError, match="multiple of 8"):
        abi.AbiStruct("FgBad", 1, (abi.Field("a", "i32"),))


def test_no_jit_mode_names_the_build_command(tmp_cache, monkeypatch):
    import fused_gemm
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")
    spec = GemmSpec("fp16", epilogue="bias+sigmoid", pdl=False)
    with pytest.raises(fused_gemm.KernelNotReadyError, match=f"fused-gemm build --uri {spec.uri}"):
        fused_gemm.compile(spec)
    with pytest.raises(TypeError, match="GemmSpec"):
        fused_gemm.compile("bias+gelu")


def test_cutlass_examples_reach_the_include_path():
    tc = toolchain.Toolchain(Path("/x/nvcc"), "13.0.88", "4.2.0", toolchain.find_cutlass())
    flags = tc.include_flags(("88_hopper_fmha", "41_fused_multi_head_attention"))
    assert any(f.endswith("examples/88_hopper_fmha") for f in flags)
    assert any(f.endswith("examples/common") for f in flags)
    with pytest.raises(toolchain.ToolchainError, match="not shipped"):
        tc.include_flags(("999_missing",))


def test_parallel_builds_are_bounded_by_memory(monkeypatch):
    build = importlib.import_module("fused_gemm.generator.build")   # the package re-exports build()
    monkeypatch.setattr(build, "_available_memory", lambda: 9 << 30)
    assert build.default_jobs() == min(2, os.cpu_count())
    monkeypatch.setattr(build, "_available_memory", lambda: 1 << 30)
    assert build.default_jobs() == 1


def test_unknown_spec_objects_are_refused():
    with pytest.raises(SpecError, match="registered kernel family"):
        family_of(object())
