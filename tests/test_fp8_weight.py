"""W8A16: fp8 (e4m3) weights with per-channel fp32 scales and bf16/fp16 activations, the int4 family's
'e4m3' kernels: specs, URIs, rendering, presets, Fp8Weight and quantize_fp8_weight, fp8_weight_linear.

The CPU tests run everywhere; the one marked compile builds a representative kernel (nvcc, no GPU);
the ones marked gpu check against float64 on an sm_90 GPU (skipped without one) and need the
'fp8-weight-gpu-tests' preset (`fused-gemm build --preset fp8-weight-gpu-tests`)."""
import ctypes

import pytest
import torch

import fused_gemm
import fused_gemm.int4.w8a16  # noqa: F401  (registers the torch ops)
from fused_gemm import jit
from fused_gemm.generator import Int4Spec, LaunchOptions, SpecError, TileConfig, preset, render, spec_from_uri
from fused_gemm.generator.int4.heuristics import RULES, SWEEP_CONFIGS, rules, shape_class, spec_for, sweep_configs
from fused_gemm.generator.int4.presets import (FP8_WEIGHT_TEST_EPILOGUES, FP8_WEIGHT_TEST_SHAPE, TEST_FULL_EPILOGUE,
                                                fp8_decode_configs)
from fused_gemm.quant.fp8_weight import Fp8Weight

from conftest import (DTYPES, REFERENCE_ACTIVATIONS, WEIGHT_ONLY_TOL, assert_close, check_compiled_and_out_op,
                      check_cuda_graph_replay, check_in_place_residual_batched, weight_only_reference)

FP8 = torch.float8_e4m3fn
FULL = TEST_FULL_EPILOGUE


# -- specs, URIs, rendering, presets (CPU) ----------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(weight="e4m3"),
    dict(dtype="fp16", weight="float8_e4m3fn", epilogue=FULL, config=RULES["sm90a"][1].config),
    dict(weight="e4m3", epilogue=FULL, config=rules("sm90a", "e4m3", 0)[1].config),   # the decode kernel
    dict(weight="e4m3", epilogue="bias+silu", bias_dtype="fp32", pdl=False, config=SWEEP_CONFIGS[2]),
])
def test_uri_round_trips(kwargs):
    spec = Int4Spec(**kwargs)
    assert spec.weight == "e4m3" and spec.fp8_weight and "_w-e4m3_" in spec.uri
    assert Int4Spec.from_uri(spec.uri) == spec and spec_from_uri(spec.uri) == spec


def test_specs_refuse_what_the_kernels_cannot_do():
    with pytest.raises(SpecError, match="bias, an activation and a residual"):
        Int4Spec(weight="e4m3", epilogue="col_scale+bias")      # the scale comes with the weight
    with pytest.raises(SpecError, match="tile K"):
        Int4Spec(weight="e4m3", config=TileConfig((64, 16, 32), (1, 1, 1), "pingpong", swap_ab=True))
    spec = Int4Spec(weight="e4m3")
    assert spec.supports_group(4096, 4096) and not spec.supports_group(128, 4096)   # per channel only



