"""W8A8 fp8: the e4m3 GEMM specs, the quant family, fp8_linear and quantize_fp8.

The CPU tests (spec, URI, render, cache key, ops' fake kernels, errors before any kernel) run
everywhere; the ones marked gpu check against float64 on an sm_90 GPU (skipped without one) and
need the 'fp8-gpu-tests' preset (`fused-gemm build --preset fp8-gpu-tests`)."""
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import fused_gemm
import fused_gemm.quant.fp8  # noqa: F401  (registers the torch ops)
from fused_gemm.generator import Epilogue, GemmSpec, QuantSpec, SpecError, TileConfig, render, spec_from_uri
from fused_gemm.generator.gemm.heuristics import FP8_RULES, RULES
from fused_gemm.generator.gemv import DecodeConfig
from fused_gemm.generator.quant.presets import (FAST_COOPERATIVE_CONFIGS, FP8_TEST_EPILOGUES, PROMOTION_TEST_CASES,
                                               fast_cooperative_specs, promotion_test_spec)

from conftest import captured

FP8 = torch.float8_e4m3fn
TINY = torch.finfo(torch.float32).tiny
DECODE = FP8_RULES[False][0].config


# -- specs, URIs, rendering (CPU) -----------------------------------------------------------------
def test_fp8_spec_defaults_to_a_16_bit_output():
    spec = GemmSpec("e4m3", epilogue="row_scale+col_scale+bias+silu+residual")
    assert (spec.a_dtype, spec.b_dtype, spec.out_dtype, spec.bias_dtype, spec.residual_dtype) == \
        ("e4m3", "e4m3", "bf16", "bf16", "bf16")
    assert GemmSpec("float8_e4m3fn", out_dtype="fp16").bias_dtype == "fp16"
    assert "a-e4m3_b-e4m3_d-bf16" in spec.uri


@pytest.mark.parametrize("kwargs", [
    dict(epilogue="a_scale+b_scale+bias+silu", config=DECODE),
    dict(epilogue="row_scale+col_scale", config=FP8_RULES[True][-1].config, fast_accum=True),
    dict(epilogue="a_scale+col_scale+bias+gelu_tanh+residual", out_dtype="fp16", residual_dtype="fp32", pdl=False),
    dict(epilogue="row_scale+b_scale", out_dtype="fp32", config=TileConfig((128, 64, 64), (1, 1, 1), "pingpong")),
    dict(epilogue="row_scale+col_scale", config=FP8_RULES[False][-1].config, promotion=8),
])
def test_fp8_uri_round_trips(kwargs):
    spec = GemmSpec("e4m3", **kwargs)
    assert GemmSpec.from_uri(spec.uri) == spec and spec_from_uri(spec.uri) == spec
    assert ("_fastacc_" in spec.uri) == spec.fast_accum


@pytest.mark.parametrize("kwargs, fragment", [
    ({"b_layout": "kn"}, "K-major"),
    ({"config": TileConfig((128, 128, 256), (1, 1, 1))}, "fp8 tile K"),
    ({"config": TileConfig((128, 128, 32), (1, 1, 1))}, "fp8 tile K"),
    ({"out_dtype": "e4m3"}, "out_dtype"),
    ({"b_dtype": "e5m2"}, "no mainloop"),
    ({"fast_accum": True, "config": TileConfig((128, 128, 128), (1, 1, 1), "auto")}, "auto"),
    ({"promotion": 6}, "promotion 6"),
    ({"promotion": 8, "fast_accum": True, "config": TileConfig((128, 128, 128), (1, 1, 1), "cooperative")},
     "fast_accum never promotes"),
    ({"promotion": 8.0}, "an int"),
])
def test_bad_fp8_specs_raise(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment):
        GemmSpec("e4m3", **kwargs)


def test_fast_accum_is_fp8_only():
    with pytest.raises(SpecError, match="fast_accum"):
        GemmSpec("bf16", fast_accum=True)
    with pytest.raises(SpecError, match="promotion is an fp8 mainloop option"):
        GemmSpec("bf16", promotion=8)
    with pytest.raises(SpecError, match="the decode kernel has none"):
        GemmSpec("bf16", config=DecodeConfig(16, 4, 1), promotion=8)


