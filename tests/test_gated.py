"""The gated family (SwiGLU/GeGLU) on an sm_90 GPU against a float64 reference (skipped without one)."""
import math
import warnings

import pytest
import torch

import fused_gemm
import fused_gemm.gated.api
from fused_gemm import gated_linear, pack_gate_up, unpack_gate_up
from test_gpu import ACT, TOL, assert_close

pytestmark = pytest.mark.gpu

M_VALUES = [1, 7, 16, 17, 64, 65, 129, 513, 2049, 8193]   # every row of the heuristics table
I, K = 1000, 392      # 2I = 2000 fills no 64/128-row tile evenly; K not a multiple of the tile K


def weights(i, k, dtype, bias=False):
    w_gate = torch.randn(i, k, dtype=dtype, device="cuda") / math.sqrt(k)
    w_up = torch.randn(i, k, dtype=dtype, device="cuda") / math.sqrt(k)
    b = (torch.randn(i, dtype=dtype, device="cuda"), torch.randn(i, dtype=dtype, device="cuda")) if bias else (None, None)
    return w_gate, w_up, b


def reference(x, w_gate, w_up, activation, bias_gate=None, bias_up=None, residual=None, alpha=1.0, beta=1.0):
    k = x.shape[-1]
    xd = x.reshape(-1, k).double()
    gate = alpha * (xd @ w_gate.double().T)
    up = alpha * (xd @ w_up.double().T)
    if bias_gate is not None:
        gate = gate + bias_gate.double()
    if bias_up is not None:
        up = up + bias_up.double()
    out = ACT[activation](gate) * up
    if residual is not None:
        out = out + beta * residual.reshape(out.shape).double()
    return out.reshape(*x.shape[:-1], w_gate.shape[0])


@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gated_matches_float64(dtype, activation, m):
    w_gate, w_up, _ = weights(I, K, dtype)
    packed = pack_gate_up(w_gate, w_up)
    x = torch.randn(m, K, dtype=dtype, device="cuda")
    out = torch.full((m, I), float("nan"), dtype=dtype, device="cuda")
    got = gated_linear(x, packed, activation=activation, out=out)
    assert got is out
    assert_close(got, reference(x, w_gate, w_up, activation), dtype)
    fresh = gated_linear(x, packed, activation=activation)     # allocated output, same values
    assert fresh.shape == (m, I) and fresh.dtype == dtype
    assert torch.equal(fresh, got)


@pytest.mark.parametrize("m", [1, 16, 129, 4095, 8193])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gated_bias_residual_alpha_beta(dtype, m):
    w_gate, w_up, (bg, bu) = weights(I, K, dtype, bias=True)
    packed = pack_gate_up(w_gate, w_up)
    x = torch.randn(m, K, dtype=dtype, device="cuda")
    res = torch.randn(m, I, dtype=dtype, device="cuda")
    out = torch.full((m, I), float("nan"), dtype=dtype, device="cuda")
    got = gated_linear(x, packed, None, "silu", bg, bu, res, alpha=0.5, beta=0.25, out=out)
    assert_close(got, reference(x, w_gate, w_up, "silu", bg, bu, res, 0.5, 0.25), dtype)
    # one bias only, the other absent at run time
    got = gated_linear(x, packed, None, "silu", None, bu, res)
    assert_close(got, reference(x, w_gate, w_up, "silu", None, bu, res), dtype)
    # in place: out is the residual
    ref = reference(x, w_gate, w_up, "silu", bg, bu, res)
    assert gated_linear(x, packed, None, "silu", bg, bu, res, out=res) is res
    assert_close(res, ref, dtype)


@pytest.mark.parametrize("m", [1, 129])
def test_gated_fp32_output_and_3d_input(m):
    w_gate, w_up, _ = weights(I, K, torch.bfloat16)
    packed = pack_gate_up(w_gate, w_up)
    x = torch.randn(2, m, K, dtype=torch.bfloat16, device="cuda")
    got = gated_linear(x, packed, out_dtype=torch.float32)
    assert got.shape == (2, m, I) and got.dtype == torch.float32
    assert_close(got, reference(x, w_gate, w_up, "silu"), torch.bfloat16)
    xs = torch.randn(m, 2 * K, dtype=torch.bfloat16, device="cuda")[:, :K]     # strided rows
    assert_close(gated_linear(xs, packed, out_dtype=torch.float32), reference(xs, w_gate, w_up, "silu"),
                 torch.bfloat16)


