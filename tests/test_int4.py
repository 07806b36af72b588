"""W4A16: the int4 family's specs, the weight layout, quantize_int4, the GPTQ/AWQ importers and
int4_linear.

The CPU tests (spec, URI, render, tables, presets, packing, quantiser and importers against plain-torch
dequantisations written from the format definitions, errors before any kernel) run everywhere; the
ones marked gpu check against float64 on an sm_90 GPU (skipped without one) and need the
'int4-gpu-tests' preset (`fused-gemm build --preset int4-gpu-tests`)."""
import pytest
import torch

import fused_gemm
import fused_gemm.int4.api  # noqa: F401  (registers the torch ops)
from fused_gemm import jit
from fused_gemm.generator import (Epilogue, Int4Spec, LaunchOptions, SpecError, TileConfig, preset, render,
                                  spec_from_uri)
from fused_gemm.generator.int4.heuristics import (DECODE_BY_SHAPE, DECODE_SWEEP_CONFIGS, GATED, INT4_GATED_RULES,
                                                  RULES, SWEEP_CONFIGS, config_for, rules, shape_class,
                                                  shape_classes, spec_for, sweep_configs, tile_k_for)
from fused_gemm.generator.int4.presets import GATED_TEST_CASES, SMALL_BLOCK_DECODE_CONFIGS
from fused_gemm.generator.int4.spec import DecodeConfig
from fused_gemm.int4.weight import (AWQ_ORDER, REORDER_ATOM, Int4Weight, int4_from_awq, int4_from_gptq,
                                    pack_codes, quantize_int4, unpack_codes)

from conftest import (DTYPES, REFERENCE_ACTIVATIONS, WEIGHT_ONLY_TOL, assert_close, check_compiled_and_out_op,
                      check_cuda_graph_replay, check_in_place_residual_batched, weight_only_reference)

FULL = "bias+gelu_tanh+residual"


# -- specs, URIs, rendering, tables (CPU) -----------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(dtype="fp16", weight="u4", epilogue=FULL, config=RULES["sm90a"][1].config),
    dict(weight="u4", epilogue="bias+silu", bias_dtype="fp32", pdl=False),
    dict(epilogue="residual", residual_dtype="fp32", out_dtype="fp32", config=SWEEP_CONFIGS[2]),
    dict(config=TileConfig((64, 16, 64), (1, 1, 1), "warpspecialized", swap_ab=True)),
    dict(weight="u4", epilogue=FULL, config=DecodeConfig(tokens=8, warps=2, blocks=4)),
    dict(dtype="fp16", config=DecodeConfig(), pdl=False),
    dict(weight="u4", epilogue="silu+residual", gated=True),
    dict(epilogue="gelu", config=DecodeConfig(8), gated=True),
    dict(epilogue="bias+silu", config=DecodeConfig(8), gated=True),
])
def test_uri_round_trips(kwargs):
    spec = Int4Spec(**kwargs)
    assert spec.uri.startswith("int4_sm90a_") and Int4Spec.from_uri(spec.uri) == spec
    assert spec_from_uri(spec.uri) == spec
    assert f"_w-{spec.weight}_" in spec.uri


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(config=TileConfig((64, 16, 128), (1, 1, 1), "pingpong")), "swap_ab"),
    (dict(config=TileConfig((64, 16, 256), (1, 1, 1), "pingpong", swap_ab=True)), "tile K"),
    (dict(config=TileConfig((128, 16, 128), (1, 2, 1), "cooperative", swap_ab=True)), "cluster"),
    (dict(config=TileConfig((128, 16, 128), (1, 1, 1), "auto", swap_ab=True)), "schedule"),
    (dict(epilogue="row_scale+bias"), "bias, an activation and a residual"),
    (dict(weight="e5m2"), "weight dtype"),
    (dict(dtype="fp32"), "activation dtype"),
    (dict(out_dtype="e4m3"), "out_dtype"),
    (dict(weight="s4", config=DecodeConfig(16, 4, 1, unroll=3)), "the int4 one has none"),
    (dict(weight="e4m3", gated=True), "gated int4-family kernel reads int4 weights"),
])
def test_bad_specs_raise(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment):
        Int4Spec(**kwargs)


def test_render_picks_the_mixed_input_pieces():
    src = render(Int4Spec("bf16", "u4", epilogue=FULL))
    assert "using ElementA = cute::tuple<ElementQuant, ElementScale, ElementScale>;" in src
    assert "using ElementQuant = cutlass::uint4b_t;" in src and "fused_gemm::Int4WeightLayout<ElementMma>" in src
    assert "using LayoutCD = cutlass::layout::ColumnMajor;" in src and "KernelTmaWarpSpecializedPingpong>" in src
    assert "Sm90ColBroadcast<0, TileShape, cutlass::bfloat16_t" in src     # bias: one value per kernel row (n)
    assert "static constexpr bool kZeros = true;" in src and "#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in src
    assert "typedef struct FgInt4Problem" in src
    sym = render(Int4Spec("fp16", config=RULES["sm90a"][1].config))
    assert "using ElementA = cute::tuple<ElementQuant, ElementScale>;" in sym and "cutlass::int4b_t" in sym
    assert "cutlass::half_t" in sym and "KernelTmaWarpSpecializedCooperative>" in sym and "kZeros = false" in sym


def test_render_picks_the_decode_kernel():
    src = render(Int4Spec("bf16", "u4", epilogue=FULL, config=DecodeConfig(tokens=8)))
    assert '#include "fused_gemm/int4_decode/sm90_int4_decode.hpp"' in src and "Int4DecodeLauncher<FgKernel>" in src
    assert "static constexpr int kTokens = 8;" in src and "kZeros = true" in src and "kResidual = true" in src
    assert "using Activation = cutlass::epilogue::thread::GELU_taylor<float>;" in src
    assert "#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in src and "CollectiveBuilder" not in src
    plain = render(Int4Spec("fp16", config=DecodeConfig(), pdl=False))
    assert "cutlass::epilogue::thread::Identity<float>" in plain and "kBias = false" in plain
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in plain and "using Element = cutlass::half_t;" in plain
    with pytest.raises(SpecError, match="8 or 16"):
        DecodeConfig(tokens=32)