def test_precise_fp8_runs_our_promotion_mainloop():
    """Without fast accumulation the CUTLASS fp8 mainloop is wrapped in ours (csrc/fused_gemm/fp8), which
    promotes every `promotion` wgmmas, counted in k-tiles (4 wgmmas a 128-wide k-tile, 2 a 64-wide one);
    fast accumulation and 16-bit kernels keep CUTLASS's, and their sources (and cache keys) as before."""
    cfg = FP8_RULES[False][-1].config
    for promotion, tiles in ((4, 1), (8, 2), (16, 4)):
        spec = GemmSpec("e4m3", config=cfg, promotion=promotion)
        src = render(spec)
        assert f"fused_gemm::Sm90Fp8PromotionOverlap<CutlassMainloop, {tiles}>;" in src
        assert '#include "fused_gemm/fp8/sm90_fp8_promotion.hpp"' in src and spec.csrc_includes == ("fp8",)
        assert "mma_promotion_interval" not in src
    half = GemmSpec("e4m3", config=TileConfig((128, 128, 64), (1, 1, 1), "cooperative"), promotion=8)
    assert half.promotion_tiles == 4 and "Sm90Fp8PromotionOverlap<CutlassMainloop, 4>" in render(half)
    fast = GemmSpec("e4m3", config=FP8_RULES[True][-1].config, fast_accum=True)
    for other in (fast, GemmSpec("bf16", config=cfg), GemmSpec("bf16", config=DECODE)):
        assert other.promotion_tiles is None and "Sm90Fp8PromotionOverlap" not in render(other)
        assert "using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<" in render(other) \
            or other.decode


def test_fp8_vectors_are_read_ahead_by_persistent_cooperative_kernels():
    """Their scales and bias come from csrc/fused_gemm/evt's read-ahead node, one value per kernel row
    (mode 0) or column (mode 1), swapped with the operands; ping-pong, the plain warp-specialized decode
    tiles, stream-K and 16-bit kernels keep CUTLASS's broadcasts."""
    precise = FP8_RULES[False][-1].config
    spec = GemmSpec("e4m3", epilogue="row_scale+col_scale+bias", config=precise)
    src = render(spec)
    assert spec.vectors_ahead and spec.csrc_includes == ("evt", "fp8")
    assert '#include "fused_gemm/evt/sm90_prefetched_vector.hpp"' in src
    for line in ("fused_gemm::Sm90PrefetchedVector<0, TileShape, float>",        # row_scale: a value per row m
                 "fused_gemm::Sm90PrefetchedVector<1, TileShape, float>",        # col_scale: per column n
                 "fused_gemm::Sm90PrefetchedVector<1, TileShape, cutlass::bfloat16_t>"):   # bias
        assert line in src
    assert "Sm90RowBroadcast" not in src and "Sm90ColBroadcast" not in src
    swapped = GemmSpec("e4m3", epilogue="row_scale+col_scale",
                       config=TileConfig((128, 128, 128), (1, 1, 1), "cooperative", swap_ab=True))
    assert "Sm90PrefetchedVector<1, TileShape, float>,\n        fusion::Sm90AccFetch" in render(swapped)
    stream_k = TileConfig((128, 128, 128), (1, 1, 1), "cooperative", "stream_k")
    for other in (GemmSpec("e4m3", epilogue="row_scale+col_scale", config=FP8_RULES[True][-1].config, fast_accum=True),
                  GemmSpec("e4m3", epilogue="row_scale+col_scale", config=DECODE),
                  GemmSpec("e4m3", epilogue="row_scale+col_scale", config=stream_k),
                  GemmSpec("e4m3", epilogue="a_scale+b_scale", config=precise),
                  GemmSpec("bf16", epilogue="bias", config=precise)):
        assert not other.vectors_ahead and "Sm90PrefetchedVector" not in render(other)