def test_llama_shapes_and_unpacked_weights(monkeypatch):
    """Llama-3-8B's MLP sizes (I = 14336, K = 4096) at decode and prefill M; separate weights are
    packed per call with a warning."""
    w_gate, w_up, _ = weights(14336, 4096, torch.bfloat16)
    packed = pack_gate_up(w_gate, w_up)
    for m in (1, 16, 1024):
        x = torch.randn(m, 4096, dtype=torch.bfloat16, device="cuda")
        assert_close(gated_linear(x, packed), reference(x, w_gate, w_up, "silu"), torch.bfloat16)
    monkeypatch.setattr(fused_gemm.gated.api, "_warned_unpacked", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = gated_linear(x, w_gate, w_up)
    assert torch.equal(got, gated_linear(x, packed))
    assert any("pack_gate_up" in str(w.message) for w in caught)


def test_gated_in_cuda_graph():
    w_gate, w_up, _ = weights(I, K, torch.bfloat16)
    packed = pack_gate_up(w_gate, w_up)
    x = torch.randn(4, K, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(4, I, dtype=torch.bfloat16, device="cuda")
    gated_linear(x, packed, out=out)                  # builds, loads and prepares outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gated_linear(x, packed, out=out)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(x, w_gate, w_up, "silu"), torch.bfloat16)


def test_gated_under_torch_compile_fullgraph():
    w_gate, w_up, _ = weights(I, K, torch.bfloat16)
    packed = pack_gate_up(w_gate, w_up)

    def mlp(x):
        return gated_linear(x, packed, activation="silu") * 2.0

    compiled = torch.compile(mlp, fullgraph=True)
    with torch.no_grad():
        for m in (7, 129):
            x = torch.randn(m, K, dtype=torch.bfloat16, device="cuda")
            assert torch.equal(compiled(x), mlp(x))


def test_gated_bad_inputs_raise_before_launch():
    w_gate, w_up, (bg, bu) = weights(I, K, torch.bfloat16, bias=True)
    packed = pack_gate_up(w_gate, w_up)
    x = torch.randn(3, K, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="x's K"):
        gated_linear(x[:, :-8], packed)
    with pytest.raises(ValueError, match="pack_gate_up"):
        gated_linear(x, packed[:-8])
    with pytest.raises(TypeError, match="weight has dtype"):
        gated_linear(x, packed.half())
    with pytest.raises(ValueError, match="bias_gate has shape"):
        gated_linear(x, packed, None, "silu", bg[:-8], bu)
    with pytest.raises(ValueError, match="activation"):
        gated_linear(x, packed, activation="tanh")
    with pytest.raises(ValueError, match="residual has shape"):
        gated_linear(x, packed, None, "silu", bg, bu, torch.randn(3, I - 8, dtype=torch.bfloat16, device="cuda"))
    with pytest.raises(ValueError, match="out overlaps x"):
        buf = torch.empty(3 * (K + I), dtype=torch.bfloat16, device="cuda")
        gated_linear(buf[: 3 * K].view(3, K), packed, out=buf[3 * K - 8: 3 * K - 8 + 3 * I].view(3, I))
    with pytest.raises(ValueError, match="multiple of 8"):
        pack_gate_up(w_gate[:-4], w_up[:-4])
    with pytest.raises(RuntimeError, match="requires grad"):
        gated_linear(x.clone().requires_grad_(), packed)


@pytest.mark.parametrize("m", [1, 7, 129, 4095])
@pytest.mark.parametrize("kwargs", [dict(dtype="bf16"), dict(dtype="fp16", activation="gelu_tanh"),
                                    dict(dtype="bf16", bias=True, residual=True), dict(dtype="bf16", out_dtype="fp32")],
                         ids=["bf16", "fp16-gelu_tanh", "bias-residual", "fp32"])
def test_vector_store_matches_float64(kwargs, m):
    """The 16-byte-store epilogue (a transpose within each quad) on every prefill tile it serves (the ones
    gated_linear picks, in the gated-tests preset); 2I = 2000 leaves the last tile with one of its second
    group's four blocks."""
    from fused_gemm.generator import GatedSpec
    from fused_gemm.generator.gated.presets import PRESETS
    specs = [s for s in PRESETS["gated-tests"]() if s.vector_store and
             s == GatedSpec(**kwargs, config=s.config, vector_store=True)]
    assert specs
    for spec in specs:
        op = fused_gemm.compile(spec)
        dtype = getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[spec.dtype])
        out_dtype = torch.float32 if spec.out_dtype == "fp32" else dtype
        w_gate, w_up, (bg, bu) = weights(I, K, dtype, bias=spec.bias)
        x = torch.randn(m, K, dtype=dtype, device="cuda")
        res = torch.randn(m, I, dtype=out_dtype, device="cuda") if spec.residual else None
        out = torch.full((m, I), float("nan"), dtype=out_dtype, device="cuda")
        got = op(x, pack_gate_up(w_gate, w_up), bg, bu, res, alpha=0.5, beta=0.25, out=out)
        ref = reference(x, w_gate, w_up, spec.activation, bg, bu, res, 0.5, 0.25)
        assert_close(got, ref, dtype)


def test_unpack_inverts_pack():
    w_gate, w_up, _ = weights(64, 32, torch.bfloat16)
    g, u = unpack_gate_up(pack_gate_up(w_gate, w_up))
    assert torch.equal(g, w_gate) and torch.equal(u, w_up)