def test_decode_specs_refuse_what_spills(tmp_path):
    """The dense decode kernel on an e4m3 weight: at most 4 blocks a CTA, and no 4-chunk stages at 16 tokens
    (x's fragments take twice the registers); the CLI's e4m3 decode default is one block."""
    from fused_gemm.generator.cli import main
    from fused_gemm.generator.gemv import DecodeConfig
    with pytest.raises(SpecError, match="more than 4 blocks spill"):
        Int4Spec(weight="e4m3", config=DecodeConfig(16, 4, 8))
    with pytest.raises(SpecError, match="unroll 4 with 16 tokens spills"):
        Int4Spec(weight="e4m3", config=DecodeConfig(16, 4, 1, unroll=4))
    Int4Spec(weight="e4m3", config=DecodeConfig(8, 4, 1, unroll=4))     # 8 tokens fit four chunks a stage
    assert main(["codegen", "--family", "int4", "--weight", "e4m3", "--decode-tokens", "16", "--decode-unroll", "4",
                 "-o", str(tmp_path)]) == 2
    assert main(["codegen", "--family", "int4", "--weight", "e4m3", "--decode-tokens", "16", "-o", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.glob("int4_*.cu")] == ["int4_sm90a_a-bf16_w-e4m3_d-bf16_decode_t16_w4_b1_ep-none.cu"]


def test_render_converts_in_the_mainloop_and_scales_in_the_epilogue():
    src = render(Int4Spec("bf16", "e4m3", epilogue=FULL))
    assert '#include "fused_gemm/fp8_weight/sm90_fp8_weight.hpp"' in src and "sm90_int4.hpp" not in src
    assert "using ElementQuant = cutlass::float_e4m3_t;" in src
    assert "using ElementA = cute::tuple<ElementQuant>;" in src            # DirectConvert: no scale operand
    assert "using LayoutA = cutlass::layout::RowMajor;" in src and "Int4WeightLayout" not in src
    assert "fused_gemm::fp8_weight_arguments<FgKernel>" in src and "kZeros" not in src
    # scale[n] (fp32, one value per kernel row under the swap) multiplies the accumulator first
    assert ("fusion::Sm90EVT<fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,\n"
            "          fusion::Sm90ColBroadcast<0, TileShape, float, float, Stride<_1, _0, int64_t>>,\n"
            "          fusion::Sm90AccFetch>") in src
    assert "{static_cast<float const *>(p.scales)}" in src and "p.col_scale" not in src
    assert "gelu_tanh(alpha * scales[n] * (x . W^T) + bias[n]) + beta * C[m,n]" in src
    plain = render(Int4Spec("fp16", "e4m3", config=RULES["sm90a"][1].config))
    assert "cutlass::half_t" in plain and "KernelTmaWarpSpecializedCooperative>" in plain
    assert "fusion::Sm90ColBroadcast<0, TileShape, float, float" in plain   # the scale, with no epilogue


def test_decode_rows_follow_the_weights_shape():
    """Llama-3-8B's weights at M = 1 / 16 (generator/int4/heuristics.py FP8_DECODE_BY_SHAPE); M > 16 does not
    depend on the shape."""
    def configs(n, k):
        return [spec_for("bf16", "e4m3", "none", k, k, m, n=n).config.name for m in (1, 16)]
    assert configs(4096, 4096) == ["decode_t16_w4_b1"] * 2
    assert configs(4096, 14336) == ["decode_t16_w4_b1_u3", "decode_t16_w4_b1_u1"]
    assert configs(6144, 4096) == ["decode_t8_w4_b1_u3", "decode_t16_w4_b2"]
    assert configs(14336, 4096) == ["decode_t16_w4_b1_u1"] * 2
    assert configs(28672, 4096) == ["decode_t8_w4_b1", "decode_t16_w4_b1_u1"]
    assert [shape_class("e4m3", n, k) for n, k in ((200, 512), (4096, 8192), (4096, 8208), (8192, 4096),
                                                    (8208, 4096), (16383, 4096), (16384, 4096))] == [0, 0, 1, 2, 3, 3, 4]
    assert spec_for("bf16", "e4m3", "none", 4096, 4096, 17, n=28672) == spec_for("bf16", "e4m3", "none", 4096, 4096, 17)


def test_decode_rows_run_the_dense_decode_kernel_on_the_e4m3_weight():
    spec = spec_for("bf16", "e4m3", FULL, 4096, 4096, 9)
    assert spec.decode and spec.config.tokens == 16
    src = render(spec)
    assert '#include "fused_gemm/gemv/sm90_dense_decode.hpp"' in src and "sm90_int4_decode.hpp" not in src
    assert "using ElementW = cutlass::float_e4m3_t;" in src and "kColScale = true" in src
    assert "fused_gemm::DenseDecodeLauncher<FgKernel, fused_gemm::Fp8WeightDecodeOperands>" in src
    assert "gelu_tanh(alpha * scales[n] * (x . W^T) + bias[n]) + beta * C[m,n], M <= 16" in src


def test_fp8_weight_glue_is_in_its_kernels_cache_keys_only():
    from fused_gemm.generator import FAMILIES
    assert Int4Spec("bf16", "e4m3").csrc_includes == ("fp8_weight",)
    assert Int4Spec("bf16", "e4m3", config=rules("sm90a", "e4m3", 0)[0].config).csrc_includes == ("gemv",)   # the dense decode kernel
    assert Int4Spec("bf16", "s4").csrc_includes == () and Int4Spec("bf16", "u4").csrc_includes == ()
    assert FAMILIES["int4"].csrc_folders == ("fused_gemm/common", "fused_gemm/int4", "fused_gemm/gemm")
    assert "fp8_weight" not in render(Int4Spec("bf16", "u4", epilogue=FULL))


def test_the_table_serves_e4m3_per_channel():
    for m, rule in zip((1, 16, 64, 4096), rules("sm90a", "e4m3", 0)):
        spec = spec_for("bf16", "e4m3", FULL, 4096, 4096, m, n=4096)
        assert spec.weight == "e4m3" and spec.config == rule.config   # group = K: the row's own tile K


M_VALUES = [1, 7, 13, 40, 129, 4095]   # every M bucket of the table; 4095: a partial last tile
N_TEST, K_TEST = FP8_WEIGHT_TEST_SHAPE   # N: a multiple of 8 only (partial weight tiles, and no 16-row blocks)


def test_gpu_tests_preset_lists_every_kernel_they_run():
    have = set(preset("fp8-weight-gpu-tests"))
    need = {spec_for(d, "e4m3", ep, K_TEST, K_TEST, m)
            for d in ("bf16", "fp16") for ep in FP8_WEIGHT_TEST_EPILOGUES for m in M_VALUES + [16]}
    assert need <= have, sorted(s.uri for s in need - have)
    assert all(s.weight == "e4m3" for s in have)
    bench = set(preset("fp8-weight-bench"))   # every decode shape class's rows: the bench's weights span three
    assert {s for s in bench if not s.decode} <= have
    assert {spec_for("bf16", "e4m3", "none", k, k, m, n=n) for n, k in ((4096, 4096), (28672, 4096), (4096, 14336))
            for m in (1, 16, 4096)} <= bench
    assert {s.config for s in preset("fp8-weight-sweep")} == set(sweep_configs("e4m3")) > set(SWEEP_CONFIGS)
    ci = preset("fp8-weight-compile-ci")
    assert len(ci) == 2 and set(ci) <= have and not ci[0].decode and ci[1].config in fp8_decode_configs()


def test_cli_builds_e4m3_specs(tmp_path):
    from fused_gemm.generator.cli import main
    rc = main(["codegen", "--family", "int4", "--weight", "e4m3", "--dtype", "fp16", "--epilogue", "bias+relu",
               "--tile", "64x16x128", "--cluster", "1x1x1", "--schedule", "pingpong", "-o", str(tmp_path)])
    assert rc == 0
    (src,) = tmp_path.glob("int4_*.cu")
    assert "_a-fp16_w-e4m3_" in src.name and "fp8_weight_arguments" in src.read_text()


# -- Fp8Weight and quantize_fp8_weight (CPU) --------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_quantize_fp8_weight_round_trips_per_channel(dtype):
    n, k = 48, 256
    w = (torch.randn(n, k) * torch.logspace(-3, 1, n)[:, None]).to(dtype)
    w[5] = 0
    q = fused_gemm.quantize_fp8_weight(w)
    assert isinstance(q, Fp8Weight) and isinstance(q, tuple) and (q.N, q.K) == (n, k)
    wq, ws = q                                          # still the (weight, scale) pair fp8_linear takes
    assert wq is q.weight and ws is q.scale and wq.dtype == FP8 and wq.is_contiguous()
    assert ws.dtype == torch.float32 and ws.shape == (n,)
    assert torch.equal(ws, (w.float().abs().amax(1) / 448).clamp_min(torch.finfo(torch.float32).tiny))
    deq = q.dequantize(torch.float64)
    assert torch.equal(deq, wq.double() * ws.double()[:, None])     # exactly what the kernel multiplies by
    # e4m3 keeps 3 mantissa bits: half a step is 2^-4 of the value, and subnormals step by 2^-9 * scale
    err = (deq - w.double()).abs()
    assert (err <= w.double().abs() * 2.0 ** -4 + ws.double()[:, None] * 2.0 ** -10 + 1e-30).all()
    assert not deq[5].any() and float(wq.float().abs().max()) == 448.0


def test_fp8_weight_takes_scales_per_channel_or_per_tensor():
    wq = torch.randn(32, 64).to(FP8)
    s = torch.rand(32)
    assert torch.equal(Fp8Weight(wq, s[:, None]).scale, s)                     # [N, 1] checkpoints
    per_tensor = Fp8Weight(wq, torch.tensor(0.5))
    assert per_tensor.scale.shape == (32,) and per_tensor.scale.is_contiguous() and bool((per_tensor.scale == 0.5).all())
    assert Fp8Weight(wq, torch.tensor([0.5])).scale.shape == (32,)
    moved = per_tensor.to("cpu")
    assert isinstance(moved, Fp8Weight) and torch.equal(moved.weight.view(torch.uint8), wq.view(torch.uint8))


@pytest.mark.parametrize("args, error, fragment", [
    (lambda: (torch.randn(32, 64, dtype=torch.bfloat16), torch.rand(32)), TypeError, "float8_e4m3fn"),
    (lambda: (torch.randn(2, 32, 64).to(FP8), torch.rand(32)), ValueError, "2-D"),
    (lambda: (torch.randn(32, 64).to(FP8), torch.rand(32).half()), TypeError, "float32"),
    (lambda: (torch.randn(32, 64).to(FP8), torch.rand(31)), ValueError, "one value per output channel"),
    (lambda: (torch.randn(32, 64).to(FP8), torch.rand(32, 2)), ValueError, "one value per output channel"),
    (lambda: (torch.randn(32, 64).to(FP8), [1.0] * 32), TypeError, "scale must be a torch.Tensor"),
])
def test_fp8_weight_checks_its_fields(args, error, fragment):
    with pytest.raises(error, match=fragment):
        Fp8Weight(*args())


# -- the op without a GPU ------------------------------------------------------------------------
def test_fake_kernel_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 3, 256, dtype=torch.float16)
        y = torch.ops.fused_gemm.fp8_weight_linear(x, torch.empty(64, 256, dtype=FP8), torch.empty(64), None, "silu",
                                                   None)
        assert y.shape == (2, 3, 64) and y.dtype == torch.float16