@pytest.mark.parametrize("text", ["a_scale+b_scale", "row_scale+b_scale+bias", "a_scale+col_scale+relu+residual",
                                  "a_scale", "b_scale+silu"])
def test_per_tensor_scale_steps_round_trip(text):
    assert Epilogue.parse(text).name == text


@pytest.mark.parametrize("text, fragment", [
    ("row_scale+a_scale", "both row_scale and a_scale"),
    ("col_scale+b_scale", "both col_scale and b_scale"),
    ("b_scale+a_scale", "out of order"),
])
def test_per_tensor_scales_replace_their_vectors(text, fragment):
    with pytest.raises(SpecError, match=fragment):
        Epilogue.parse(text)


def test_fp8_render_picks_the_fp8_pieces():
    src = render(GemmSpec("e4m3", epilogue="a_scale+b_scale+bias+silu", config=DECODE))
    assert "using ElementA = cutlass::float_e4m3_t" in src and "using ElementB = cutlass::float_e4m3_t" in src
    assert "using LayoutA = cutlass::layout::RowMajor" in src and "using LayoutB = cutlass::layout::ColumnMajor" in src
    assert "cutlass::gemm::KernelTmaWarpSpecialized>" in src                    # fp32 promotion: no FastAccum
    assert '#include "fused_gemm/evt/sm90_device_scalar.hpp"' in src
    assert "fused_gemm::Sm90DeviceScalar<2>" in src and "Sm90ScalarBroadcast" not in src
    assert "{p.alpha, {static_cast<float const *>(p.row_scale), static_cast<float const *>(p.col_scale)}}" in src
    assert "silu(alpha * a_scale * b_scale * acc + bias[n])" in src
    one = render(GemmSpec("e4m3", epilogue="row_scale+b_scale", config=DECODE))
    assert "fused_gemm::Sm90DeviceScalar<1>" in one and "{p.alpha, {static_cast<float const *>(p.col_scale)}}" in one
    fast = render(GemmSpec("e4m3", epilogue="row_scale+col_scale", config=FP8_RULES[True][-1].config,
                           fast_accum=True))
    assert "cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum>" in fast
    assert "sm90_device_scalar" not in fast and "Sm90ScalarBroadcast<float" in fast


def test_only_the_headers_a_kernel_includes_enter_its_key():
    """The EVT nodes only with per-tensor scales or vectors read ahead, the fp8 mainloop only without
    fast accumulation."""
    from fused_gemm.generator import cache
    from fused_gemm.generator.registry import FAMILIES
    from fused_gemm.generator.toolchain import Toolchain
    tc = Toolchain(Path("/x/nvcc"), "13.0.88", "4.2.0")
    folders = FAMILIES["gemm"].csrc_folders
    fast = FP8_RULES[True][-1].config
    for spec, extra in ((GemmSpec("e4m3", epilogue="a_scale+col_scale", config=DECODE),
                         ("fused_gemm/evt", "fused_gemm/fp8")),
                        (GemmSpec("e4m3", epilogue="row_scale+col_scale", config=DECODE), ("fused_gemm/fp8",)),
                        (GemmSpec("e4m3", epilogue="row_scale+col_scale", config=fast, fast_accum=True), ()),
                        (GemmSpec("e4m3", epilogue="a_scale+b_scale", config=fast, fast_accum=True),
                         ("fused_gemm/evt",)),
                        (GemmSpec("e4m3", epilogue="row_scale+col_scale", config=FP8_RULES[False][-1].config),
                         ("fused_gemm/evt", "fused_gemm/fp8")),
                        (GemmSpec("bf16", epilogue="bias"), ())):
        src = render(spec)
        assert cache.entry_for(spec, src, tc).key == cache.cache_key(src, "sm90a", tc, folders + extra)


def test_fp8_table_is_valid_and_decodes_like_the_16_bit_table():
    for fast, rules in FP8_RULES.items():
        bounds = [r.max_m for r in rules]
        assert bounds == sorted(set(bounds)) and bounds[-1] == RULES["sm90a"][-1].max_m
        decode = [r for r in RULES["sm90a"] if r.config.swap_ab]
        assert [(r.max_m, r.config) for r in rules[:len(decode)]] == [(r.max_m, r.config) for r in decode]
        for rule in rules:
            GemmSpec("e4m3", epilogue="row_scale+col_scale", config=rule.config, fast_accum=fast,
                     promotion=rule.promotion)
        assert rules[0].config.swap_ab and rules[0].launch.pdl


