"""Rendering: deterministic source, the right CUTLASS pieces for each spec option."""
import pytest

from fused_gemm.generator import GemmSpec, TileConfig, render
from fused_gemm.generator.gemm.presets import TEST_EPILOGUES

SWAP = TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)


@pytest.mark.parametrize("epilogue", TEST_EPILOGUES)
@pytest.mark.parametrize("config", [TileConfig(), SWAP], ids=["big", "swap"])
def test_render_is_deterministic_and_complete(epilogue, config):
    spec = GemmSpec("bf16", epilogue=epilogue, config=config)
    src = render(spec)
    assert src == render(spec)
    assert spec.uri in src
    assert "{{" not in src and "{%" not in src
    assert src.count("(") == src.count(")") and src.count("{") == src.count("}")
    assert '#include "fused_gemm/common/sm90_exports.inl"' in src
    assert "typedef struct FgGemmProblem" in src and "static_assert(sizeof(FgGemmProblem) == 176" in src


def test_pdl_is_a_spec_switch():
    on = render(GemmSpec("bf16"))
    off = render(GemmSpec("bf16", pdl=False))
    assert "#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in on
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in off
    assert on.index("CUTLASS_ENABLE_GDC_FOR_SM90") < on.index("#include \"fused_gemm")


@pytest.mark.parametrize("tile_n, extended", [(128, False), (96, False), (192, False), (16, False),
                                              (112, True), (144, True), (160, True), (224, True)])
def test_tile_widths_outside_cutes_default_wgmma_shapes_get_the_extended_ones(tile_n, extended):
    # Without the define CuTe serves a 112-wide tile with seven 16-wide wgmmas a k-step.
    from fused_gemm.generator.int4.spec import Int4Spec
    etile = (64, 16) if tile_n % 32 else None      # CUTLASS's automatic epilogue subtile is 32 wide
    cfg = TileConfig((128, tile_n, 64), (1, 1, 1), "pingpong", "persistent", epilogue_tile=etile)
    assert cfg.extended_wgmma is extended
    swapped = TileConfig((64, tile_n, 64), (1, 1, 1), "pingpong", "persistent", swap_ab=True)
    for spec in (GemmSpec("bf16", config=cfg), Int4Spec("bf16", "int4", config=swapped)):
        src = render(spec)
        assert ("#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" in src) is extended, spec.uri
        if extended:
            assert src.index("CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED") < src.index("#include")
        assert ("static_assert(size<1>(typename CollectiveMainloop::TiledMma::AtomShape_MNK{})" in src) is extended


@pytest.mark.parametrize("tile_n, extended", [(192, False), (224, True)])
def test_pair_epilogue_kernels_get_the_extended_wgmma_shapes_too(tile_n, extended):
    from fused_gemm.generator.gated.spec import GatedSpec
    cfg = TileConfig((128, tile_n, 64), (1, 1, 1), "pingpong", "persistent")
    assert ("#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" in render(GatedSpec("bf16", config=cfg))) is extended


def test_epilogue_nodes_follow_the_recipe():
    src = render(GemmSpec("bf16", epilogue="row_scale+col_scale+bias+gelu_tanh+residual"))
    assert "GELU_taylor" in src
    assert "Sm90SrcFetch<ElementC>" in src and "using ElementC = cutlass::bfloat16_t" in src
    assert src.count("Sm90RowBroadcast") == 2      # bias and col_scale: one value per column n
    assert src.count("Sm90ColBroadcast") == 1      # row_scale: one value per row m
    for operand in ("p.alpha", "p.beta", "p.bias", "p.row_scale", "p.col_scale"):
        assert operand in src


def test_no_residual_means_no_source_load():
    src = render(GemmSpec("fp16", epilogue="bias+relu"))
    assert "using ElementC = void" in src
    assert "Sm90SrcFetch" not in src and "p.beta" not in src


def test_swap_ab_transposes_layouts_and_broadcasts():
    src = render(GemmSpec("bf16", epilogue="row_scale+bias", config=SWAP))
    assert "using LayoutA = cutlass::layout::RowMajor" in src          # the weight [N,K]
    assert "using LayoutB = cutlass::layout::ColumnMajor" in src       # X^T [K,M]
    assert "using LayoutCD = cutlass::layout::ColumnMajor" in src
    assert "Sm90ColBroadcast<0, TileShape, cutlass::bfloat16_t" in src  # bias runs along kernel M
    assert "Sm90RowBroadcast<0, TileShape, float" in src              # row_scale along kernel N
    assert "kSwapAB = true" in src and "fused_gemm::StreamKScheduler" in src


@pytest.mark.parametrize("schedule, kernel, epi", [
    ("cooperative", "KernelTmaWarpSpecializedCooperative", "TmaWarpSpecializedCooperative"),
    ("pingpong", "KernelTmaWarpSpecializedPingpong", "epilogue::TmaWarpSpecialized,"),
])
def test_schedules(schedule, kernel, epi):
    cfg = TileConfig((128, 128, 64), (1, 2, 1), schedule, "persistent")
    src = render(GemmSpec("bf16", config=cfg))
    assert kernel in src and epi in src
    assert "Shape<_128, _128, _64>" in src and "Shape<_1, _2, _1>" in src


def test_kn_weight_is_row_major_b():
    src = render(GemmSpec("bf16", b_layout="kn"))
    assert "using LayoutB = cutlass::layout::RowMajor" in src


def test_split_k_parallel_kernels_store_fp32_partials_and_reduce_with_the_epilogue():
    """The batched GEMM's epilogue is alpha * acc into fp32 (no C, no vectors); the reduction's Output
    carries the spec's epilogue, and the library's launcher is the split-K one."""
    config = TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True)
    spec = GemmSpec("fp16", epilogue="row_scale+col_scale+bias+silu+residual", config=config)
    src = render(spec)
    assert "using ElementD = float;" in src and "using ElementC = void;" in src
    assert "Sm90ColBroadcast" not in src and "Sm90RowBroadcast" not in src and "Sm90SrcFetch" not in src
    assert "fused_gemm::split_k_parallel::arguments<FgKernel>" in src
    assert "cutlass::half_t, cutlass::half_t, cutlass::half_t, cutlass::epilogue::thread::SiLu<float>" in src
    assert "using Launcher = fused_gemm::split_k_parallel::Launcher<FgKernel>;" in src
    assert '#include "fused_gemm/splitk/sm90_split_k_parallel.hpp"' in src
    assert "sm90_exports.inl" not in src
    assert spec.csrc_includes == ("splitk",) and "_splitkpar_swapab_" in spec.uri