def test_traced_as_one_op_with_no_graph_break():
    """torch.compile(fullgraph=True) sees fp8_weight_linear (an Fp8Weight from the closure) as one op; the
    backend never runs it, so no GPU is needed."""
    torch._dynamo.reset()
    w = fused_gemm.quantize_fp8_weight(torch.randn(64, 256))
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return lambda *args: (torch.zeros(4, 64, dtype=torch.bfloat16),)

    def f(x):
        return fused_gemm.fp8_weight_linear(x, w, None, "silu")
    with torch.no_grad():
        torch.compile(f, fullgraph=True, backend=backend)(torch.randn(4, 256, dtype=torch.bfloat16))
    (gm,) = graphs
    targets = [str(node.target) for node in gm.graph.nodes if node.op == "call_function"]
    assert targets == ["fused_gemm.fp8_weight_linear"], targets
    torch._dynamo.reset()


def test_bad_inputs_are_refused_before_any_build(tmp_cache, monkeypatch):
    monkeypatch.setenv("FUSED_GEMM_NO_JIT", "1")     # nothing may be built or loaded on the way to the error
    w = fused_gemm.quantize_fp8_weight(torch.randn(32, 256))
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="x is on cpu"):
        fused_gemm.fp8_weight_linear(x, w)
    with pytest.raises(TypeError, match="w must be a fused_gemm.Fp8Weight"):
        fused_gemm.fp8_weight_linear(x, w.weight)
    with pytest.raises(TypeError, match="Fp8Weight.weight has dtype torch.bfloat16"):
        fused_gemm.fp8_weight_linear(x, (w.weight.bfloat16(), w.scale))
    with pytest.raises(ValueError, match="x has K = 128"):
        fused_gemm.fp8_weight_linear(x[:, :128], w)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fused_gemm.fp8_weight_linear([1.0], w)
    with pytest.raises(TypeError, match="out has dtype"):
        fused_gemm.fp8_weight_linear(x, w, out=torch.empty(4, 32))
    with pytest.raises(TypeError, match="bias must be a torch.Tensor"):
        fused_gemm.fp8_weight_linear(x, w, [0.0] * 32)