def test_quant_spec_uri_and_render():
    for spec in (QuantSpec(), QuantSpec("fp16")):
        assert spec_from_uri(spec.uri) == spec and spec.uri.startswith("quant_sm90a_")
        src = render(spec)
        assert '#include "fused_gemm/quant/quantize_fp8.hpp"' in src and "typedef struct FgQuantProblem" in src
        assert "fused_gemm::QuantLauncher<FgKernel>" in src
    assert QuantSpec().uri == "quant_sm90a_bf16_e4m3_per-token"
    with pytest.raises(SpecError, match="input dtype"):
        QuantSpec("fp32")
    with pytest.raises(SpecError, match="output dtype"):
        QuantSpec("bf16", "e5m2")


def test_quant_pack_order_matches_the_abi():
    from fused_gemm.generator.quant import PROBLEM
    from fused_gemm.quant.op import PACK_ORDER
    assert PACK_ORDER == PROBLEM.names


def test_presets_list_the_fp8_kernels():
    from fused_gemm.generator import preset
    specs = preset("fp8-gpu-tests")
    assert {QuantSpec("bf16"), QuantSpec("fp16")} <= set(specs)
    gemms = [s for s in specs if s.family == "gemm"]
    assert all(s.a_dtype == "e4m3" for s in gemms) and any(s.fast_accum for s in gemms)
    assert any(s.family == "gemm" and s.a_dtype == "e4m3" for s in preset("compile-ci"))


# -- the ops without a GPU ----------------------------------------------------------------------
def test_fake_kernels_give_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 3, 64, dtype=FP8)
        w = torch.empty(96, 64, dtype=FP8)
        s = torch.empty((), dtype=torch.float32)
        y = torch.ops.fused_gemm.fp8_linear(x, w, s, s, None, None, None, None, False)
        assert y.shape == (2, 3, 96) and y.dtype == torch.bfloat16
        y = torch.ops.fused_gemm.fp8_linear(x, w, s, s, None, "silu", None, torch.float16, True)
        assert y.dtype == torch.float16
        q, scale = torch.ops.fused_gemm.quantize_fp8(torch.empty(2, 3, 64, dtype=torch.bfloat16))
        assert q.shape == (2, 3, 64) and q.dtype == FP8 and scale.shape == (2, 3) and scale.dtype == torch.float32


