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
