"""Correctness on an sm_90 GPU against a float64 reference (skipped without one)."""
import math
import threading

import pytest
import torch
import torch.nn.functional as F

import fused_gemm
from fused_gemm import jit
from fused_gemm.generator import Epilogue
from fused_gemm.generator.gemm.presets import (EXTENDED_WGMMA_TEST_CONFIGS, EXTENDED_WGMMA_TEST_EPILOGUE,
                                              SPLIT_K_PARALLEL_TEST_CASES, SPLIT_K_TEST_CONFIG, STREAM_K,
                                              TEST_EPILOGUES)

pytestmark = pytest.mark.gpu

TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-4}
ACT = {
    "identity": lambda t: t, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "sigmoid": torch.sigmoid,
}
M_VALUES = [1, 7, 64, 129, 1000, 4095]
N, K = 264, 200   # multiples of 8 that fill no tile evenly


def operands(ep: Epilogue, lead, n, k, dtype, out_dtype=None):
    """Fresh random operands for ``ep`` (never zeros)."""
    g = {}
    g["x"] = torch.randn(*lead, k, dtype=dtype, device="cuda")
    g["weight"] = torch.randn(n, k, dtype=dtype, device="cuda") / math.sqrt(max(k, 1))
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


@pytest.mark.parametrize("config", EXTENDED_WGMMA_TEST_CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_tiles_on_extended_wgmma_shapes_match_float64(dtype, config):
    """80-, 112-, 144- and 224-wide tiles (one wgmma that wide a k-step) with row and column scales, bias,
    activation, residual, alpha and beta, at odd M and an N that ends in a partial tile; outputs NaN-poisoned
    first."""
    from fused_gemm.generator import GemmSpec
    ep = Epilogue.parse(EXTENDED_WGMMA_TEST_EPILOGUE)
    op = fused_gemm.compile(GemmSpec({torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype], epilogue=ep,
                                     config=config))
    n = 4 * config.tile[1] + 8
    for m in (1, 7, 129, 255):
        g = operands(ep, (m,), n, 520, dtype)
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        op(g["x"], g["weight"], g.get("bias"), ep.activation, g.get("residual"), alpha=0.75, beta=-0.5,
           row_scale=g.get("row_scale"), col_scale=g.get("col_scale"), out=out)
        assert_close(out, reference(ep, **g, alpha=0.75, beta=-0.5), dtype)


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
def test_fp32_output_by_out_and_by_out_dtype(m):
    ep = Epilogue.parse("bias+residual")
    g = operands(ep, (m,), N, K, torch.bfloat16, out_dtype=torch.float32)
    out = torch.full((m, N), float("nan"), dtype=torch.float32, device="cuda")
    assert_close(call_linear(ep, g, out=out), reference(ep, **g), torch.bfloat16)
    got = fused_gemm.linear(g["x"], g["weight"], out_dtype=torch.float32)
    assert got.dtype == torch.float32
    assert_close(got, reference(Epilogue(), g["x"], g["weight"]), torch.bfloat16)


def test_linear_and_compiled_op_take_the_same_arguments():
    ep = Epilogue.parse("bias+gelu_tanh+residual")
    g = operands(ep, (9,), N, K, torch.bfloat16)
    spec = fused_gemm.GemmSpec("bf16", epilogue=ep)
    op = fused_gemm.compile(spec)
    args = (g["x"], g["weight"], g["bias"], "gelu_tanh", g["residual"])
    a = fused_gemm.linear(*args, alpha=0.5, beta=2.0)
    b = op(*args, alpha=0.5, beta=2.0)
    ref = reference(ep, **g, alpha=0.5, beta=2.0)
    assert_close(a, ref, torch.bfloat16)
    assert_close(b, ref, torch.bfloat16)
    with pytest.raises(ValueError, match="activation"):
        op(g["x"], g["weight"], g["bias"], "silu", g["residual"])


def test_the_torch_ops_match_the_eager_path():
    ep = Epilogue.parse("bias+silu")
    g = operands(ep, (33,), N, K, torch.bfloat16)
    ref = reference(ep, **g)
    assert_close(torch.ops.fused_gemm.linear(g["x"], g["weight"], g["bias"], "silu", None, 1.0, 1.0, None, None,
                                             None), ref, torch.bfloat16)
    out = torch.full((33, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    torch.ops.fused_gemm.linear_out(g["x"], g["weight"], g["bias"], "silu", None, 1.0, 1.0, None, None, out)
    assert_close(out, ref, torch.bfloat16)
    op = fused_gemm.compile(fused_gemm.GemmSpec("bf16", epilogue=ep))
    got = torch.ops.fused_gemm.gemm(op.spec.uri, list(fused_gemm.LaunchOptions().abi), g["x"], g["weight"],
                                    g["bias"], None, 1.0, 1.0, None, None, None)
    assert_close(got, ref, torch.bfloat16)


class MLP(torch.nn.Module):
    """Up-projection with SiLU, down-projection added in place onto a residual, and an fp32 head."""

    def __init__(self, d=256, hidden=512):
        super().__init__()
        self.up = torch.nn.Linear(d, hidden, dtype=torch.bfloat16, device="cuda")
        self.down = torch.nn.Linear(hidden, d, dtype=torch.bfloat16, device="cuda")
        self.head = torch.nn.Linear(d, 128, bias=False, dtype=torch.bfloat16, device="cuda")

    def forward(self, x):
        h = fused_gemm.linear(x, self.up.weight, self.up.bias, "silu")
        r = x.clone()
        fused_gemm.linear(h, self.down.weight, self.down.bias, residual=r, out=r)   # a declared mutation
        return r, fused_gemm.linear(r, self.head.weight, out_dtype=torch.float32)

    def reference(self, x):
        h = F.silu(F.linear(x.double(), self.up.weight.double(), self.up.bias.double()))
        r = x.double() + F.linear(h, self.down.weight.double(), self.down.bias.double())
        return r, F.linear(r, self.head.weight.double())


@pytest.mark.parametrize("m", [7, 129])
def test_torch_compile_fullgraph_has_no_graph_break(m):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = MLP()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(m, 256, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        eager = model(x)
        got = compiled(x)
    assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])
    for e, c in zip(eager, got):
        assert c.shape == e.shape and c.dtype == e.dtype
        torch.testing.assert_close(c, e, rtol=1e-2, atol=1e-2)
    for c, ref in zip(got, model.reference(x)):
        assert_close(c, ref, torch.bfloat16)


def test_torch_export_keeps_one_op_per_call():
    model = MLP()
    x = torch.randn(16, 256, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        exported = torch.export.export(model, (x,))
        code = exported.graph_module.code
        assert code.count("fused_gemm.linear.default") == 2 and "fused_gemm.linear_out.default" in code, code
        assert "aten.mm" not in code and "aten.addmm" not in code, code
        got = exported.module()(x)
    for c, ref in zip(got, model.reference(x)):
        assert_close(c, ref, torch.bfloat16)


def test_inputs_that_require_grad_are_refused():
    model = MLP()
    x = torch.randn(4, 256, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(RuntimeError, match="requires grad"):
        model(x)                                   # nn.Parameter weights, grad mode on
    with pytest.raises(RuntimeError, match="requires grad"):
        torch.ops.fused_gemm.linear(x, model.up.weight, None, None, None, 1.0, 1.0, None, None, None)
    with torch.inference_mode():
        model(x)
    with torch.no_grad():
        model(x.requires_grad_())


@pytest.mark.parametrize("m", [1, 16, 1000])
def test_cuda_graph_capture_and_replay(m):
    ep = Epilogue.parse("bias+silu")
    g = operands(ep, (m,), 1024, 512, torch.bfloat16)
    out = torch.empty(m, 1024, dtype=torch.bfloat16, device="cuda")
    call_linear(ep, g, out=out)                     # warm-up: build, load, prepare
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call_linear(ep, g, out=out)
    replay_with_fresh_data(graph, ep, g, out, times=2)


def replay_with_fresh_data(graph, ep, g, out, times):
    """New random inputs in the captured buffers, poisoned output, replay, check."""
    for _ in range(times):
        for t in g.values():
            t.copy_(torch.randn_like(t))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(ep, **g), torch.bfloat16)


def _fresh_op(spec):
    """The op of a built spec as a process that never called it would see it (not loaded, not prepared)."""
    jit._ops.pop(spec, None)
    return spec


def test_first_call_inside_capture_raises_and_warmup_fixes_it():
    spec = _fresh_op(fused_gemm.GemmSpec("bf16", epilogue="bias", config=STREAM_K))
    ep = spec.epilogue
    g = operands(ep, (5,), 512, 256, torch.bfloat16)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(fused_gemm.KernelNotReadyError, match=r"fused_gemm\.warmup\(.*fused-gemm build --uri"):
        with torch.cuda.graph(graph):
            fused_gemm.compile(spec)
    op, = fused_gemm.warmup(spec.uri)
    out = torch.full((5, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(g["x"], g["weight"], g["bias"], out=out)
    graph.replay()
    torch.cuda.synchronize()
    assert_close(out, reference(ep, **g), torch.bfloat16)


def test_unprepared_op_inside_capture_raises():
    spec = fused_gemm.GemmSpec("bf16", epilogue="bias", config=STREAM_K)
    op = fused_gemm.compile(spec)
    fresh = type(op)(spec, op.library)              # never called: not prepared on any device
    g = operands(spec.epilogue, (5,), 512, 256, torch.bfloat16)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(fused_gemm.KernelNotReadyError, match="inside a CUDA-graph capture"):
        with torch.cuda.graph(graph):
            fresh(g["x"], g["weight"], g["bias"])


SK = fused_gemm.GemmSpec("bf16", epilogue="bias", config=STREAM_K)
SK_LAUNCHES = [fused_gemm.LaunchOptions(), fused_gemm.LaunchOptions(decomposition="split_k", splits=4),
               fused_gemm.LaunchOptions(decomposition="stream_k", reduction="nondeterministic")]


def test_stream_k_on_many_streams_from_many_threads():
    """Concurrent stream-K launches on 6 streams from 6 threads: each has its own workspace."""
    op = fused_gemm.compile(SK)
    ep = SK.epilogue
    errors, barrier = [], threading.Barrier(6, timeout=120)

    def worker(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                sets = [operands(ep, (1 + 3 * i,), 2048 + 256 * i, 4096, torch.bfloat16) for _ in range(3)]
                barrier.wait()
                outs = [op(sets[j % 3]["x"], sets[j % 3]["weight"], sets[j % 3]["bias"],
                           launch=SK_LAUNCHES[(i + j) % 3]) for j in range(12)]
                stream.synchronize()
                for j, got in enumerate(outs):
                    assert_close(got, reference(ep, **sets[j % 3]), torch.bfloat16)
        except Exception as exc:  # noqa: BLE001 - reported below with the thread's index
            errors.append(f"thread {i}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_graph_captured_before_the_workspace_grows_still_replays():
    op = fused_gemm.compile(SK)
    ep = SK.epilogue
    small = operands(ep, (3,), 1024, 1024, torch.bfloat16)
    out = torch.empty(3, 1024, dtype=torch.bfloat16, device="cuda")
    launch = SK_LAUNCHES[1]
    op(small["x"], small["weight"], small["bias"], out=out, launch=launch)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(small["x"], small["weight"], small["bias"], out=out, launch=launch)
    for n, k in ((8192, 8192), (16384, 4096)):           # much larger workspaces, allocated and freed
        big = operands(ep, (16,), n, k, torch.bfloat16)
        assert_close(op(big["x"], big["weight"], big["bias"], launch=launch), reference(ep, **big), torch.bfloat16)
        torch.cuda.empty_cache()
    replay_with_fresh_data(graph, ep, small, out, times=3)


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


@pytest.mark.parametrize("m", [1, 7, 129, 255])
def test_split_reduction_matches_float64_and_is_deterministic(m):
    """Split-K and stream-K on the tables' split-K tile: 2-8 splits and stream-K, both reduction modes,
    partial tiles in M, N and K (1344 x 8000 on 128 x 64 x 128 tiles); outputs NaN-poisoned first.  The
    deterministic reduction (the default) gives the same bits on every call."""
    spec = fused_gemm.GemmSpec("bf16", epilogue="bias+gelu_tanh", config=SPLIT_K_TEST_CONFIG)
    op = fused_gemm.compile(spec)
    ep = spec.epilogue
    g = operands(ep, (m,), 1344, 8000, torch.bfloat16)
    ref = reference(ep, **g)
    for reduction in ("deterministic", "nondeterministic"):
        launches = [fused_gemm.LaunchOptions(splits=s, decomposition="split_k", reduction=reduction, pdl=True)
                    for s in (2, 3, 5, 8)] + [fused_gemm.LaunchOptions(decomposition="stream_k", reduction=reduction)]
        for launch in launches:
            outs = []
            for _ in range(3 if reduction == "deterministic" else 1):
                out = torch.full((m, 1344), float("nan"), dtype=torch.bfloat16, device="cuda")
                op(g["x"], g["weight"], g["bias"], out=out, launch=launch)
                outs.append(out)
            assert_close(outs[0], ref, torch.bfloat16)
            for again in outs[1:]:
                assert torch.equal(again, outs[0]), f"{launch.label}: two calls differ"


@pytest.mark.parametrize("case", SPLIT_K_PARALLEL_TEST_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2].name}")
def test_split_k_parallel_matches_float64_and_is_deterministic(case):
    """K slices into fp32 partials and the reduction kernel's epilogue (row and column scales, bias, activation,
    residual, alpha, beta) at odd M, an N that ends in a partial tile, slices that end in a partial k-tile
    (K = 2568: 3 slices of 856) and whole ones (K = 4096 in 2, 8 and 16), the automatic count (splits=1);
    outputs NaN-poisoned first, the same bits on a second call, in place over the residual, and replayed in a
    CUDA graph."""
    from fused_gemm.generator import GemmSpec
    dtype_name, layout, config = case
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    ep = Epilogue.parse(EXTENDED_WGMMA_TEST_EPILOGUE)
    op = fused_gemm.compile(GemmSpec(dtype_name, b_layout=layout, epilogue=ep, config=config))
    as_weight = (lambda w: w) if layout == "nk" else (lambda w: w.t().contiguous())   # [N, K] or [K, N]
    n = 1288
    for k, splits in ((2568, (1, 3)), (4096, (1, 2, 8, 16))):
        for m in (1, 7, 129, 255):
            g = operands(ep, (m,), n, k, dtype)
            ref = reference(ep, **g, alpha=0.75, beta=-0.5)
            weight = as_weight(g["weight"])
            for s in splits:
                launch = fused_gemm.LaunchOptions(splits=s, pdl=True)
                outs = []
                for _ in range(2):
                    out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
                    op(g["x"], weight, g["bias"], ep.activation, g["residual"], alpha=0.75, beta=-0.5,
                       row_scale=g["row_scale"], col_scale=g["col_scale"], out=out, launch=launch)
                    outs.append(out)
                assert_close(outs[0], ref, dtype)
                assert torch.equal(outs[0], outs[1]), f"splits={s}: two calls differ"
    # in place over the residual, inside a CUDA graph
    g = operands(ep, (7,), n, 4096, dtype)
    ref = reference(ep, **g, alpha=0.75, beta=-0.5)
    res = g["residual"].clone()
    launch = fused_gemm.LaunchOptions(splits=8, pdl=True)
    graph = torch.cuda.CUDAGraph()
    weight = as_weight(g["weight"])
    with torch.cuda.graph(graph):
        op(g["x"], weight, g["bias"], ep.activation, res, alpha=0.75, beta=-0.5, row_scale=g["row_scale"],
           col_scale=g["col_scale"], out=res, launch=launch)
    res.copy_(g["residual"])
    graph.replay()
    assert_close(res, ref, dtype)
    with pytest.raises(ValueError, match="launch.splits=5"):   # 4096 / 5 is not whole
        op(g["x"], weight, g["bias"], ep.activation, g["residual"], row_scale=g["row_scale"],
           col_scale=g["col_scale"], launch=fused_gemm.LaunchOptions(splits=5))


@pytest.fixture
def heuristic_only(monkeypatch):
    """linear picks from the heuristic's rows (the M rows the gpu-tests preset holds, and NARROW_RULES'), not a
    tuned table or its nearest entries."""
    from fused_gemm.gemm import linear as linear_mod
    monkeypatch.setenv("FUSED_GEMM_TUNED", "0")
    linear_mod._selection.clear()
    yield
    linear_mod._selection.clear()


@pytest.mark.parametrize("m", [7, 64, 100, 255, 300, 700])
def test_narrow_weight_without_a_table_entry_takes_the_narrow_rows(heuristic_only, m):
    """A narrow long-K weight the tables lack (Llama-3-8B TP4's qkv, 1536 x 4096) takes the heuristic's split-K
    row from M = 17 (the decode row below) and its persistent narrow rows from M = 257: right answers, outputs
    NaN-poisoned first."""
    from fused_gemm.generator.gemm import heuristics
    ep = Epilogue.parse("bias+gelu_tanh")
    g = operands(ep, (m,), 1536, 4096, torch.bfloat16)
    op, launch = fused_gemm.gemm.linear.select(g["x"], g["bias"], "gelu_tanh", None, None, None, torch.bfloat16, m,
                                               1536, 4096)
    assert (op.spec.config.scheduler == "split_k_parallel") == (16 < m <= 256)
    if m > 256:
        assert op.spec.config in {row.config for row in heuristics.NARROW_RULES["sm90a"]}
    out = torch.full((m, 1536), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert_close(call_linear(ep, g, out=out), reference(ep, **g), torch.bfloat16)


def test_pdl_launch_after_a_producer_kernel(heuristic_only):
    """With PDL the GEMM may start before the kernel that wrote x ends: it must still read the new x."""
    ep = Epilogue.parse("bias")
    g = operands(ep, (8,), 4096, 4096, torch.bfloat16)
    assert fused_gemm.gemm.linear.select(g["x"], g["bias"], None, None, None, None, torch.bfloat16, 8, 4096,
                                         4096)[1].pdl
    for _ in range(20):
        g["x"].mul_(-1.0)                                       # the producer kernel, right before
        got = call_linear(ep, g)
        assert_close(got, reference(ep, **g), torch.bfloat16)


def test_pdl_launch_of_a_library_without_grid_dependency_control_is_refused():
    from fused_gemm.generator.gemm.heuristics import RULES
    spec = fused_gemm.GemmSpec("bf16", epilogue="bias", pdl=False, config=RULES["sm90a"][0].config)
    op = fused_gemm.compile(spec)
    assert not op.library.supports_pdl
    g = operands(spec.epilogue, (4,), 512, 256, torch.bfloat16)
    with pytest.raises(ValueError, match="grid-dependency control"):
        op(g["x"], g["weight"], g["bias"], launch=fused_gemm.LaunchOptions(pdl=True))
    # The C side refuses too, for callers that skip Python's checks.
    fields = [4, 512, 256, g["x"].data_ptr(), 256, g["weight"].data_ptr(), 256, 0, 512, 0, 512,
              g["bias"].data_ptr(), 0, 0, 1.0, 1.0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert op.library.run(*fields) == 1 and "grid-dependency" in op.library.last_error()
    assert_close(op(g["x"], g["weight"], g["bias"]), reference(spec.epilogue, **g), torch.bfloat16)


def test_kn_weight_layout():
    spec = fused_gemm.GemmSpec("fp16", b_layout="kn", epilogue="bias+relu")
    op = fused_gemm.compile(spec)
    ep = spec.epilogue
    g = operands(ep, (129,), N, K, torch.float16)
    got = op(g["x"], g["weight"].t().contiguous(), g["bias"])
    assert_close(got, reference(ep, **g), torch.float16)


def test_empty_dimensions_follow_f_linear():
    x = torch.randn(5, 64, dtype=torch.bfloat16, device="cuda")
    assert fused_gemm.linear(x, torch.empty(0, 64, dtype=torch.bfloat16, device="cuda")).shape == (5, 0)
    assert fused_gemm.linear(x[:0], torch.randn(32, 64, dtype=torch.bfloat16, device="cuda")).shape == (0, 32)
    # K == 0: an empty sum is zero, then the epilogue (F.linear gives the broadcast bias).
    x0, w0 = torch.empty(5, 0, dtype=torch.bfloat16, device="cuda"), torch.empty(32, 0, dtype=torch.bfloat16,
                                                                                 device="cuda")
    b = torch.randn(32, dtype=torch.bfloat16, device="cuda")
    torch.testing.assert_close(fused_gemm.linear(x0, w0, b), F.linear(x0, w0, b))
    r = torch.randn(5, 32, dtype=torch.bfloat16, device="cuda")
    got = fused_gemm.linear(x0, w0, b, "gelu_tanh", r, beta=0.5)
    torch.testing.assert_close(got, (F.gelu(b.float(), approximate="tanh") + 0.5 * r.float()).bfloat16())


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
        with pytest.raises(ValueError, match="bias"):
            fused_gemm.linear(self.x, self.w, self.b.cpu())

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
        with pytest.raises(ValueError, match="out"):
            fused_gemm.linear(self.x, torch.randn(120, 64, dtype=torch.bfloat16, device="cuda")[:, :],
                              out=torch.empty(16, 125, dtype=torch.bfloat16, device="cuda")[:, :120])

    def test_out(self):
        with pytest.raises(TypeError, match="out"):
            fused_gemm.linear(self.x, self.w, self.b, out=torch.empty(16, 128, dtype=torch.int32, device="cuda"))
        with pytest.raises(ValueError, match="out"):
            fused_gemm.linear(self.x, self.w, self.b, out=torch.empty(16, 64, dtype=torch.bfloat16, device="cuda"))
        with pytest.raises(TypeError, match="out_dtype"):
            fused_gemm.linear(self.x, self.w, self.b, out_dtype=torch.float16,
                              out=torch.empty(16, 128, dtype=torch.bfloat16, device="cuda"))

    def test_output_rows_must_be_aligned(self):
        with pytest.raises(ValueError, match="N = 100"):
            fused_gemm.linear(self.x, torch.randn(100, 64, dtype=torch.bfloat16, device="cuda"))

    def test_non_tensor_bias_with_grad_mode_on(self):
        with pytest.raises(TypeError, match="bias"):
            fused_gemm.linear(self.x, self.w, [1.0] * 128)

    def test_aliasing(self):
        big = torch.randn(16, 256, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(ValueError, match="out overlaps x"):
            fused_gemm.linear(big[:, :64], self.w, self.b, out=big[:, 128:])
        wide = torch.randn(128, 128, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(ValueError, match="out overlaps weight"):
            fused_gemm.linear(torch.randn(128, 64, dtype=torch.bfloat16, device="cuda"), wide[:, :64],
                              out=wide)
        r = torch.randn(17, 128, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(ValueError, match="residual overlaps out"):
            fused_gemm.linear(self.x, self.w, self.b, residual=r[1:], out=r[:16])

    def test_dimensions_past_int32(self):
        x = torch.randn(1, 64, dtype=torch.bfloat16, device="cuda").expand(1 << 31, 64)
        with pytest.raises(ValueError, match="M = 2147483648"):
            fused_gemm.linear(x, self.w, self.b)
        w = torch.randn(1, 64, dtype=torch.bfloat16, device="cuda").expand(1 << 31, 64)
        with pytest.raises(ValueError, match="N = 2147483648"):
            fused_gemm.linear(self.x, w)

    def test_scalars_and_launch(self):
        with pytest.raises(ValueError, match="alpha"):
            fused_gemm.linear(self.x, self.w, self.b, alpha=float("inf"))
        with pytest.raises(TypeError, match="beta"):
            fused_gemm.linear(self.x, self.w, self.b, beta="1")
        op = fused_gemm.compile(fused_gemm.GemmSpec("bf16", epilogue="bias"))
        with pytest.raises(TypeError, match="launch"):
            op(self.x, self.w, self.b, launch={"splits": 2})

    def test_epilogue_mismatch_on_compiled_op(self):
        from fused_gemm.generator.gemm.presets import linear_specs
        op = fused_gemm.compile(linear_specs("bf16", "bias+gelu_tanh")[0])
        with pytest.raises(ValueError, match="bias is required"):
            op(self.x, self.w)
        with pytest.raises(ValueError, match="residual"):
            op(self.x, self.w, self.b, residual=self.x)

    def test_activation_name(self):
        with pytest.raises(ValueError, match="activation"):
            fused_gemm.linear(self.x, self.w, self.b, activation="swish")


def test_linear_follows_the_tuned_table_of_this_gpu(tuned_table, monkeypatch):
    """A table entry for (dtype, N, K, M bucket) decides linear's kernel and launch; other shapes and a
    disabled table fall back to the heuristic; results stay correct either way."""
    from fused_gemm.gemm import linear as linear_mod
    from fused_gemm.generator.gemm import heuristics, tuned
    config = STREAM_K
    launch = fused_gemm.LaunchOptions(splits=2, decomposition="split_k")
    tuned_table(tuned.Entry("bf16", 512, 768, 16, config, launch))
    ep = Epilogue.parse("bias+gelu_tanh")
    g = operands(ep, (5,), 512, 768, torch.bfloat16)
    op, got_launch = linear_mod.select(g["x"], g["bias"], "gelu_tanh", None, None, None, torch.bfloat16, 5, 512, 768)
    assert op.spec.config == config and got_launch == launch
    assert_close(call_linear(ep, g), reference(ep, **g), torch.bfloat16)
    other = linear_mod.select(g["x"], g["bias"], "gelu_tanh", None, None, None, torch.bfloat16, 5, 256, 768)[0]
    assert other.spec.config == heuristics.pick("sm90a", 5).config
    h = operands(ep, (5,), 512, 768, torch.float16)   # fp16 takes the bf16 entry (tuned.SHARED_TILES)
    op16, launch16 = linear_mod.select(h["x"], h["bias"], "gelu_tanh", None, None, None, torch.float16, 5, 512, 768)
    assert op16.spec.config == config and op16.spec.a_dtype == "fp16" and launch16 == launch
    assert_close(call_linear(ep, h), reference(ep, **h), torch.float16)
    monkeypatch.setenv("FUSED_GEMM_TUNED", "0")
    linear_mod._selection.clear()
    op = linear_mod.select(g["x"], g["bias"], "gelu_tanh", None, None, None, torch.bfloat16, 5, 512, 768)[0]
    assert op.spec.config == heuristics.pick("sm90a", 5).config


@pytest.mark.parametrize("call_dtype", ["table", "fp16"])
def test_every_kernel_of_this_gpus_tuned_table(call_dtype):
    """Each (tile config, launch options) the shipped table of this GPU names, run as the table runs it
    (bias + gelu_tanh, the tuned epilogue) at the smallest cell that names it, with an odd M inside the
    cell's bucket, against float64; outputs NaN-poisoned first.  "fp16": the bf16 entries run in fp16, as fp16
    calls take them (tuned.SHARED_TILES)."""
    from fused_gemm.generator import GemmSpec
    from fused_gemm.generator.gemm import tuned
    table = tuned.load(tuned.gpu_key(torch.cuda.get_device_name()))
    if table is None:
        pytest.skip(f"no tuned table ships for {torch.cuda.get_device_name()}")
    first = {}
    for e in sorted(table.entries, key=lambda e: e.n * e.k * e.m):
        if e.op == "linear":      # the other ops' entries: test_every_tuned_kernel_of_the_other_ops
            first.setdefault((e.dtype, e.config, e.launch), e)
    ep = Epilogue.parse("bias+gelu_tanh")
    for (dtype, config, launch), e in first.items():
        if call_dtype == "fp16":
            if dtype != "bf16":
                continue
            dtype = "fp16"
        torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        m = e.m if e.m == 1 else e.m - 3
        g = operands(ep, (m,), e.n, e.k, torch_dtype)
        op = fused_gemm.compile(GemmSpec(dtype, epilogue=ep, config=config))
        out = torch.full((m, e.n), float("nan"), dtype=torch_dtype, device="cuda")
        op(g["x"], g["weight"], g["bias"], "gelu_tanh", out=out, launch=launch)
        assert_close(out, reference(ep, **g), torch_dtype)


def test_every_tuned_kernel_of_the_other_ops():
    """The gated, fp8, fp8_fast and qkv_rope entries of this GPU's tuned table: each (kernel, launch options) run through the
    public op at an odd M of its bucket, on the entry's weight shape (so the table picks it), against
    float64, outputs NaN-poisoned first; and the op really picked the entry's kernel."""
    from fused_gemm.gated import api as gated_api
    from fused_gemm.generator.gemm import tuned
    from fused_gemm.quant import fp8 as fp8_api
    table = tuned.load(tuned.gpu_key(torch.cuda.get_device_name()))
    entries = {}
    for e in sorted(table.entries if table else (), key=lambda e: e.n * e.k * e.m):
        if e.op != "linear":
            entries.setdefault((e.op, e.config, e.promotion, e.launch), e)
    if not entries:
        pytest.skip(f"no gated, fp8, fp8_fast or qkv_rope entries in a tuned table for {torch.cuda.get_device_name()}")
    # an odd M inside each entry's bucket; qkv_rope also at the bucket's own M, where the shared-memory
    # reserve for large prefill (generator/rope/heuristics.py) may start
    runs = [(e, e.m if e.m == 1 else e.m - 3) for e in entries.values()]
    runs += [(e, e.m) for e in entries.values() if e.op == "qkv_rope" and e.m > 1]
    for e, m in runs:
        if e.op == "gated":
            x = torch.randn(m, e.k, dtype=torch.bfloat16, device="cuda")
            wg, wu = (torch.randn(e.n // 2, e.k, dtype=torch.bfloat16, device="cuda") / e.k ** 0.5 for _ in range(2))
            out = torch.full((m, e.n // 2), float("nan"), dtype=torch.bfloat16, device="cuda")
            fused_gemm.gated_linear(x, fused_gemm.pack_gate_up(wg, wu), out=out)
            op, launch = gated_api.select(x, None, None, "silu", None, torch.bfloat16, m, e.n, e.k)
            ref = F.silu(x.double() @ wg.double().t()) * (x.double() @ wu.double().t())
        elif e.op == "qkv_rope":
            from fused_gemm.bench.ops import ROPE_MAX_POSITION, poison, rotary_neox
            from fused_gemm.bench.tune import rope_geometry
            from fused_gemm.rope import api as rope_api
            hq, hkv, d = rope_geometry(e.n, e.k)
            cache = fused_gemm.rope_cos_sin_cache(ROPE_MAX_POSITION, d, device="cuda")
            x = torch.randn(m, e.k, dtype=torch.bfloat16, device="cuda")
            w = torch.randn(e.n, e.k, dtype=torch.bfloat16, device="cuda") / e.k ** 0.5
            pos = torch.randint(0, ROPE_MAX_POSITION, (m,), device="cuda")
            packed = fused_gemm.pack_qkv_rope(w, num_heads=hq, num_kv_heads=hkv, head_dim=d)
            poison((m, hq, d), (m, hkv, d), (m, hkv, d), dtype=torch.bfloat16)   # outputs land on NaN blocks
            got = fused_gemm.qkv_rope(x, packed, positions=pos, cos_sin_cache=cache)
            op, launch = rope_api.select(x, None, d, d, "neox", m, e.n)
            ref = rotary_neox(x.double() @ w.double().T, pos, cache.double(), hq, hkv, d)
            out, ref = (torch.cat([t.reshape(m, -1) for t in ts], 1) for ts in (got, ref))
        else:
            x = torch.randn(m, e.k, device="cuda").to(torch.float8_e4m3fn)
            w = torch.randn(e.n, e.k, device="cuda").to(torch.float8_e4m3fn)
            xs, ws = torch.rand(m, device="cuda") + 0.5, torch.rand(e.n, device="cuda") + 0.5
            out = torch.full((m, e.n), float("nan"), dtype=torch.bfloat16, device="cuda")
            fast = e.op == "fp8_fast"
            fused_gemm.fp8_linear(x, w, xs, ws, out=out, use_fast_accum=fast)
            op, launch = fp8_api.select(x, False, False, None, None, None, torch.bfloat16, fast, m, e.n, e.k)
            assert op.spec.fast_accum == fast, e
            assert op.spec.promotion == e.promotion, e
            ref = (x.double() @ w.double().t()) * xs.double()[:, None] * ws.double()
        assert (op.spec.config, launch) == (e.config, e.launch), e
        assert_close(out, ref, torch.bfloat16)
