"""The Python API's input checks that need no GPU."""
import pytest
import torch

import fused_gemm
from fused_gemm import LaunchOptions
from fused_gemm.generator.gemm.heuristics import RULES, pick


def test_linear_rejects_cpu_and_non_tensors():
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.linear(torch.randn(4, 64), torch.randn(32, 64))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fused_gemm.linear([1, 2], torch.randn(32, 64))
    with pytest.raises(ValueError, match="at least one dim"):
        fused_gemm.linear(torch.tensor(1.0), torch.randn(32, 64))


def test_compile_rejects_non_specs():
    with pytest.raises(TypeError, match="GemmSpec"):
        fused_gemm.compile("bias+gelu")


@pytest.mark.parametrize("kwargs, fragment", [
    ({"splits": 0}, "splits"), ({"swizzle": 3}, "swizzle"), ({"raster": "diag"}, "raster"),
    ({"decomposition": "magic"}, "decomposition"), ({"reduction": "atomic"}, "reduction"),
])
def test_launch_options_are_validated(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        LaunchOptions(**kwargs)


def test_launch_options_encode_for_the_abi():
    assert LaunchOptions().abi == (1, 1, 0, 0, 0, 0)
    assert LaunchOptions(splits=4, swizzle=2, raster="along_n", decomposition="split_k",
                         reduction="nondeterministic", pdl=True).abi == (4, 2, 2, 2, 1, 1)
    assert LaunchOptions(splits=2) == LaunchOptions(splits=2) and hash(LaunchOptions(splits=2))


def test_heuristics_cover_every_m_and_use_swap_ab_for_decode():
    for arch, rules in RULES.items():
        assert rules[-1].max_m >= 1 << 40
        assert [r.max_m for r in rules] == sorted(r.max_m for r in rules)
        assert pick(arch, 1).config.swap_ab and pick(arch, 64).config.swap_ab
        assert not pick(arch, 4096).config.swap_ab


def test_split_count_aims_for_one_cta_an_sm_at_head_dim_128():
    """The heuristic's table (generator/decode/heuristics.py): one wave of about one CTA an SM, each
    split at least MIN_KEYS long, no split where the groups fill the GPU alone."""
    from fused_gemm.generator.decode.heuristics import splits
    assert [splits(b * 8, 32768, 128, 132) for b in (1, 2, 4, 8, 32)] == [16, 8, 4, 2, 1]
    assert [splits(b * 8, 1024, 128, 132) for b in (1, 2, 4)] == [8, 8, 4]   # 128 keys a split at the least
    assert [splits(b * 8, 512, 128, 132) for b in (1, 8)] == [4, 2]
    assert splits(8, 256, 128, 132) == 1 and splits(8, 1024, 64, 132) == 2     # whole; other head dims: 512


def test_decode_attention_spec_names_its_pdl_build():
    from fused_gemm.generator.decode.spec import DecodeSpec
    from fused_gemm.generator.render import render
    for spec in (DecodeSpec(), DecodeSpec("fp16", 64, 4, pdl=False)):
        assert DecodeSpec.from_uri(spec.uri) == spec and spec.uri.endswith("_nopdl") != spec.pdl
        assert ("#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in render(spec)) == spec.pdl


def test_decode_kernels_take_pdl_and_splits_only():
    """KernelOp.check_decode_launch, the one check the GEMM and int4 decode kernels share."""
    from types import SimpleNamespace
    from fused_gemm.kernel_op import KernelOp
    op = SimpleNamespace(spec=SimpleNamespace(uri="a decode kernel"))
    for launch in (LaunchOptions(), LaunchOptions(splits=3), LaunchOptions(splits=8, pdl=True)):
        KernelOp.check_decode_launch(op, launch)
    KernelOp.check_decode_launch(op, LaunchOptions(splits=4), power_of_two=True)
    for launch, power_of_two, fragment in ((LaunchOptions(splits=3), True, "a power of two up to 8"),
                                           (LaunchOptions(splits=9), False, "1 to 8"),
                                           (LaunchOptions(swizzle=2), False, "takes launch.pdl and launch.splits")):
        with pytest.raises(ValueError, match=fragment):
            KernelOp.check_decode_launch(op, launch, power_of_two=power_of_two)


def test_attention_backend_is_forced_by_the_environment(monkeypatch):
    from fused_gemm.attention.api import BACKEND_ENV, backend
    for value, arch in (("sm80", "sm80"), ("sm90a", "sm90a"), ("sm90", "sm90a")):
        monkeypatch.setenv(BACKEND_ENV, value)
        assert backend(0) == arch              # no GPU asked
    monkeypatch.setenv(BACKEND_ENV, "auto")
    assert backend(-1) == "sm90a"              # a CPU tensor: the selection refuses it
    monkeypatch.setenv(BACKEND_ENV, "sm70")
    with pytest.raises(ValueError, match=BACKEND_ENV):
        backend(0)
    monkeypatch.setenv(BACKEND_ENV, "sm80")
    with pytest.raises(ValueError, match="q is on cpu"):
        fused_gemm.attention(torch.randn(1, 4, 2, 64), torch.randn(1, 4, 2, 64), torch.randn(1, 4, 2, 64))


def test_attention_check_refuses_a_cpu_q():
    """check_arguments() is the validation a routed call gets without building the prefill kernel: it names q."""
    from fused_gemm.attention.op import check_arguments
    from fused_gemm.generator.attention.heuristics import pick as pick_attention
    q = torch.randn(1, 4, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="q is on cpu"):
        check_arguments(pick_attention("bf16", 64, True, 4, "sm90a"), q, q, q, None, None, None, None, None)


def test_attention_refuses_gpus_before_ampere(monkeypatch):
    from fused_gemm.attention import api
    monkeypatch.setenv(api.BACKEND_ENV, "auto")
    monkeypatch.setattr(api, "_device_arch", {})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "Tesla T4")
    with pytest.raises(RuntimeError, match="compute capability 8.0 or later; cuda:0 is 7.5"):
        api.backend(0)


def test_attention_stays_the_function_whatever_is_imported_first():
    """Importing the fused_gemm.attention package (compile(AttentionSpec), AttentionOp) binds it
    over the lazily loaded function of the same name; the op module undoes that."""
    import subprocess
    import sys
    from pathlib import Path
    code = "import fused_gemm.attention.op, fused_gemm; print(callable(fused_gemm.attention))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


@pytest.mark.parametrize("layout", ["neox", "gptj", "pairs"])
def test_rope_cache_from_a_models_own_cos_sin_tables(layout):
    """Hugging Face's tables (every angle twice: NeoX halves, GPT-J neighbours) or one per pair give
    rope_cos_sin_cache's layout; tables that do not repeat the declared way are refused."""
    ref = fused_gemm.rope_cos_sin_cache(64, 32, base=500000.0)
    cos, sin = ref[:, :16], ref[:, 16:]
    if layout == "neox":
        cos, sin = torch.cat((cos, cos), 1), torch.cat((sin, sin), 1)
    elif layout == "gptj":
        cos, sin = cos.repeat_interleave(2, 1), sin.repeat_interleave(2, 1)
    got = fused_gemm.rope_cos_sin_cache_from(cos.double(), sin.double(), layout)
    assert got.dtype == torch.float32 and got.is_contiguous() and torch.equal(got, ref)
    if layout != "pairs":
        with pytest.raises(ValueError, match="twice"):
            fused_gemm.rope_cos_sin_cache_from(ref[:, :16], ref[:, 16:], layout)
    with pytest.raises(ValueError, match="layout"):
        fused_gemm.rope_cos_sin_cache_from(cos, sin, "halves")
    with pytest.raises(ValueError, match="same shape"):
        fused_gemm.rope_cos_sin_cache_from(ref[:, :16], ref[:8, 16:], "pairs")