def test_cpu_tensors_and_bad_scales_are_refused_before_any_build(tmp_cache, monkeypatch):
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")     # nothing may be built or loaded on the way to the error
    x = torch.zeros(4, 64).to(FP8)
    w = torch.zeros(32, 64).to(FP8)
    one = torch.ones(())
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.fp8_linear(x, w, one, one)
    with pytest.raises(TypeError, match="x_scale has dtype torch.bfloat16"):
        fused_gemm.fp8_linear(x, w, one.bfloat16(), one)
    with pytest.raises(ValueError, match=r"x_scale has shape \(3,\).*M = 4"):
        fused_gemm.fp8_linear(x, w, torch.ones(3), one)
    with pytest.raises(ValueError, match=r"w_scale has shape \(31,\).*N = 32"):
        fused_gemm.fp8_linear(x, w, one, torch.ones(31))
    with pytest.raises(TypeError, match="w_scale must be a float32 torch.Tensor"):
        fused_gemm.fp8_linear(x, w, one, 1.0)
    with pytest.raises(ValueError, match="weight must be 2-D"):
        fused_gemm.fp8_linear(x, w[0], one, one)
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.quantize_fp8(torch.zeros(4, 64, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fused_gemm.quantize_fp8([1.0])


def test_quantize_fp8_weight_is_per_channel_and_round_trips():
    w = torch.randn(48, 64) * torch.logspace(-3, 3, 48)[:, None]
    w[5] = 0
    q, scale = fused_gemm.quantize_fp8_weight(w.bfloat16())
    assert q.dtype == FP8 and q.shape == (48, 64) and scale.shape == (48,) and scale.dtype == torch.float32
    assert scale[5] == TINY and not q[5].float().any()
    assert_round_trip(w.bfloat16(), q, scale)
    with pytest.raises(TypeError, match="16- or 32-bit"):
        fused_gemm.quantize_fp8_weight(q)
    with pytest.raises(ValueError, match="2-D"):
        fused_gemm.quantize_fp8_weight(w[0])


def assert_round_trip(x, q, scale):
    """q * scale is x to within e4m3's half-ulp (2^-4 relative) or, for values in e4m3's subnormal
    range, half its subnormal step (2^-10 in units of the scale)."""
    x = x.double().reshape(-1, x.shape[-1])
    s = scale.double().reshape(-1, 1)
    amax = x.abs().amax(dim=1, keepdim=True)
    torch.testing.assert_close(scale.reshape(-1), (amax / 448).clamp_min(TINY).float().reshape(-1), rtol=0, atol=0)
    err = (q.double().reshape(x.shape) * s - x).abs()
    bound = torch.maximum(x.abs() * 2.0 ** -4, s * 2.0 ** -10) * (1 + 1e-6)
    assert (err <= bound).all(), f"worst excess {(err - bound).max().item():.3e}"
    assert q.float().abs().max() <= 448


# -- on the GPU ---------------------------------------------------------------------------------
TOL = {torch.bfloat16: 1e-2, torch.float16: 3e-3, torch.float32: 1e-3}
ACT = {"identity": lambda t: t, "relu": torch.relu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
       "silu": F.silu}
M_VALUES = [1, 7, 40, 129, 4095]      # every row of FP8_RULES, partial tiles
N, K = 264, 208                       # N fills no tile evenly; K: one full and one partial 128-wide k-tile
OUT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def fp8_operands(ep: Epilogue, m, n, k, out_dtype):
    """Fresh random e4m3 operands and scales for ``ep`` (scales in [0.5, 1.5): never zero)."""
    g = {"x": (torch.randn(m, k, device="cuda") * 8).to(FP8),
         "weight": (torch.randn(n, k, device="cuda") * 8).to(FP8)}
    g["x_scale"] = torch.rand((), device="cuda") + 0.5 if ep.a_scale else torch.rand(m, device="cuda") + 0.5
    g["w_scale"] = torch.rand((), device="cuda") + 0.5 if ep.b_scale else torch.rand(n, device="cuda") + 0.5
    g["x_scale"] /= 8 * math.sqrt(k)
    g["w_scale"] /= 8
    if ep.bias:
        g["bias"] = torch.randn(n, dtype=out_dtype, device="cuda")
    if ep.residual:
        g["residual"] = torch.randn(m, n, dtype=out_dtype, device="cuda")
    return g


def fp8_reference(ep: Epilogue, x, weight, x_scale, w_scale, bias=None, residual=None):
    """float64, from the dequantised operands."""
    xd = x.double() * (x_scale.double() if x_scale.dim() == 0 else x_scale.double()[:, None])
    wd = weight.double() * (w_scale.double() if w_scale.dim() == 0 else w_scale.double()[:, None])
    acc = xd @ wd.T
    if bias is not None:
        acc = acc + bias.double()
    acc = ACT[ep.activation](acc)
    return acc + residual.double() if residual is not None else acc


def assert_close(got, ref, tol):
    assert not torch.isnan(got).any(), "some output elements were never written (NaN poison survived)"
    err = ((got.double() - ref).norm() / ref.norm()).item()
    assert err < tol, f"relative error {err:.2e} > {tol:.0e}"


def call(ep: Epilogue, g, **kw):
    return fused_gemm.fp8_linear(g["x"], g["weight"], g["x_scale"], g["w_scale"], g.get("bias"), ep.activation,
                                 g.get("residual"), **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("epilogue, out", FP8_TEST_EPILOGUES)
def test_fp8_linear_matches_float64(epilogue, out, m):
    ep, dtype = Epilogue.parse(epilogue), OUT[out]
    g = fp8_operands(ep, m, N, K, dtype)
    result = torch.full((m, N), float("nan"), dtype=dtype, device="cuda")
    got = call(ep, g, out=result)
    assert got is result
    assert_close(got, fp8_reference(ep, **g), TOL[dtype])
    fresh = call(ep, g, out_dtype=dtype)
    assert fresh.dtype == dtype and fresh.shape == (m, N)
    assert_close(fresh, fp8_reference(ep, **g), TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue, out", [case for case in FP8_TEST_EPILOGUES if case[0] != "a_scale+b_scale"])
def test_read_ahead_vectors_over_many_tiles_a_cta(epilogue, out):
    """The prefill kernel's scales and bias pass through two shared-memory slots that the epilogue's load
    warp fills ahead of the consumers (csrc/fused_gemm/evt/sm90_prefetched_vector.hpp): at K = 128 that
    warp runs furthest ahead, ~16 tiles a CTA (128x128 ones) reuse each slot several times, M and N end in
    partial tiles, and the residual case reuses C's buffer (a deeper load pipeline)."""
    check_many_tiles_a_cta(Epilogue.parse(epilogue), OUT[out])


def check_many_tiles_a_cta(ep: Epilogue, dtype, **kw):
    """fp8_linear at 8191 x 4104 x 128 (8-16 tiles a CTA, partial tiles in M and N) against float64,
    its output NaN-poisoned first."""
    m, n, k = 8191, 4104, 128
    g = fp8_operands(ep, m, n, k, dtype)
    result = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    assert_close(call(ep, g, out=result, **kw), fp8_reference(ep, **g), TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("config", FAST_COOPERATIVE_CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("epilogue, out", FP8_TEST_EPILOGUES)
def test_fast_accumulation_cooperative_tiles(monkeypatch, epilogue, out, config):
    """fp8_linear(use_fast_accum=True) where the GPU's table names a cooperative tile (its epilogue reads the
    vectors ahead, as the precise kernels' does): every test epilogue through the public op, as
    test_read_ahead_vectors_over_many_tiles_a_cta; the op ran the named kernel."""
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.generator.gemm.heuristics import Rule
    from fused_gemm.quant import fp8 as fp8_api
    monkeypatch.setenv("FUSED_GEMM_TUNED", "1")
    monkeypatch.setattr(tuned, "rule_for", lambda gpu, dtype, n, k, m, op="linear":
                        Rule(m, config) if op == tuned.FP8_OP[True] else None)
    monkeypatch.setattr(fp8_api, "_selection", {})
    check_many_tiles_a_cta(Epilogue.parse(epilogue), OUT[out], use_fast_accum=True)
    (op, _), = fp8_api._selection.values()
    assert op.spec in fast_cooperative_specs(epilogue, out) and op.spec.config == config


@pytest.mark.gpu
@pytest.mark.parametrize("case", PROMOTION_TEST_CASES, ids=lambda c: f"k{c[0]}p{c[1]}")
@pytest.mark.parametrize("k", [128, 384, 640, 4224])
def test_promotion_intervals_and_leftover_k_tiles(case, k):
    """Our fp8 mainloop (csrc/fused_gemm/fp8) at intervals of 2, 4 and 8 k-tiles: one k-tile in all, fewer
    k-tiles than an interval, and counts that leave k-tiles after the last whole pair of intervals."""
    op = fused_gemm.compile(promotion_test_spec(*case))
    ep = Epilogue.parse("row_scale+col_scale")
    g = fp8_operands(ep, 257, 384, k, torch.bfloat16)
    out = torch.full((257, 384), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = op(g["x"], g["weight"], row_scale=g["x_scale"], col_scale=g["w_scale"], out=out)
    assert_close(got, fp8_reference(ep, **g), TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 40, 129])
def test_fast_accumulation(m):
    ep = Epilogue.parse("row_scale+col_scale")
    g = fp8_operands(ep, m, 512, 4096, torch.bfloat16)
    ref = fp8_reference(ep, **g)
    assert_close(call(ep, g, use_fast_accum=True), ref, 2e-2)
    assert_close(call(ep, g), ref, TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [7, 129])
def test_fp32_output_and_batched_input(m):
    ep = Epilogue.parse("row_scale+col_scale")
    g = fp8_operands(ep, m, N, K, torch.float32)
    got = fused_gemm.fp8_linear(g["x"].view(1, m, K), g["weight"], g["x_scale"].view(1, m), g["w_scale"],
                                out_dtype=torch.float32)
    assert got.shape == (1, m, N) and got.dtype == torch.float32
    assert_close(got.view(m, N), fp8_reference(ep, **g), TOL[torch.float32])
    got = fused_gemm.fp8_linear(g["x"], g["weight"], g["x_scale"][:, None], g["w_scale"][:, None],
                                out_dtype=torch.float32)   # [M, 1] and [N, 1], as torch._scaled_mm takes them
    assert_close(got, fp8_reference(ep, **g), TOL[torch.float32])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 7, 129])
@pytest.mark.parametrize("k", [16, 4096, 16640])   # one chunk; in registers; past the register cache
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_quantize_fp8_round_trip(dtype, k, m):
    x = (torch.randn(m, k, device="cuda") * torch.logspace(-3, 3, m, device="cuda")[:, None]).to(dtype)
    if m > 1:
        x[m // 2] = 0
    q_out = torch.full((m, k), float("nan"), device="cuda").to(FP8)
    s_out = torch.full((m,), float("nan"), device="cuda")
    q, scale = fused_gemm.quantize_fp8(x, out=q_out, scale_out=s_out)
    assert q is q_out and scale is s_out
    assert_round_trip(x, q, scale)
    inv = scale.reciprocal()[:, None]
    expect = (x.float() * inv).clamp(-448, 448).to(FP8)
    assert torch.equal(q.view(torch.uint8), expect.view(torch.uint8)), "not round-to-nearest of x / scale"
    if m > 1:
        assert scale[m // 2] == TINY and not q[m // 2].float().any()
    q2, s2 = fused_gemm.quantize_fp8(x)
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s2, scale)


@pytest.mark.gpu
def test_quantize_fp8_batched_strided_and_empty():
    big = torch.randn(2, 5, 256, dtype=torch.bfloat16, device="cuda")
    x = big[..., :192]                                  # rows 256 apart
    q, scale = fused_gemm.quantize_fp8(x)
    assert q.shape == (2, 5, 192) and scale.shape == (2, 5) and q.is_contiguous()
    assert_round_trip(x, q, scale)
    q, scale = fused_gemm.quantize_fp8(torch.empty(0, 64, dtype=torch.bfloat16, device="cuda"))
    assert q.shape == (0, 64) and scale.shape == (0,)


@pytest.mark.gpu
def test_bf16_model_runs_w8a8_end_to_end():
    x = torch.randn(33, 512, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(384, 512, dtype=torch.bfloat16, device="cuda") / math.sqrt(512)
    b = torch.randn(384, dtype=torch.bfloat16, device="cuda")
    wq, ws = fused_gemm.quantize_fp8_weight(w)
    xq, xs = fused_gemm.quantize_fp8(x)
    y = fused_gemm.fp8_linear(xq, wq, xs, ws, b.half(), "silu", out_dtype=torch.float16)
    assert y.dtype == torch.float16
    assert_close(y, F.silu(F.linear(x.double(), w.double(), b.double())), 0.1)   # fp8's own error: ~5%
    assert_close(y, fp8_reference(Epilogue(bias=True, activation="silu"), xq, wq, xs, ws, b.half()),
                 TOL[torch.float16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16])
def test_decode_step_in_a_cuda_graph(m):
    """quantize + fp8 GEMM captured once, replayed on fresh inputs (the PDL GEMM reads the scales
    the quantiser just wrote)."""
    ep = Epilogue(row_scale=True, col_scale=True, bias=True, activation="silu")
    x = torch.randn(m, 1024, dtype=torch.bfloat16, device="cuda")
    wq, ws = fused_gemm.quantize_fp8_weight(torch.randn(768, 1024, device="cuda"))
    b = torch.randn(768, dtype=torch.float16, device="cuda")
    out = torch.empty(m, 768, dtype=torch.float16, device="cuda")
    xq, xs = fused_gemm.quantize_fp8(x)

    def step():
        fused_gemm.quantize_fp8(x, out=xq, scale_out=xs)
        fused_gemm.fp8_linear(xq, wq, xs, ws, b, "silu", out=out)
    graph = captured(step)
    for _ in range(2):
        x.copy_(torch.randn_like(x) * 10)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, fp8_reference(ep, xq, wq, xs, ws, b), TOL[torch.float16])
        assert_round_trip(x, xq, xs)


@pytest.mark.gpu
def test_torch_compile_fullgraph_and_the_ops():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    w = torch.randn(256, 128, device="cuda")
    wq, ws = fused_gemm.quantize_fp8_weight(w)

    def f(x):
        xq, xs = fused_gemm.quantize_fp8(x)
        return fused_gemm.fp8_linear(xq, wq, xs, ws)
    x = torch.randn(9, 128, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        eager, compiled = f(x), torch.compile(f, fullgraph=True)(x)
    assert not torch._dynamo.utils.counters["graph_break"]
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    xq, xs = torch.ops.fused_gemm.quantize_fp8(x)
    out = torch.full((9, 256), float("nan"), dtype=torch.bfloat16, device="cuda")
    torch.ops.fused_gemm.fp8_linear_out(xq, wq, xs, ws, None, None, None, False, out)
    torch.testing.assert_close(out, eager, rtol=0, atol=0)


@pytest.mark.gpu
def test_bad_gpu_inputs_name_the_argument():
    ep = Epilogue.parse("row_scale+col_scale")
    g = fp8_operands(ep, 7, N, K, torch.bfloat16)
    x, w, xs, ws = g["x"], g["weight"], g["x_scale"], g["w_scale"]
    with pytest.raises(TypeError, match="x has dtype torch.bfloat16; fp8_linear takes float8_e4m3fn"):
        fused_gemm.fp8_linear(x.bfloat16(), w, xs, ws)
    with pytest.raises(TypeError, match="weight has dtype torch.bfloat16"):
        fused_gemm.fp8_linear(x, w.bfloat16(), xs, ws)
    with pytest.raises(ValueError, match="weight has shape"):
        fused_gemm.fp8_linear(x, w.t().contiguous(), xs, torch.ones(K, device="cuda"))
    odd = torch.zeros(7, 200, device="cuda").to(FP8)
    with pytest.raises(ValueError, match="multiple of 16"):
        fused_gemm.fp8_linear(odd, torch.zeros(N, 200, device="cuda").to(FP8), xs, ws)
    with pytest.raises(ValueError, match="activation"):
        fused_gemm.fp8_linear(x, w, xs, ws, activation="tanh")
    with pytest.raises(TypeError, match="out_dtype"):
        fused_gemm.fp8_linear(x, w, xs, ws, out_dtype=FP8)
    with pytest.raises(ValueError, match="bias has shape"):
        fused_gemm.fp8_linear(x, w, xs, ws, torch.zeros(N + 1, dtype=torch.float16, device="cuda"), "silu",
                              out_dtype=torch.float16)
    with pytest.raises(ValueError, match="x_scale is on cpu"):
        fused_gemm.fp8_linear(x, w, xs.cpu(), ws)
    with pytest.raises(ValueError, match="multiple of 16"):
        fused_gemm.quantize_fp8(torch.zeros(3, 40, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(TypeError, match="quantize_fp8 takes bfloat16 or float16"):
        fused_gemm.quantize_fp8(torch.zeros(3, 64, device="cuda"))
    with pytest.raises(TypeError, match="out has dtype"):
        fused_gemm.quantize_fp8(torch.zeros(3, 64, dtype=torch.bfloat16, device="cuda"),
                                out=torch.zeros(3, 64, dtype=torch.bfloat16, device="cuda"))
