"""Correctness on an sm_90 GPU against a float64 reference (skipped without one)."""
import math

import pytest
import torch
import torch.nn.functional as F

import fused_gemm
from fused_gemm.generator import Epilogue
from fused_gemm.presets import TEST_EPILOGUES

pytestmark = pytest.mark.gpu

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-4}
ACT = {
    "identity": lambda t: t, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "sigmoid": torch.sigmoid,
}
M_VALUES = [1, 7, 64, 129, 1000, 4096]
N, K = 264, 200   # multiples of 8 that fill no tile evenly


def operands(ep: Epilogue, lead, n, k, dtype, out_dtype=None):
    """Fresh random operands for ``ep`` (never zeros)."""
    g = {}
    g["x"] = torch.randn(*lead, k, dtype=dtype, device="cuda")
    g["weight"] = torch.randn(n, k, dtype=dtype, device="cuda") / math.sqrt(k)
    m = math.prod(lead)
    if ep.bias:
        g["bias"] = torch.randn(n, dtype=dtype, device="cuda")
    if ep.residual:
        g["residual"] = torch.randn(*lead, n, dtype=out_dtype or dtype, device="cuda")
    if ep.row_scale:
        g["row_scale"] = torch.rand(m, device="cuda") + 0.5
    if ep.col_scale:
        g["col_scale"] = torch.rand(n, device="cuda") + 0.5
    return g


def reference(ep: Epilogue, x, weight, bias=None, residual=None, row_scale=None, col_scale=None,
              alpha=1.0, beta=1.0):
    k = x.shape[-1]
    acc = x.reshape(-1, k).double() @ weight.double().T
    if row_scale is not None:
        acc = acc * row_scale.double()[:, None]
    if col_scale is not None:
        acc = acc * col_scale.double()[None, :]
    acc = alpha * acc
    if bias is not None:
        acc = acc + bias.double()
    acc = ACT[ep.activation](acc)
    if residual is not None:
        acc = acc + beta * residual.reshape(acc.shape).double()
    return acc.reshape(*x.shape[:-1], weight.shape[0])