def test_render_picks_the_gated_pieces():
    src = render(Int4Spec("bf16", "u4", epilogue="silu+residual", config=RULES["sm90a"][1].config, gated=True))
    assert '#include "fused_gemm/int4_gated/sm90_int4_gated.hpp"' in src and "int4_gated_arguments<FgKernel>" in src
    assert "fused_gemm::GatedPairOp<fused_gemm::FastSiLu<float>" in src
    assert "using ElementA = cute::tuple<ElementQuant, ElementScale, ElementScale>;" in src
    assert "Sm90PairCollectiveEpilogue<PairOp, true," in src and "static constexpr bool kZeros = true;" in src
    decode = render(Int4Spec("bf16", "s4", epilogue="silu", config=DecodeConfig(8), gated=True))
    assert "static constexpr bool kGated = true;" in decode
    assert Int4Spec("bf16", gated=True, config=RULES["sm90a"][1].config).csrc_includes == ("pair", "evt", "gated", "int4_gated")


def test_cli_builds_gated_and_decode_specs(tmp_path):
    from fused_gemm.generator.cli import main
    assert main(["codegen", "--family", "int4", "--weight", "u4", "--gated", "--decode-tokens", "8", "--epilogue",
                 "silu+residual", "-o", str(tmp_path)]) == 0
    assert main(["codegen", "--family", "int4", "--gated", "--tile", "64x64x128", "--cluster", "1x1x1",
                 "--schedule", "pingpong", "--epilogue", "gelu", "-o", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.glob("int4_*.cu"))
    assert names == ["int4_sm90a_a-bf16_w-s4_d-bf16_t64x64x128_c1x1x1_pp_persist_swapab_gated_ep-gelu.cu",
                     "int4_sm90a_a-bf16_w-u4_d-bf16_c-bf16_decode_t8_w4_b8_gated_ep-silu-residual.cu"], names


def test_cache_key_covers_the_gemm_headers():
    from fused_gemm.generator.registry import FAMILIES
    assert FAMILIES["int4"].csrc_folders == ("fused_gemm/common", "fused_gemm/int4", "fused_gemm/gemm")


def test_pack_order_matches_the_abi():
    from fused_gemm.generator.int4 import PROBLEM
    from fused_gemm.int4.op import PACK_ORDER
    assert PACK_ORDER == PROBLEM.names


def test_table_rows_are_valid_and_tile_k_follows_the_group():
    for rule in RULES["sm90a"]:
        Int4Spec("bf16", "u4", epilogue=FULL, config=rule.config)
    assert RULES["sm90a"][0].launch.pdl and RULES["sm90a"][0].max_m == 64
    rule = RULES["sm90a"][0]                                   # tile K 128
    assert [config_for(rule, g, 4096).tile[2] for g in (64, 128, 192, 256, 4096)] == [64, 128, 64, 128, 128]
    assert config_for(rule, 4064, 4064).tile[2] == 128         # per channel: any K
    assert tile_k_for(128, 4096, 64) == 64
    for bad in (32, 48):   # CUTLASS's mixed-input mainloop needs k-tiles of 64 or more
        with pytest.raises(ValueError, match="multiple of 64"):
            tile_k_for(bad, 4096, 128)
    assert spec_for("bf16", "s4", "none", 64, 4096, 64).supports_group(64, 4096)
    assert spec_for("bf16", "s4", "none", 128, 4096, 4096).config == RULES["sm90a"][1].config


def test_int4_decodes_on_the_decode_kernel():
    """int4 weights at M <= 16 take the decode kernel (PDL by default): 8 tokens to M = 8, then 16;
    e4m3 weights take the dense decode kernel there; the tables agree above M = 16."""
    assert [spec_for("bf16", w, "none", 128, 4096, m).decode for w in ("s4", "u4") for m in (1, 8, 9, 16, 17)] == \
        [True, True, True, True, False] * 2
    # int4_linear's decode rows depend on the weight's shape (N, K); M > 16 does not
    assert [spec_for("bf16", "s4", "none", 128, 4096, m, n=4096).config for m in (1, 8, 9, 16)] == \
        [DecodeConfig(8, 16, 2)] * 2 + [DecodeConfig(16, 12, 4)] * 2
    assert spec_for("bf16", "s4", "none", 128, 8192, 1, n=4096).config == DecodeConfig(8, 16, 4)
    assert spec_for("bf16", "s4", "none", 128, 4096, 1).config == DecodeConfig(8, 16, 2)     # N unknown: the first
    shapes = [(16, 4096), (4096, 6144), (4096, 6272), (4112, 4096), (8192, 14336), (8208, 4096), (16383, 4096),
              (16384, 4096), (28672, 4096)]
    assert [shape_class("s4", n, k) for n, k in shapes] == [0, 0, 1, 1, 1, 2, 2, 3, 3]
    assert spec_for("bf16", "u4", "none", 128, 4096, 1, n=14336).config == DecodeConfig(8, 8, 4)
    wide = [spec_for("bf16", "u4", "none", 128, 4096, m, n=28672).config for m in (1, 8, 9, 16, 17)]
    assert wide[:4] == [DecodeConfig(8, 4, 4)] * 2 + [DecodeConfig(16, 4, 8)] * 2
    assert wide[4] == spec_for("bf16", "u4", "none", 128, 4096, 17, n=4096).config
    # int4_gated_linear keeps its 8-block rows (a gate with its up) at every N
    assert shape_class("s4", 4096, 4096, gated=True) == GATED
    assert spec_for("bf16", "s4", "silu", 128, 4096, 1, gated=True, n=57344).config == DecodeConfig(8)
    assert spec_for("bf16", "s4", "silu", 128, 4096, 16, gated=True, n=4096).config == DecodeConfig(16, 2, 8)
    assert all(spec_for("bf16", "e4m3", "none", 4096, 4096, m, n=4096).decode for m in (1, 16))   # test_fp8_weight.py
    assert not spec_for("bf16", "e4m3", "none", 4096, 4096, 17).decode
    assert shape_classes("u4") == tuple(range(len(DECODE_BY_SHAPE["sm90a"])))
    for c in shape_classes("s4"):   # every int4 table has the same M buckets, and agrees above 16
        assert [r.max_m for r in rules("sm90a", "s4", c)] == [r.max_m for r in INT4_GATED_RULES["sm90a"]]
        assert rules("sm90a", "s4", c)[2:] == INT4_GATED_RULES["sm90a"][2:] == RULES["sm90a"]
    assert spec_for("bf16", "int4", "none", 128, 4096, 1).decode       # the weight kind is canonicalised
    spec = spec_for("bf16", "u4", FULL, 64, 4096, 16)
    assert spec.supports_group(64, 4096) and spec.supports_group(4096, 4096) and not spec.supports_group(48, 4096)


M_VALUES = [1, 7, 13, 40, 129, 4095]
GATED_M = [1, 7, 13, 40, 129]
N_TEST, K_TEST = 272, 512          # N: no multiple of 64 (partial weight tiles); K: 4 groups of 128
# One N for each of int4_linear's decode shape classes at K = 256: N_TEST, then 32 rows past each class's largest
# N (no multiple of 64: the last row group overlaps the one before).
ROWS_BY_CLASS = (N_TEST,) + tuple((c.max_n // 16 + 2) * 16 for c in DECODE_BY_SHAPE["sm90a"][:-1])
GROUP_M = [7, 129]
# test_decode_kernel_splits_k's (N, K, group): a cluster of 8 (the second shape class: K > 6144), K slices that end
# inside a group, per channel, K not a multiple of 64
SPLIT_K_CASES = [(400, 16384, 128), (4096, 4160, 64), (528, 2048, 2048), (1040, 2080, 2080)]
GROUPS = [64, 128, K_TEST]


@pytest.mark.parametrize("warps", [3, 6, 32])
def test_decode_warps_outside_the_choices_are_refused(warps):
    """DecodeConfig names the warp counts it takes (12 and 16 serve the int4 kernel's 4-block CTAs)."""
    with pytest.raises(SpecError, match=r"decode warps .* must be one of \(1, 2, 4, 8, 12, 16\)"):
        DecodeConfig(8, warps, 4)
    for ok in (12, 16):
        spec = Int4Spec("bf16", "s4", config=DecodeConfig(8, ok, 2))
        assert spec_from_uri(spec.uri) == spec


def test_gated_table_and_preset():
    """int4_gated_linear takes its own rows (the 8-block decode kernels to M = 16, then int4_linear's);
    the preset holds what the gated GPU tests run."""
    assert [spec_for("bf16", "s4", "silu", 128, 4096, m, gated=True).config for m in (1, 8, 9, 16, 129)] == \
        [DecodeConfig(8)] * 2 + [DecodeConfig(16, 2, 8)] * 2 + [spec_for("bf16", "s4", "silu", 128, 4096, 129).config]
    assert spec_for("bf16", "s4", "silu", 128, 4096, 16, gated=True).decode
    have = set(preset("int4-gated-tests"))
    need = {spec_for(d, w, ep, 128, K_TEST, m, gated=True) for d, w, ep in GATED_TEST_CASES for m in GATED_M}
    assert need <= have, sorted(s.uri for s in need - have)


def test_gpu_tests_preset_lists_every_kernel_they_run():
    have = set(preset("int4-gpu-tests"))
    need = {spec_for(d, w, FULL, 128, K_TEST, m) for d in ("bf16", "fp16") for w in ("s4", "u4") for m in M_VALUES}
    need |= {spec_for("bf16", w, "none", g, K_TEST, m) for w in ("s4", "u4") for g in GROUPS for m in GROUP_M + [1, 16]}
    need |= {spec_for("bf16", w, "bias+silu+residual", g, 4096, 1) for w in ("s4", "u4") for g in (64, 128, 4096)}
    need |= {spec_for("bf16", w, "bias+silu+residual", 128, 256, m, n=n) for w in ("s4", "u4") for m in (1, 13)
             for n in ROWS_BY_CLASS}
    need |= {spec_for("bf16", w, "bias+silu+residual", g, k, m, n=n) for w in ("s4", "u4") for m in (1, 5, 16)
             for n, k, g in SPLIT_K_CASES}
    need |= {Int4Spec(d, "s4", config=c) for c in DECODE_SWEEP_CONFIGS for d in ("bf16", "fp16")}
    assert need <= have, sorted(s.uri for s in need - have)
    assert set(preset("int4-bench")) <= have
    assert {s.config for s in preset("int4-sweep")} == set(sweep_configs("s4")) > set(SWEEP_CONFIGS)
    assert [s.decode for s in preset("int4-compile-ci")] == [False, True, True]


# -- the weight layout, quantiser and importers (CPU) -------------------------------------------------
# What CUTLASS's compute_memory_reordering_atom<bfloat16_t, Layout<_1>, Layout<Shape<_2,_4>,Stride<_4,_1>>>
# prints (a host program over csrc/fused_gemm/int4/sm90_int4.hpp's int4_reordering_atom), row n, column k.
CUTLASS_ATOM_ROWS = [
    [0, 4, 8, 12, 16, 20, 24, 28, 2, 6, 10, 14, 18, 22, 26, 30],
    [1, 5, 9, 13, 17, 21, 25, 29, 3, 7, 11, 15, 19, 23, 27, 31],
]


def test_reorder_atom_is_cutlass_s():
    atom = REORDER_ATOM.view(16, 16)
    for n in range(16):
        base = CUTLASS_ATOM_ROWS[n // 8]
        assert atom[n].tolist() == [v + 32 * (n % 8) for v in base]
    assert sorted(REORDER_ATOM.tolist()) == list(range(256))
    # tile_to_shape(atom, (48, 64, 1)): N-blocks of 256 nibbles first, then K-blocks (printed offsets)
    codes = torch.zeros(48, 64, dtype=torch.int8)
    for (n, k), offset in {(17, 0): 288, (0, 17): 772, (32, 16): 1280}.items():
        codes.zero_()
        codes[n, k] = 5
        packed = pack_codes(codes).view(-1)
        assert packed.nonzero().view(-1).tolist() == [offset // 2] and packed[offset // 2] == 5 << (4 * (offset % 2))


@pytest.mark.parametrize("signed", [True, False])
def test_pack_unpack_round_trip(signed):
    lo, hi = (-8, 8) if signed else (0, 16)
    codes = torch.randint(lo, hi, (96, 320), dtype=torch.int8)
    packed = pack_codes(codes)
    assert packed.dtype == torch.uint8 and packed.shape == (96, 160)
    assert torch.equal(unpack_codes(packed, signed), codes)


@pytest.mark.parametrize("group_size", [64, 128, None])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_quantize_int4_round_trip(dtype, symmetric, group_size):
    n, k = 48, 256
    w = (torch.randn(n, k) * torch.logspace(-2, 1, n)[:, None]).to(dtype)
    w[3] = 0
    q = quantize_int4(w, group_size, symmetric)
    g = group_size or k
    assert (q.N, q.K, q.group_size, q.symmetric) == (n, k, g, symmetric) and q.dtype == dtype
    assert q.scales.shape == (k // g, n) and q.scales.is_contiguous() and (q.zeros is None) == symmetric
    codes = q.codes()
    assert int(codes.min()) >= (-8 if symmetric else 0) and int(codes.max()) <= (7 if symmetric else 15)
    deq = q.dequantize(torch.float64)
    step = q.scales.double().t().repeat_interleave(g, dim=1)     # [N, K]
    err = (deq - w.double()).abs()
    # Half a step, plus what rounding the scale (and the offset) to the activation dtype moves the grid by.
    slack = 0.5 + (8 if symmetric else 32) * (2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11)
    assert (err <= step * slack + 1e-6 * w.double().abs() + 1e-30).all(), float((err / step).max())
    assert not deq[3].any()
    # dequantize() is scale * code (+ offset), exactly
    ref = codes.double() * step + (0 if symmetric else q.zeros.double().t().repeat_interleave(g, dim=1))
    assert torch.equal(deq, ref)


@pytest.mark.parametrize("call, error, fragment", [
    (lambda: quantize_int4(torch.randn(48, 256), 128), TypeError, "dtype=torch.bfloat16"),
    (lambda: quantize_int4(torch.randn(48, 256, dtype=torch.bfloat16), 192), ValueError, "K = 256 is not a multiple"),
    (lambda: quantize_int4(torch.randn(48, 256, dtype=torch.bfloat16), 32), ValueError, "group_size 32 is not supported"),
    (lambda: quantize_int4(torch.randn(48, 256, dtype=torch.bfloat16), 48), ValueError, "group_size 48"),
    (lambda: quantize_int4(torch.randn(40, 256, dtype=torch.bfloat16), 128), ValueError, "N = 40"),
    (lambda: quantize_int4(torch.randn(48, 80, dtype=torch.bfloat16), None), ValueError, "K = 80"),
    (lambda: quantize_int4(torch.randn(48, 256, dtype=torch.bfloat16)[0], 128), ValueError, "2-D"),
    (lambda: quantize_int4(torch.zeros(48, 256, dtype=torch.int8), 128), TypeError, "float weight"),
    (lambda: quantize_int4(torch.randn(48, 256, dtype=torch.bfloat16), 128.0), TypeError, "group_size must be an int"),
])
def test_quantize_int4_refuses_bad_input(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call()


def test_int4_weight_checks_its_fields():
    q = quantize_int4(torch.randn(32, 128, dtype=torch.bfloat16), 64)
    with pytest.raises(ValueError, match="scales must be"):
        Int4Weight(q.packed, q.scales[:1], None, 64, 32, 128)
    with pytest.raises(ValueError, match="packed must be"):
        Int4Weight(q.packed[:, :32], q.scales, None, 64, 32, 128)
    with pytest.raises(ValueError, match="symmetric weight has no zeros"):
        Int4Weight(q.packed, q.scales, q.scales, 64, 32, 128, symmetric=True)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        Int4Weight(q.packed, q.scales.float(), None, 64, 32, 128)


# Plain-torch packers and dequantisers written from the format definitions (one Python int per word).
def _pack_words(values, along_rows: bool, order=tuple(range(8))):
    """int codes [R, C] -> int32 words packing 8 consecutive rows (along_rows) or columns; nibble i of
    a word holds element 8 * w + order[i]."""
    v = values if along_rows else values.t()
    r, c = v.shape
    out = torch.zeros(r // 8, c, dtype=torch.int64)
    for i in range(8):
        out |= (v[order[i]::8].to(torch.int64) & 0xF) << (4 * i)
    out = torch.where(out >= 2 ** 31, out - 2 ** 32, out).to(torch.int32)
    return out if along_rows else out.t().contiguous()


def _word_nibble(word: int, i: int) -> int:
    return (word >> (4 * i)) & 0xF


def gptq_reference(qweight, scales, qzeros, offset=1):
    """dequant W [N, K] in float64: w[k, n] = scale[g, n] * (q[k, n] - (z[g, n] + offset)), q[k, n] =
    nibble k % 8 of qweight[k // 8, n], z[g, n] = nibble n % 8 of qzeros[g, n // 8]."""
    k, n = qweight.shape[0] * 8, qweight.shape[1]
    g = k // scales.shape[0]
    qw, qz, s = qweight.tolist(), qzeros.tolist(), scales.double().tolist()
    w = torch.empty(k, n, dtype=torch.float64)
    for kk in range(k):
        for nn in range(n):
            q = _word_nibble(qw[kk // 8][nn] & 0xFFFFFFFF, kk % 8)
            z = _word_nibble(qz[kk // g][nn // 8] & 0xFFFFFFFF, nn % 8) + offset
            w[kk, nn] = s[kk // g][nn] * (q - z)
    return w.t()


def awq_reference(qweight, scales, qzeros):
    """AWQ: column n of word c = n // 8 sits in the nibble i with AWQ_ORDER[i] = n % 8."""
    k, n = qweight.shape[0], qweight.shape[1] * 8
    g = k // scales.shape[0]
    qw, qz, s = qweight.tolist(), qzeros.tolist(), scales.double().tolist()
    w = torch.empty(k, n, dtype=torch.float64)
    for kk in range(k):
        for nn in range(n):
            i = AWQ_ORDER.index(nn % 8)
            q = _word_nibble(qw[kk][nn // 8] & 0xFFFFFFFF, i)
            z = _word_nibble(qz[kk // g][nn // 8] & 0xFFFFFFFF, i)
            w[kk, nn] = s[kk // g][nn] * (q - z)
    return w.t()


def _checkpoint(k=256, n=48, g=64, symmetric=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (k, n), generator=gen)
    # zero points 1..15: the classic GPTQ format stores zero - 1 in a nibble (a zero point 0 reads back as 16)
    zp = torch.full((k // g, n), 8) if symmetric else torch.randint(1, 16, (k // g, n), generator=gen)
    scales = (torch.rand(k // g, n, generator=gen) * 0.02 + 0.001).half()
    return codes, zp, scales


def _assert_matches(w: Int4Weight, ref, scales):
    """Scales converted to another dtype move each value by up to 15 half-ulps of the scale, offsets
    (-scale * zero rounded to the scales' dtype) by half an ulp of |scale * zero| <= 16 scale."""
    deq = w.dequantize(torch.float64)
    g = w.group_size
    bound = (scales.double().t().repeat_interleave(g, dim=1) * 32) * 2.0 ** -(8 if w.dtype == torch.bfloat16 else 11)
    assert ((deq - ref).abs() <= bound).all(), float((deq - ref).abs().max())


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_gptq_importer_matches_the_format(dtype):
    codes, zp, scales = _checkpoint()
    qweight = _pack_words(codes, along_rows=True)                       # [K/8, N]
    qzeros = _pack_words(zp - 1, along_rows=False)                      # classic format: stored = zero - 1
    w = int4_from_gptq(qweight, scales, qzeros, torch.arange(256) // 64, dtype=dtype)
    assert not w.symmetric and w.group_size == 64 and (w.N, w.K) == (48, 256)
    assert w.dtype == (dtype or torch.float16)
    assert torch.equal(w.codes().t().to(torch.int64), codes)
    _assert_matches(w, gptq_reference(qweight, scales, qzeros), scales)
    v2 = int4_from_gptq(qweight, scales, _pack_words(zp, along_rows=False), zero_offset=0)
    assert torch.equal(v2.dequantize(), int4_from_gptq(qweight, scales, qzeros).dequantize())


def test_gptq_symmetric_checkpoints_become_s4():
    codes, zp, scales = _checkpoint(symmetric=True)
    qweight, qzeros = _pack_words(codes, True), _pack_words(zp - 1, False)
    w = int4_from_gptq(qweight, scales, qzeros)
    assert w.symmetric and w.zeros is None
    assert torch.equal(w.dequantize(torch.float64), gptq_reference(qweight, scales, qzeros))   # exact


def test_gptq_act_order_and_bad_tensors_are_refused():
    codes, zp, scales = _checkpoint()
    qweight, qzeros = _pack_words(codes, True), _pack_words(zp - 1, False)
    with pytest.raises(ValueError, match="act-order"):
        int4_from_gptq(qweight, scales, qzeros, torch.randperm(256) // 64)
    with pytest.raises(TypeError, match="int32"):
        int4_from_gptq(qweight.long(), scales, qzeros)
    with pytest.raises(ValueError, match=r"qzeros has shape"):
        int4_from_gptq(qweight, scales, qzeros[:, :3])
    with pytest.raises(ValueError, match="scales has shape"):
        int4_from_gptq(qweight, scales[:, :40], qzeros)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        int4_from_gptq(qweight, scales.float(), qzeros)


def test_awq_importer_matches_the_format():
    codes, zp, scales = _checkpoint(seed=1)
    qweight = _pack_words(codes, along_rows=False, order=AWQ_ORDER)      # [K, N/8]
    qzeros = _pack_words(zp, along_rows=False, order=AWQ_ORDER)          # [K/g, N/8]
    w = int4_from_awq(qweight, scales, qzeros)
    assert not w.symmetric and w.group_size == 64 and qweight.shape == (256, 6)
    assert torch.equal(w.codes().t().to(torch.int64), codes)
    _assert_matches(w, awq_reference(qweight, scales, qzeros), scales)
    with pytest.raises(ValueError, match="qweight"):
        int4_from_awq(qweight[0], scales, qzeros)


# -- the ops without a GPU ----------------------------------------------------------------------
def test_fake_kernel_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 3, 256, dtype=torch.float16)
        y = torch.ops.fused_gemm.int4_linear(x, torch.empty(64, 128, dtype=torch.uint8),
                                             torch.empty(2, 64, dtype=torch.float16), None, 128, None, "silu", None)
        assert y.shape == (2, 3, 64) and y.dtype == torch.float16
        g = torch.ops.fused_gemm.int4_gated_linear(x, torch.empty(64, 128, dtype=torch.uint8),
                                                   torch.empty(2, 64, dtype=torch.float16), None, 128, None, "silu",
                                                   None)
        assert g.shape == (2, 3, 32) and g.dtype == torch.float16 and g.is_contiguous()


def test_bad_inputs_are_refused_before_any_build(tmp_cache, monkeypatch):
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")     # nothing may be built or loaded on the way to the error
    w = quantize_int4(torch.randn(32, 256, dtype=torch.bfloat16), 128)
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.int4_linear(x, w)
    with pytest.raises(TypeError, match="w must be a fused_gemm.Int4Weight"):
        fused_gemm.int4_linear(x, w.packed)
    with pytest.raises(ValueError, match="x has K = 128"):
        fused_gemm.int4_linear(x[:, :128], w)
    with pytest.raises(TypeError, match="w.scales has dtype torch.bfloat16, but x is torch.float16"):
        fused_gemm.int4_linear(x.half(), w)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fused_gemm.int4_linear([1.0], w)
    with pytest.raises(ValueError, match="group_size 48"):
        torch.ops.fused_gemm.int4_linear(x, w.packed, w.scales, None, 48, None, None, None)


def test_int4_gated_bad_inputs_are_refused_before_any_build(tmp_cache, monkeypatch):
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")
    w = quantize_int4(fused_gemm.pack_gate_up(torch.randn(16, 256, dtype=torch.bfloat16),
                                              torch.randn(16, 256, dtype=torch.bfloat16)), 128)
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="w must be a fused_gemm.Int4Weight"):
        fused_gemm.int4_gated_linear(x, w.packed)
    with pytest.raises(ValueError, match="x has K = 128"):
        fused_gemm.int4_gated_linear(x[:, :128], w)
    with pytest.raises(TypeError, match="w.scales has dtype torch.bfloat16, but x is torch.float16"):
        fused_gemm.int4_gated_linear(x.half(), w)
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.int4_gated_linear(x, w)


# -- on the GPU ---------------------------------------------------------------------------------
def make_weight(n, k, group, symmetric, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen) / k ** 0.5
    return quantize_int4(w.to(dtype), group, symmetric).to("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("symmetric", [True, False], ids=["s4", "u4"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_int4_linear_matches_float64(dtype, symmetric, m):
    dt = DTYPES[dtype]
    w = make_weight(N_TEST, K_TEST, 128, symmetric, dt, seed=m)
    x = torch.randn(m, K_TEST, dtype=dt, device="cuda")
    bias = torch.randn(N_TEST, dtype=dt, device="cuda")
    residual = torch.randn(m, N_TEST, dtype=dt, device="cuda")
    out = torch.full((m, N_TEST), float("nan"), dtype=dt, device="cuda")
    got = fused_gemm.int4_linear(x, w, bias, "gelu_tanh", residual, out=out)
    assert got is out
    ref = weight_only_reference(x, w, bias, "gelu_tanh", residual)
    assert_close(got, ref, WEIGHT_ONLY_TOL[dt])
    fresh = fused_gemm.int4_linear(x, w, bias, "gelu_tanh", residual)
    assert fresh.dtype == dt and fresh.shape == (m, N_TEST)
    assert_close(fresh, ref, WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
@pytest.mark.parametrize("m", GROUP_M)
@pytest.mark.parametrize("group", GROUPS, ids=["g64", "g128", "per-channel"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["s4", "u4"])
def test_group_sizes(symmetric, group, m):
    w = make_weight(N_TEST, K_TEST, group, symmetric, torch.bfloat16, seed=group)
    x = torch.randn(m, K_TEST, dtype=torch.bfloat16, device="cuda")
    out = torch.full((m, N_TEST), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.int4_linear(x, w, out=out), weight_only_reference(x, w), WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("n, k, group", SPLIT_K_CASES,
                         ids=["cluster-of-8", "uneven-k-slices", "per-channel", "k-not-a-multiple-of-64"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["s4", "u4"])
def test_decode_kernel_splits_k(symmetric, n, k, group, m):
    """The decode kernels int4_linear picks (8 tokens, then 16): K split across warps and a cluster
    of CTAs (summed through distributed shared memory), slices that end inside a group, a last row
    group that overlaps the one before (N not a multiple of the CTA's rows), a K of 64 n + 32 (whole
    32-long steps, not whole groups of 64).  The 1- and 2-block configs (other register stages) run
    directly."""
    w = make_weight(n, k, group, symmetric, torch.bfloat16, seed=n + m)
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    residual = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert spec_for("bf16", "s4", "none", group, k, m).decode
    got = fused_gemm.int4_linear(x, w, bias, "silu", residual, out=out)
    ref = weight_only_reference(x, w, bias, "silu", residual)
    assert_close(got, ref, WEIGHT_ONLY_TOL[torch.bfloat16])
    for config in SMALL_BLOCK_DECODE_CONFIGS:
        if m <= config.tokens:
            op = jit.compile(Int4Spec("bf16", "s4" if symmetric else "u4", epilogue="bias+silu+residual", config=config))
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            assert_close(op(x, w.packed, w.scales, w.zeros, group, bias, residual, out=out), ref,
                         WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 7, 13])
@pytest.mark.parametrize("symmetric", [True, False], ids=["s4", "u4"])
def test_decode_weight_narrower_than_a_cta(symmetric, m):
    """Weights with fewer 16-row blocks than the decode kernel's CTA holds (4 or 8): its one-block kernel
    runs them, for int4_linear (N = 48) and for an s4 gated weight (2I = 80, unsplit: a gate and
    its up are in one CTA), with K split across a cluster."""
    k = 4096
    w = make_weight(48, k, 128, symmetric, torch.bfloat16, seed=m)
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    out = torch.full((m, 48), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.int4_linear(x, w, out=out), weight_only_reference(x, w), WEIGHT_ONLY_TOL[torch.bfloat16])
    if not symmetric:
        return   # the gated kernels the tests build: s4 with silu
    gen = torch.Generator().manual_seed(m)
    w_gate, w_up = (torch.randn(40, k, generator=gen) / k ** 0.5 for _ in range(2))
    wg = quantize_int4(fused_gemm.pack_gate_up(w_gate.bfloat16(), w_up.bfloat16()), 128, symmetric).to("cuda")
    gate, up = fused_gemm.unpack_gate_up(wg.dequantize(torch.float64))
    out = torch.full((m, 40), float("nan"), dtype=torch.bfloat16, device="cuda")
    ref = REFERENCE_ACTIVATIONS["silu"](x.double() @ gate.T) * (x.double() @ up.T)
    assert_close(fused_gemm.int4_gated_linear(x, wg, out=out), ref, WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("n", ROWS_BY_CLASS)
@pytest.mark.parametrize("m", [1, 13])
@pytest.mark.parametrize("symmetric", [True, False], ids=["s4", "u4"])
def test_decode_rows_by_n(symmetric, m, n):
    """int4_linear on a weight of each decode shape class (heuristics.DECODE_BY_SHAPE), with a last row group
    that overlaps the one before (N is no multiple of the CTAs' rows); at K = 256 the 12- and 16-warp
    CTAs of the first classes have warps with no K."""
    assert [shape_class("s4", rows, 256) for rows in ROWS_BY_CLASS] == list(shape_classes("s4"))
    k = 256
    spec = spec_for("bf16", "s4" if symmetric else "u4", "bias+silu+residual", 128, k, m, n=n)
    w = make_weight(n, k, 128, symmetric, torch.bfloat16, seed=m)
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    residual = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert fused_gemm.int4.api.select(x, w.zeros, 128, bias, "silu", residual, m, k, n).spec == spec
    got = fused_gemm.int4_linear(x, w, bias, "silu", residual, out=out)
    assert_close(got, weight_only_reference(x, w, bias, "silu", residual), WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("config", DECODE_SWEEP_CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_decode_sweep_shapes(dtype, config):
    """Every decode shape the sweep may time (and a table may adopt), at its largest M, on an
    activation that cancels badly (silu(x) >= 0, per-channel scales, K = 14336: the MMA's magic
    offset times sum(x) is large next to the sum it leaves)."""
    dt, k, n = DTYPES[dtype], 14336, 272
    w = make_weight(n, k, k, True, dt, seed=config.tokens)
    x = torch.nn.functional.silu(torch.randn(config.tokens, k, dtype=dt, device="cuda")) * 4
    out = torch.full((config.tokens, n), float("nan"), dtype=dt, device="cuda")
    got = jit.compile(Int4Spec(dtype, "s4", config=config))(x, w.packed, w.scales, None, k, out=out)
    assert_close(got, weight_only_reference(x, w), WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
@pytest.mark.parametrize("m", GATED_M)
@pytest.mark.parametrize("dtype, weight, epilogue", GATED_TEST_CASES, ids=["-".join(c) for c in GATED_TEST_CASES])
def test_int4_gated_linear_matches_float64(dtype, weight, epilogue, m):
    """SwiGLU/GeGLU on quantize_int4(pack_gate_up(w_gate, w_up)): act(x . W_gate^T + b_gate) *
    (x . W_up^T + b_up) (+ residual) against float64 of the dequantised gate and up weights."""
    dt, inter = DTYPES[dtype], N_TEST // 2 + 8     # I = 144: 2I = 288 rows, no multiple of 64
    gen = torch.Generator().manual_seed(m)
    w_gate, w_up = (torch.randn(inter, K_TEST, generator=gen) / K_TEST ** 0.5 for _ in range(2))
    w = quantize_int4(fused_gemm.pack_gate_up(w_gate.to(dt), w_up.to(dt)), 128, weight == "s4").to("cuda")
    gate, up = fused_gemm.unpack_gate_up(w.dequantize(torch.float64))
    ep = Epilogue.parse(epilogue)
    act = ep.activation
    x = torch.randn(m, K_TEST, dtype=dt, device="cuda")
    residual = torch.randn(m, inter, dtype=dt, device="cuda") if ep.residual else None
    bias = torch.randn(2 * inter, dtype=dt, device="cuda") if ep.bias else None   # cat(b_gate, b_up)
    out = torch.full((m, inter), float("nan"), dtype=dt, device="cuda")
    got = fused_gemm.int4_gated_linear(x, w, act, residual, bias=bias, out=out)
    b_gate, b_up = (bias.double()[:inter], bias.double()[inter:]) if bias is not None else (0.0, 0.0)
    ref = REFERENCE_ACTIVATIONS[act](x.double() @ gate.T + b_gate) * (x.double() @ up.T + b_up)
    if residual is not None:
        ref = ref + residual.double()
    assert got is out
    assert_close(got, ref, WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
def test_int4_gated_compiled_graph_and_out_op():
    """int4_gated_linear under torch.compile(fullgraph) and through its _out op; and a 3-D x."""
    w = quantize_int4(fused_gemm.pack_gate_up(*(torch.randn(144, K_TEST, dtype=torch.bfloat16) / K_TEST ** 0.5
                                                 for _ in range(2))), 128).to("cuda")
    check_compiled_and_out_op(
        lambda x: fused_gemm.int4_gated_linear(x, w),
        lambda x, out: torch.ops.fused_gemm.int4_gated_linear_out(x, w.packed, w.scales, None, 128, None, "silu", None,
                                                                           out),
        K_TEST, 144)
    x = torch.randn(2, 3, K_TEST, dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.int4_gated_linear(x, w).reshape(6, 144), fused_gemm.int4_gated_linear(x.reshape(6, -1), w)
                 .double(), 1e-6)


@pytest.mark.gpu
def test_decode_and_gated_kernels_refuse_tiling_launch_options():
    w = make_weight(N_TEST, K_TEST, 128, True, torch.bfloat16)
    x = torch.randn(1, K_TEST, dtype=torch.bfloat16, device="cuda")
    op = jit.compile(spec_for("bf16", "s4", "none", 128, K_TEST, 1))
    with pytest.raises(ValueError, match="takes launch.pdl and launch.splits"):
        op(x, w.packed, w.scales, None, 128, launch=LaunchOptions(swizzle=2))
    with pytest.raises(ValueError, match="launch.splits"):
        op(x, w.packed, w.scales, None, 128, launch=LaunchOptions(splits=9))
    for launch in (LaunchOptions(pdl=False), LaunchOptions(splits=2), LaunchOptions(splits=3, pdl=False)):
        assert_close(op(x, w.packed, w.scales, None, 128, launch=launch), weight_only_reference(x, w),
                     WEIGHT_ONLY_TOL[torch.bfloat16])
    # A gated decode kernel's cluster ranks each take whole 16-row blocks (a gate with its up): a power of two.
    gated = jit.compile(spec_for("bf16", "s4", "silu", 128, K_TEST, 1, gated=True))
    with pytest.raises(ValueError, match="a power of two"):
        gated(x, w.packed, w.scales, None, 128, launch=LaunchOptions(splits=3))


@pytest.mark.gpu
def test_in_place_residual_and_batched_input():
    w = make_weight(N_TEST, K_TEST, 128, False, torch.bfloat16)
    check_in_place_residual_batched(fused_gemm.int4_linear, w, w)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16])
def test_cuda_graph_capture_and_replay(m):
    """int4_linear captured once, replayed on fresh inputs (and fresh weights in the same buffers)."""
    check_cuda_graph_replay(fused_gemm.int4_linear, make_weight(N_TEST, K_TEST, 128, True, torch.bfloat16), m,
                            lambda seed: make_weight(N_TEST, K_TEST, 128, True, torch.bfloat16, seed=seed),
                            lambda w: (w.packed, w.scales))   # symmetric: no zeros


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["gptq", "awq"])
def test_imported_checkpoints_run(fmt):
    codes, zp, scales = _checkpoint(k=K_TEST, n=N_TEST, g=128, seed=3)
    scales = scales * 0 + 0.05 / (K_TEST ** 0.5)
    if fmt == "gptq":
        w = int4_from_gptq(_pack_words(codes, True), scales, _pack_words(zp - 1, False), dtype=torch.bfloat16)
    else:
        w = int4_from_awq(_pack_words(codes, False, AWQ_ORDER), scales, _pack_words(zp, False, AWQ_ORDER),
                          dtype=torch.bfloat16)
    w = w.to("cuda")
    x = torch.randn(7, K_TEST, dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.int4_linear(x, w), weight_only_reference(x, w), WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
def test_torch_compile_fullgraph_and_the_ops():
    w = make_weight(N_TEST, K_TEST, 128, True, torch.bfloat16)
    check_compiled_and_out_op(
        lambda x: fused_gemm.int4_linear(x, w),
        lambda x, out: torch.ops.fused_gemm.int4_linear_out(x, w.packed, w.scales, None, 128, None, None, None, out),
        K_TEST, N_TEST)


@pytest.mark.gpu
def test_bad_gpu_inputs_name_the_argument():
    w = make_weight(N_TEST, K_TEST, 128, True, torch.bfloat16)
    x = torch.randn(7, K_TEST, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(TypeError, match="int4_linear takes bfloat16 or float16|x is torch.float32"):
        fused_gemm.int4_linear(x.float(), w)
    with pytest.raises(ValueError, match="bias has shape"):
        fused_gemm.int4_linear(x, w, torch.zeros(N_TEST + 1, dtype=torch.bfloat16, device="cuda"), "gelu_tanh",
                               torch.zeros(7, N_TEST, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(ValueError, match="residual has shape"):
        fused_gemm.int4_linear(x, w, torch.zeros(N_TEST, dtype=torch.bfloat16, device="cuda"), "gelu_tanh",
                               torch.zeros(8, N_TEST, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(TypeError, match="out has dtype"):
        fused_gemm.int4_linear(x, w, out=torch.empty(7, N_TEST, device="cuda"))
    with pytest.raises(ValueError, match="activation"):
        fused_gemm.int4_linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="w.packed is on cpu|is on cpu"):
        fused_gemm.int4_linear(x, w.to("cpu"))
    with pytest.raises(ValueError, match="out overlaps x"):
        big = torch.empty(7, K_TEST + N_TEST, dtype=torch.bfloat16, device="cuda")
        fused_gemm.int4_linear(big[:, :K_TEST], w, out=big[:, K_TEST - 16:K_TEST - 16 + N_TEST])


@pytest.mark.gpu
def test_int4_gated_bias_must_be_both_halves():
    """A gated bias is [2I] (the gate's, then the up's): an [I] one is refused before the launch."""
    w = quantize_int4(fused_gemm.pack_gate_up(*(torch.randn(144, K_TEST, dtype=torch.bfloat16) / K_TEST ** 0.5
                                                 for _ in range(2))), 128).to("cuda")
    x = torch.randn(3, K_TEST, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="bias"):
        fused_gemm.int4_gated_linear(x, w, "silu", torch.zeros(3, 144, dtype=torch.bfloat16, device="cuda"),
                                     bias=torch.randn(144, dtype=torch.bfloat16, device="cuda"))