# -- a representative kernel compiles (nvcc, no GPU) ------------------------------------------------
@pytest.mark.compile
def test_representative_kernel_compiles_without_perf_bugs(tmp_cache):
    from fused_gemm.generator import build_many, family_of, locate
    locate.cache_clear()
    try:
        results = build_many(preset("fp8-weight-compile-ci"), progress=False)   # the mixed-input and the decode kernel
    finally:
        locate.cache_clear()
    for r in results:
        assert not r.cached and r.library.is_file()
        assert r.problems == [], f"{r.spec.uri}: {r.problems}"   # no C7510 / C7508 / spills
        lib = ctypes.CDLL(str(r.library))                         # static cudart: loads without a GPU or driver
        lib.fg_spec_uri.restype = ctypes.c_char_p
        lib.fg_problem_size.restype = ctypes.c_size_t
        abi = family_of(r.spec).abi
        assert lib.fg_spec_uri().decode() == r.spec.uri
        assert lib.fg_abi_version() == abi.version and lib.fg_problem_size() == abi.size


# -- on the GPU ---------------------------------------------------------------------------------
def make_weight(n, k, seed=0, device="cuda") -> Fp8Weight:
    """An Fp8Weight quantised from N(0, 1/K) rows of spread magnitudes (so the per-channel scales differ)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen) / k ** 0.5 * torch.logspace(-1, 1, n)[torch.randperm(n, generator=gen), None]
    return fused_gemm.quantize_fp8_weight(w).to(device)


def epilogue_args(epilogue: str, m: int, n: int, dt):
    steps = epilogue.split("+")
    act = next((s for s in steps if s in REFERENCE_ACTIVATIONS), "identity")
    bias = torch.randn(n, dtype=dt, device="cuda") if "bias" in steps else None
    residual = torch.randn(m, n, dtype=dt, device="cuda") if "residual" in steps else None
    return bias, act, residual


@pytest.mark.gpu
@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("epilogue", FP8_WEIGHT_TEST_EPILOGUES)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_fp8_weight_linear_matches_float64(dtype, epilogue, m):
    dt = DTYPES[dtype]
    w = make_weight(N_TEST, K_TEST, seed=m)
    x = torch.randn(m, K_TEST, dtype=dt, device="cuda")
    bias, act, residual = epilogue_args(epilogue, m, N_TEST, dt)
    ref = weight_only_reference(x, w, bias, act, residual)
    out = torch.full((m, N_TEST), float("nan"), dtype=dt, device="cuda")
    got = fused_gemm.fp8_weight_linear(x, w, bias, act, residual, out=out)
    assert got is out
    assert_close(got, ref, WEIGHT_ONLY_TOL[dt])
    fresh = fused_gemm.fp8_weight_linear(x, w, bias, act, residual)
    assert fresh.dtype == dt and fresh.shape == (m, N_TEST)
    assert_close(fresh, ref, WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 9, 16])
@pytest.mark.parametrize("n, k", [(1032, 4096), (520, 4112)], ids=["n-not-a-multiple-of-16", "k-not-a-multiple-of-128"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_decode_kernel_splits_k(dtype, n, k, m):
    """The first shape class's decode row (the dense decode kernel on the e4m3 weight, 16 tokens): K split
    across the warps and a cluster of CTAs, as the launcher picks and forced to 2 and 8, a last row group past
    N, a last 128-wide chunk of K that is partial."""
    dt = DTYPES[dtype]
    w = make_weight(n, k, seed=n + m)
    x = torch.randn(m, k, dtype=dt, device="cuda")
    bias, act, residual = epilogue_args(FULL, m, n, dt)
    ref = weight_only_reference(x, w, bias, act, residual)
    spec = spec_for(dtype, "e4m3", FULL, k, k, m)
    assert spec.decode
    op = jit.compile(spec)
    for launch in (None, LaunchOptions(splits=2, pdl=True), LaunchOptions(splits=8, pdl=True)):
        out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        got = op(x, w.weight, w.scale, None, k, bias, residual, out=out, launch=launch)
        assert_close(got, ref, WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
@pytest.mark.parametrize("config", fp8_decode_configs(), ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_every_decode_row_matches_float64(dtype, config):
    """Each decode config of the table (8 or 16 tokens, one or two blocks, one to three chunks a stage) at every
    M it serves up to its tokens, on a weight with a partial last row group and K chunk."""
    dt, n, k = DTYPES[dtype], 1032, 4112
    w = make_weight(n, k, seed=config.tokens)
    op = jit.compile(Int4Spec(dtype, "e4m3", epilogue=FULL, config=config))
    for m in (m for m in (1, 8, 9, 13, 16) if m <= config.tokens):
        x = torch.randn(m, k, dtype=dt, device="cuda")
        bias, act, residual = epilogue_args(FULL, m, n, dt)
        out = torch.full((m, n), float("nan"), dtype=dt, device="cuda")
        assert_close(op(x, w.weight, w.scale, None, k, bias, residual, out=out),
                     weight_only_reference(x, w, bias, act, residual), WEIGHT_ONLY_TOL[dt])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16])
def test_decode_rows_by_shape_end_to_end(m):
    """fp8_weight_linear picks a 6144-row weight's decode row (its third shape class) by N."""
    w = make_weight(6144, K_TEST, seed=m)
    assert spec_for("bf16", "e4m3", FULL, K_TEST, K_TEST, m, n=6144).config == rules("sm90a", "e4m3", 2)[m > 8].config
    x = torch.randn(m, K_TEST, dtype=torch.bfloat16, device="cuda")
    bias, act, residual = epilogue_args(FULL, m, 6144, torch.bfloat16)
    out = torch.full((m, 6144), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.fp8_weight_linear(x, w, bias, act, residual, out=out),
                 weight_only_reference(x, w, bias, act, residual), WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
@pytest.mark.parametrize("m", [7, 129])
@pytest.mark.parametrize("k", [80, 528])
def test_k_not_a_multiple_of_the_tile(k, m):
    """K a multiple of 16 only: the last k-tile is partial (80: a single, partial one)."""
    w = make_weight(N_TEST, k, seed=k)
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    out = torch.full((m, N_TEST), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert_close(fused_gemm.fp8_weight_linear(x, w, out=out), weight_only_reference(x, w),
                 WEIGHT_ONLY_TOL[torch.bfloat16])


@pytest.mark.gpu
def test_in_place_residual_batched_input_and_a_pair():
    w = make_weight(N_TEST, K_TEST)
    check_in_place_residual_batched(fused_gemm.fp8_weight_linear, w, tuple(w))   # a plain pair works


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16])
def test_cuda_graph_capture_and_replay(m):
    """fp8_weight_linear captured once, replayed on fresh inputs (and fresh weights in the same buffers)."""
    check_cuda_graph_replay(fused_gemm.fp8_weight_linear, make_weight(N_TEST, K_TEST), m,
                            lambda seed: make_weight(N_TEST, K_TEST, seed=seed), lambda w: (w.weight, w.scale))


