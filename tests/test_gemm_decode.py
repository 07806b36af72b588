"""The GEMM family's decode kernel (a DecodeConfig: csrc/fused_gemm/gemv/sm90_dense_decode.hpp): its spec,
source and build everywhere; on an sm_90 GPU, against float64 (the GPU tests skip without one)."""
import math

import pytest
import torch

import fused_gemm
from fused_gemm.generator import Epilogue, GemmSpec, LaunchOptions, SpecError, render
from fused_gemm.generator.gemm import tuning_space
from fused_gemm.generator.gemm.presets import (DECODE_TEST_CONFIG, DECODE_WIDE_CONFIGS as WIDE_CONFIGS, TEST_EPILOGUES,
                                              decode_configs)
from fused_gemm.generator.gemm.spec import config_from_name
from fused_gemm.generator.gemm.tuned import Entry
from fused_gemm.generator.gemv import DecodeConfig

from conftest import captured
from test_gpu import assert_close, operands, reference


@pytest.mark.parametrize("kwargs", [
    dict(epilogue="bias+gelu_tanh+residual", config=DecodeConfig(16, 4, 1)),
    dict(a_dtype="fp16", out_dtype="fp32", epilogue="row_scale+col_scale+bias+silu", config=DecodeConfig(8, 8, 2)),
    dict(config=DecodeConfig(16, 4, 4), pdl=False),
    dict(epilogue="bias+gelu_tanh", config=DecodeConfig(16, 4, 1, unroll=3)),
])
def test_uri_round_trips(kwargs):
    spec = GemmSpec(**kwargs)
    assert "_decode_t" in spec.uri and GemmSpec.from_uri(spec.uri) == spec
    assert spec.decode and spec.csrc_includes == ("gemv",)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(a_dtype="e4m3", config=DECODE_TEST_CONFIG), "16-bit operands"),
    (dict(b_layout="kn", config=DECODE_TEST_CONFIG), "[N, K] weight"),
    (dict(epilogue="a_scale+bias", config=DECODE_TEST_CONFIG), "per-tensor scales"),
    (dict(config=DecodeConfig(16, 4, 8)), "more than 4 blocks spill"),
])
def test_bad_specs_raise(kwargs, fragment):
    with pytest.raises(SpecError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        GemmSpec(**kwargs)


def test_unroll_is_named_checked_and_rendered():
    assert DecodeConfig(16, 4, 1, unroll=3).name == "decode_t16_w4_b1_u3"
    assert DecodeConfig(16, 4, 1).name == "decode_t16_w4_b1"          # the kernel's own: names unchanged
    assert config_from_name("decode_t16_w4_b1_u3") == DecodeConfig(16, 4, 1, unroll=3)
    assert config_from_name("decode_t8_w4_b1_u4") == DecodeConfig(8, 4, 1, unroll=4)
    for bad in (dict(blocks=2, unroll=3), dict(blocks=1, unroll=5), dict(blocks=1, unroll=2)):
        with pytest.raises(SpecError, match="decode unroll"):
            DecodeConfig(16, 4, **bad)
    assert "kUnroll = 3;" in render(GemmSpec("bf16", config=DecodeConfig(16, 4, 1, unroll=3)))
    assert "kUnroll = 4;" in render(GemmSpec("bf16", config=DecodeConfig(8, 4, 1, unroll=4)))
    assert "kUnroll" not in render(GemmSpec("bf16", config=DECODE_TEST_CONFIG))
    with pytest.raises(SpecError, match="int4 one has none"):
        fused_gemm.Int4Spec("bf16", config=DecodeConfig(16, 4, 1, unroll=3))


def test_render_picks_the_decode_kernel():
    src = render(GemmSpec("fp16", epilogue="row_scale+col_scale+bias+silu+residual", config=DecodeConfig(8, 4, 2)))
    assert "fused_gemm/gemv/sm90_dense_decode.hpp" in src and "DenseDecodeLauncher<FgKernel>" in src
    for line in ("kTokens = 8;", "kWarps = 4;", "kBlocks = 2;", "kRowScale = true;", "kColScale = true;",
                 "kResidual = true;", "using Element = cutlass::half_t;", "SiLu<float>"):
        assert line in src, line
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" in src
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in render(GemmSpec("bf16", config=DECODE_TEST_CONFIG, pdl=False))


def test_tuned_tables_and_the_tuner_name_decode_configs():
    config = DecodeConfig(16, 4, 2)
    assert config_from_name(config.name) == config
    entry = Entry("bf16", 4096, 4096, 16, config, LaunchOptions(pdl=True), 1.1)
    assert Entry.from_json(entry.to_json()) == entry
    # A bucket's entry serves every M down to the previous bucket: an 8-token kernel only M = 1.
    for c in tuning_space.SM90_BF16:
        if isinstance(c.config, DecodeConfig):
            assert c.max_m <= c.config.tokens and (c.max_m == 1 or c.config.tokens >= 16)
    assert set(decode_configs()) == {c.config for c in tuning_space.SM90_BF16 if isinstance(c.config, DecodeConfig)}


def test_cli_writes_decode_kernels(tmp_path):
    from fused_gemm.generator.cli import main
    assert main(["codegen", "--decode-tokens", "8", "--epilogue", "bias+silu", "-o", str(tmp_path)]) == 0
    assert main(["codegen", "--dtype", "fp16", "--decode-tokens", "16", "--decode-warps", "8", "--decode-blocks", "2",
                 "--no-pdl", "-o", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.glob("gemm_*.cu"))
    assert names == ["gemm_sm90a_a-bf16_b-bf16_d-bf16_bias-bf16_w-nk_decode_t8_w4_b1_ep-bias-silu.cu",
                     "gemm_sm90a_a-fp16_b-fp16_d-fp16_w-nk_decode_t16_w8_b2_nopdl_ep-none.cu"], names
    assert main(["codegen", "--decode-tokens", "16", "--decode-blocks", "8", "-o", str(tmp_path)]) == 2


def test_rope_ignores_a_tuned_decode_kernel():
    from fused_gemm.generator.gemm.heuristics import Rule
    from fused_gemm.generator.rope import RopeSpec
    from fused_gemm.generator.rope.heuristics import choose
    spec, _ = choose(RopeSpec("bf16", 128), Rule(16, DecodeConfig()), 16)
    assert not isinstance(spec.config, DecodeConfig)


# -- on the GPU ---------------------------------------------------------------------------------------

gpu = pytest.mark.gpu
N, K = 264, 200    # rows past the last 16-row block; K with a tail past the last 64-wide chunk


def _call(op, ep, g, **kw):
    return op(g["x"], g["weight"], g.get("bias"), ep.activation, g.get("residual"), row_scale=g.get("row_scale"),
              col_scale=g.get("col_scale"), **kw)


def _poisoned(m, n, dtype=torch.bfloat16):
    return torch.full((m, n), float("nan"), dtype=dtype, device="cuda")


@gpu
@pytest.mark.parametrize("m", [1, 7, 16])
@pytest.mark.parametrize("epilogue", TEST_EPILOGUES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_every_epilogue_matches_float64(dtype, epilogue, m):
    ep = Epilogue.parse(epilogue)
    op = fused_gemm.compile(GemmSpec(str(dtype).split(".")[1], epilogue=ep, config=DECODE_TEST_CONFIG))
    g = operands(ep, (m,), N, K, dtype)
    got = _call(op, ep, g, out=_poisoned(m, N, dtype), launch=LaunchOptions(pdl=True))
    assert_close(got, reference(ep, **g), dtype)


@gpu
@pytest.mark.parametrize("splits", [1, 2, 3, 8])
@pytest.mark.parametrize("n, k", [(4096, 4096), (1040, 4160), (6144, 4096), (16, 64)])
@pytest.mark.parametrize("config", WIDE_CONFIGS, ids=lambda c: c.name)
def test_configs_and_k_splits(config, n, k, splits):
    """Every tuner candidate and the widest CTA, with the launcher's own K split (splits=1) and forced
    clusters of 2, 3 (uneven shares) and 8 CTAs, on Llama shapes and on ones that leave warps of a
    slice without any K."""
    ep = Epilogue.parse("bias+gelu_tanh")
    op = fused_gemm.compile(GemmSpec("bf16", epilogue=ep, config=config))
    launch = LaunchOptions(splits=splits, pdl=True)
    for m in sorted({1, min(8, config.tokens), config.tokens // 2 + 1, config.tokens}):   # 8: the most tokens on the one-tile path
        g = operands(ep, (m,), n, k, torch.bfloat16)
        got = _call(op, ep, g, out=_poisoned(m, n), launch=launch)
        assert_close(got, reference(ep, **g), torch.bfloat16)


@gpu
def test_fp32_output_and_in_place_residual():
    for out_dtype in (torch.float32, torch.bfloat16):
        ep = Epilogue.parse("bias+residual")
        op = fused_gemm.compile(GemmSpec("bf16", out_dtype=str(out_dtype).split(".")[1], epilogue=ep,
                                         config=DECODE_TEST_CONFIG))
        g = operands(ep, (5,), 512, 1024, torch.bfloat16, out_dtype=out_dtype)
        ref = reference(ep, **g)
        got = op(g["x"], g["weight"], g["bias"], residual=g["residual"], out=g["residual"])   # in place
        assert got is g["residual"]
        assert_close(got, ref, torch.bfloat16)


@gpu
def test_bad_calls_are_refused_before_the_launch():
    op = fused_gemm.compile(GemmSpec("bf16", epilogue="bias+gelu_tanh", config=DecodeConfig(8, 4, 1)))
    x = torch.randn(9, 256, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(128, 256, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(128, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="M = 9 rows .* takes 1 to 8"):
        op(x, w, b)
    for launch in (LaunchOptions(swizzle=4), LaunchOptions(decomposition="split_k", splits=2),
                   LaunchOptions(splits=16)):
        with pytest.raises(ValueError, match="takes launch.pdl and launch.splits"):
            op(x[:8], w, b, launch=launch)


@gpu
def test_pdl_after_a_producer_kernel_and_refused_without_grid_dependency_control():
    ep = Epilogue.parse("bias")
    op = fused_gemm.compile(GemmSpec("bf16", epilogue=ep, config=DECODE_TEST_CONFIG))
    g = operands(ep, (16,), 4096, 4096, torch.bfloat16)
    for _ in range(20):
        g["x"].mul_(-1.0)   # written right before: the decode kernel must wait for it
        assert_close(_call(op, ep, g, launch=LaunchOptions(pdl=True)), reference(ep, **g), torch.bfloat16)
    plain = fused_gemm.compile(GemmSpec("bf16", epilogue=ep, pdl=False, config=DECODE_TEST_CONFIG))
    with pytest.raises(ValueError, match="grid-dependency control"):
        _call(plain, ep, g, launch=LaunchOptions(pdl=True))
    assert_close(_call(plain, ep, g), reference(ep, **g), torch.bfloat16)


@gpu
@pytest.mark.parametrize("n, splits", [(6144, 1), (4096, 1), (3 * 6144, 1), (6144, 4)],
                         ids=["full-grid", "part-grid", "waves", "clusters-in-waves"])
def test_chain_in_a_graph_waits_for_each_input(n, splits):
    """Each decode GEMM reads the one before's output, back to back in a CUDA graph with PDL.  On an
    H100/H200 (132 SMs, 3 CTAs an SM) a grid that fills the GPU (6144 rows) or runs in waves (18432
    rows, or 6144 in clusters of 4) lets the next kernel launch at its start (DecodeOverlap); 4096 rows
    leave slots free and let it launch once their loads are issued: either way each waits for its
    input."""
    op = fused_gemm.compile(GemmSpec("bf16", epilogue="bias", config=DECODE_TEST_CONFIG))
    launch = LaunchOptions(pdl=True, splits=splits)
    layers = [(torch.randn(n, n, dtype=torch.bfloat16, device="cuda") / math.sqrt(n),
               torch.randn(n, dtype=torch.bfloat16, device="cuda") * 0.1) for _ in range(4)]
    x = torch.randn(2, n, dtype=torch.bfloat16, device="cuda")
    outs = [torch.empty(2, n, dtype=torch.bfloat16, device="cuda") for _ in layers]

    def chain():
        h = x
        for (w, b), out in zip(layers, outs):
            h = op(h, w, b, out=out, launch=launch)

    graph = captured(chain)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        for out in outs:
            out.fill_(float("nan"))
        graph.replay()
        h = x
        for (w, b), out in zip(layers, outs):   # each layer against float64 of the output it was given
            assert_close(out, h.double() @ w.double().T + b.double(), torch.bfloat16)
            h = out


@gpu
def test_cuda_graph_capture_and_replay():
    ep = Epilogue.parse("bias+silu")
    op = fused_gemm.compile(GemmSpec("bf16", epilogue=ep, config=DECODE_TEST_CONFIG))
    g = operands(ep, (3,), 1024, 2048, torch.bfloat16)
    out = torch.empty(3, 1024, dtype=torch.bfloat16, device="cuda")
    launch = LaunchOptions(pdl=True)
    graph = captured(lambda: _call(op, ep, g, out=out, launch=launch))
    for _ in range(3):
        g["x"].copy_(torch.randn_like(g["x"]))
        out.fill_(float("nan"))
        graph.replay()
        assert_close(out, reference(ep, **g), torch.bfloat16)


@gpu
def test_large_weight_streams_whole():
    """A 28672 x 4096 weight (Llama-3-8B's gate/up): every row and every K chunk lands."""
    op = fused_gemm.compile(GemmSpec("bf16", epilogue="bias+gelu_tanh", config=DECODE_TEST_CONFIG))
    x = torch.randn(16, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(28672, 4096, dtype=torch.bfloat16, device="cuda") / math.sqrt(4096)
    b = torch.randn(28672, dtype=torch.bfloat16, device="cuda")
    got = op(x, w, b, "gelu_tanh", out=_poisoned(16, 28672), launch=LaunchOptions(pdl=True))
    ref = torch.nn.functional.gelu(x.double() @ w.double().T + b.double(), approximate="tanh")
    assert_close(got, ref, torch.bfloat16)


@gpu
def test_linear_and_qkv_rope_follow_a_tuned_decode_entry(tuned_table):
    """A tuned table that names the decode kernel for (N, K, M bucket): linear runs it, with the entry's
    launch options, for every M of the bucket; qkv_rope on the same shape keeps its own kernel."""
    from fused_gemm.gemm import linear as linear_mod
    from fused_gemm.generator.gemm import tuned
    launch = LaunchOptions(splits=2, pdl=True)
    tuned_table(tuned.Entry("bf16", 6144, 4096, 16, DECODE_TEST_CONFIG, launch))
    ep = Epilogue.parse("bias+gelu_tanh")
    for m in (2, 16):
        g = operands(ep, (m,), 6144, 4096, torch.bfloat16)
        op, got = linear_mod.select(g["x"], g["bias"], "gelu_tanh", None, None, None, torch.bfloat16, m, 6144, 4096)
        assert op.spec.config == DECODE_TEST_CONFIG and got == launch
        out = fused_gemm.linear(g["x"], g["weight"], g["bias"], "gelu_tanh", out=_poisoned(m, 6144))
        assert_close(out, reference(ep, **g), torch.bfloat16)
    w = torch.randn(6144, 4096, dtype=torch.bfloat16, device="cuda") / 64
    packed = fused_gemm.pack_qkv_rope(w, num_heads=32, num_kv_heads=8, head_dim=128)
    cache = fused_gemm.rope_cos_sin_cache(4096, 128, device="cuda")
    q, k, v = fused_gemm.qkv_rope(g["x"], packed, positions=torch.arange(16, device="cuda"), cos_sin_cache=cache)
    assert q.shape == (16, 32, 128) and not torch.isnan(q).any()