def assert_close(got, ref, dtype):
    assert not torch.isnan(got).any(), "some output elements were never written (NaN poison survived)"
    err = ((got.double() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"relative error {err:.2e} > {TOL[dtype]:.0e}"


def call_linear(ep: Epilogue, g, **kw):
    return fused_gemm.linear(g["x"], g["weight"], g.get("bias"), ep.activation, g.get("residual"),
                             row_scale=g.get("row_scale"), col_scale=g.get("col_scale"), **kw)


@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("epilogue", TEST_EPILOGUES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_every_epilogue_matches_float64(dtype, epilogue, m):
    ep = Epilogue.parse(epilogue)
    g = operands(ep, (m,), N, K, dtype)
    alpha, beta = 0.75, 0.5
    out = torch.full((m, N), float("nan"), dtype=dtype, device="cuda")
    got = call_linear(ep, g, alpha=alpha, beta=beta, out=out)
    assert got is out
    assert_close(got, reference(ep, **g, alpha=alpha, beta=beta), dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_leading_batch_dims(dtype):
    ep = Epilogue.parse("bias+gelu_tanh+residual")
    g = operands(ep, (2, 3, 5), N, K, dtype)
    got = call_linear(ep, g)
    assert got.shape == (2, 3, 5, N)
    assert_close(got, reference(ep, **g), dtype)


@pytest.mark.parametrize("m", [7, 129])
def test_in_place_residual(m):
    ep = Epilogue.parse("bias+residual")
    g = operands(ep, (m,), N, K, torch.bfloat16)
    ref = reference(ep, **g)
    res = g["residual"]
    got = call_linear(ep, g, out=res)
    assert got is res
    assert_close(got, ref, torch.bfloat16)


@pytest.mark.parametrize("m", [1, 129])
def test_fp32_output(m):
    ep = Epilogue.parse("bias+residual")
    g = operands(ep, (m,), N, K, torch.bfloat16, out_dtype=torch.float32)
    out = torch.full((m, N), float("nan"), dtype=torch.float32, device="cuda")
    got = call_linear(ep, g, out=out)
    assert_close(got, reference(ep, **g), torch.bfloat16)


@pytest.mark.parametrize("m", [1, 16, 1000])
def test_cuda_graph_capture_and_replay(m):
    ep = Epilogue.parse("bias+silu")
    g = operands(ep, (m,), 1024, 512, torch.bfloat16)
    out = torch.empty(m, 1024, dtype=torch.bfloat16, device="cuda")
    call_linear(ep, g, out=out)                     # warm-up: build, load, workspace
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call_linear(ep, g, out=out)
    for _ in range(2):                              # new data each replay, same buffers
        for t in g.values():
            t.copy_(torch.randn_like(t))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(ep, **g), torch.bfloat16)


STREAM_K = fused_gemm.TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)


@pytest.mark.parametrize("launch", [
    fused_gemm.LaunchOptions(),
    fused_gemm.LaunchOptions(splits=3),
    fused_gemm.LaunchOptions(splits=4, reduction="nondeterministic", pdl=True),
    fused_gemm.LaunchOptions(decomposition="stream_k", swizzle=2, raster="along_n"),
    fused_gemm.LaunchOptions(decomposition="data_parallel", pdl=True),
], ids=["default", "split3", "split4-nondet-pdl", "streamk-swizzle", "dp-pdl"])
def test_stream_k_launch_options(launch):
    spec = fused_gemm.GemmSpec("bf16", epilogue="bias+gelu_tanh", config=STREAM_K)
    op = fused_gemm.compile(spec)
    ep = spec.epilogue
    g = operands(ep, (3,), 4096, 4096, torch.bfloat16)
    got = op(g["x"], g["weight"], g["bias"], launch=launch)
    assert_close(got, reference(ep, **g), torch.bfloat16)


def test_pdl_launch_after_a_producer_kernel():
    """With PDL the GEMM may start before the kernel that wrote x ends: it must still read the new x."""
    ep = Epilogue.parse("bias")
    g = operands(ep, (8,), 4096, 4096, torch.bfloat16)
    for _ in range(20):
        g["x"].mul_(-1.0)                                       # the producer kernel, right before
        got = call_linear(ep, g)
        assert_close(got, reference(ep, **g), torch.bfloat16)


def test_kn_weight_layout():
    spec = fused_gemm.GemmSpec("fp16", b_layout="kn", epilogue="bias+relu")
    op = fused_gemm.compile(spec)
    ep = spec.epilogue
    g = operands(ep, (129,), N, K, torch.float16)
    got = op(g["x"], g["weight"].t().contiguous(), g["bias"])
    assert_close(got, reference(ep, **g), torch.float16)


class TestBadInputOnGpu:
    """Each mistake raises TypeError/ValueError naming the argument, before any launch."""

    def setup_method(self):
        self.x = torch.randn(16, 64, dtype=torch.bfloat16, device="cuda")
        self.w = torch.randn(128, 64, dtype=torch.bfloat16, device="cuda")
        self.b = torch.randn(128, dtype=torch.bfloat16, device="cuda")

    def test_dtype(self):
        with pytest.raises(TypeError, match="weight"):
            fused_gemm.linear(self.x, self.w.half(), self.b)
        with pytest.raises(TypeError, match="bias"):
            fused_gemm.linear(self.x, self.w, self.b.to(torch.int32))
        with pytest.raises(TypeError, match="x"):
            fused_gemm.linear(self.x.float(), self.w.float(), self.b)

    def test_device(self):
        with pytest.raises(ValueError, match="weight"):
            fused_gemm.linear(self.x, self.w.cpu(), self.b)

    def test_shape(self):
        with pytest.raises(ValueError, match="weight"):
            fused_gemm.linear(self.x, self.w[:, :56], self.b)
        with pytest.raises(ValueError, match="bias"):
            fused_gemm.linear(self.x, self.w, self.b[:64])
        with pytest.raises(ValueError, match="residual"):
            fused_gemm.linear(self.x, self.w, self.b, residual=torch.randn(16, 64, dtype=torch.bfloat16, device="cuda"))

    def test_stride_and_alignment(self):
        with pytest.raises(ValueError, match="weight"):
            fused_gemm.linear(self.x, self.w.t().contiguous().t(), self.b)   # column-major weight
        x_odd = torch.randn(16, 72, dtype=torch.bfloat16, device="cuda")[:, 1:65]
        with pytest.raises(ValueError, match="x"):
            fused_gemm.linear(x_odd, self.w, self.b)                           # misaligned pointer
        with pytest.raises(ValueError, match="x"):
            fused_gemm.linear(torch.randn(16, 60, dtype=torch.bfloat16, device="cuda"),
                              torch.randn(128, 60, dtype=torch.bfloat16, device="cuda"), self.b)  # K % 8

    def test_out(self):
        with pytest.raises(TypeError, match="out"):
            fused_gemm.linear(self.x, self.w, self.b, out=torch.empty(16, 128, dtype=torch.int32, device="cuda"))
        with pytest.raises(ValueError, match="out"):
            fused_gemm.linear(self.x, self.w, self.b, out=torch.empty(16, 64, dtype=torch.bfloat16, device="cuda"))

    def test_epilogue_mismatch_on_compiled_op(self):
        op = fused_gemm.compile(fused_gemm.presets.linear_specs("bf16", "bias+gelu_tanh")[0])
        with pytest.raises(ValueError, match="bias is required"):
            op(self.x, self.w)
        with pytest.raises(ValueError, match="residual"):
            op(self.x, self.w, self.b, residual=self.x)

    def test_activation_name(self):
        with pytest.raises(ValueError, match="activation"):
            fused_gemm.linear(self.x, self.w, self.b, activation="swish")