@pytest.mark.gpu
def test_torch_compile_fullgraph_and_the_ops():
    w = make_weight(N_TEST, K_TEST)
    bias = torch.randn(N_TEST, dtype=torch.bfloat16, device="cuda")
    check_compiled_and_out_op(
        lambda x: fused_gemm.fp8_weight_linear(x, w, bias, "silu"),
        lambda x, out: torch.ops.fused_gemm.fp8_weight_linear_out(x, w.weight, w.scale, bias, "silu", None, out),
        K_TEST, N_TEST)


@pytest.mark.gpu
def test_bad_gpu_inputs_name_the_argument():
    w = make_weight(N_TEST, K_TEST)
    x = torch.randn(7, K_TEST, dtype=torch.bfloat16, device="cuda")
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    with pytest.raises(TypeError, match="fp8_weight_linear takes bfloat16 or float16"):
        fused_gemm.fp8_weight_linear(x.float(), w)
    with pytest.raises(ValueError, match="bias has shape"):
        fused_gemm.fp8_weight_linear(x, w, torch.zeros(N_TEST + 8, **bf16), "gelu_tanh", torch.zeros(7, N_TEST, **bf16))
    with pytest.raises(ValueError, match="residual has shape"):
        fused_gemm.fp8_weight_linear(x, w, torch.zeros(N_TEST, **bf16), "gelu_tanh", torch.zeros(8, N_TEST, **bf16))
    with pytest.raises(TypeError, match="out has dtype"):
        fused_gemm.fp8_weight_linear(x, w, out=torch.empty(7, N_TEST, device="cuda"))
    with pytest.raises(ValueError, match="activation"):
        fused_gemm.fp8_weight_linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="w.weight is on cpu"):
        fused_gemm.fp8_weight_linear(x, w.to("cpu"))
    with pytest.raises(ValueError, match="w.scale is on cpu"):
        torch.ops.fused_gemm.fp8_weight_linear(x, w.weight, w.scale.cpu(), None, None, None)
    with pytest.raises(TypeError, match="w.scale has dtype torch.bfloat16"):
        torch.ops.fused_gemm.fp8_weight_linear(x, w.weight, w.scale.bfloat16(), None, None, None)
    with pytest.raises(ValueError, match="w.scale has shape"):
        torch.ops.fused_gemm.fp8_weight_linear(x, w.weight, w.scale[:-8], None, None, None)
    with pytest.raises(ValueError, match="N = 196"):
        fused_gemm.fp8_weight_linear(x, make_weight(196, K_TEST))
    with pytest.raises(ValueError, match="K = 520"):
        fused_gemm.fp8_weight_linear(torch.randn(7, 520, **bf16), make_weight(N_TEST, 520))
    with pytest.raises(ValueError, match="w.weight must be contiguous"):
        wide = make_weight(N_TEST, 2 * K_TEST)
        torch.ops.fused_gemm.fp8_weight_linear(x, wide.weight[:, :K_TEST], wide.scale, None, None, None)
    with pytest.raises(ValueError, match="out overlaps x"):
        big = torch.empty(7, K_TEST + N_TEST, **bf16)
        fused_gemm.fp8_weight_linear(big[:, :K_TEST], w, out=big[:, K_TEST - 16:K_TEST - 16 + N_TEST])
