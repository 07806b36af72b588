"""Test-run setup (markers skipped without their hardware), and the helpers that test_int4.py and
test_fp8_weight.py share: int4_linear and fp8_weight_linear run the same family of kernels, so their GPU
tests check them alike (these test modules import them: ``from conftest import ...``)."""
import os

import pytest
import torch
import torch.nn.functional as F


def _has_sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _has_toolchain() -> bool:
    try:
        from fused_gemm.generator.toolchain import find_cutlass, find_nvcc
        find_nvcc()
        find_cutlass()
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an sm_90 GPU (H100/H200)")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc and the CUTLASS headers (pip install nvidia-cutlass)")
    skip_offline = pytest.mark.skip(reason="FUSED_GEMM_OFFLINE is set: no package index to install wheels from")
    gpu, toolchain = _has_sm90(), _has_toolchain()
    offline = os.environ.get("FUSED_GEMM_OFFLINE")
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if ("compile" in item.keywords or "gpu" in item.keywords) and not toolchain:
            item.add_marker(skip_nvcc)
        if "toolchain" in item.keywords and offline:
            item.add_marker(skip_offline)


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A private, empty kernel cache for tests that build."""
    monkeypatch.setenv("FUSED_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def tuned_table(tmp_path, monkeypatch):
    """use(*entries): this GPU's tuned GEMM table holds just these entries for the test (linear's
    selection memo cleared before and after)."""
    from fused_gemm.gemm import linear as linear_mod
    from fused_gemm.generator.gemm import tuned
    monkeypatch.setattr(tuned, "TABLE_DIR", tmp_path)

    def use(*entries):
        gpu = tuned.gpu_key(torch.cuda.get_device_name())
        (tmp_path / f"{gpu}.json").write_text(tuned.TunedTable(gpu, {}, entries).to_json())
        tuned.load.cache_clear()
        linear_mod._selection.clear()
    yield use
    tuned.load.cache_clear()
    linear_mod._selection.clear()


# -- the weight-only ops (int4_linear, fp8_weight_linear): float64 checks on the GPU --------------------
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
WEIGHT_ONLY_TOL = {torch.bfloat16: 1e-2, torch.float16: 3e-3}
REFERENCE_ACTIVATIONS = {"identity": lambda t: t, "silu": F.silu,
                         "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}


def weight_only_reference(x, w, bias=None, activation="identity", residual=None):
    """float64, from the dequantised weight (an Int4Weight or an Fp8Weight)."""
    acc = x.double().reshape(-1, w.K) @ w.dequantize(torch.float64).T
    if bias is not None:
        acc = acc + bias.double()
    acc = REFERENCE_ACTIVATIONS[activation](acc).reshape(*x.shape[:-1], w.N)
    return acc + residual.double() if residual is not None else acc


def assert_close(got, ref, tol):
    assert not torch.isnan(got).any(), "some output elements were never written (NaN poison survived)"
    err = ((got.double() - ref).norm() / ref.norm()).item()
    assert err < tol, f"relative error {err:.2e} > {tol:.0e}"


def check_in_place_residual_batched(linear, w, w_arg):
    """``linear(x, w_arg, bias, "gelu_tanh", residual=r, out=r)`` on a [2, 20, K] x adds into r in place
    (``w_arg``: w, or another form of it that the op takes)."""
    x = torch.randn(2, 20, w.K, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(w.N, dtype=torch.bfloat16, device="cuda")
    r = torch.randn(2, 20, w.N, dtype=torch.bfloat16, device="cuda")
    ref = weight_only_reference(x, w, bias, "gelu_tanh", r)
    got = linear(x, w_arg, bias, "gelu_tanh", residual=r, out=r)
    assert got is r and got.shape == (2, 20, w.N)
    assert_close(got, ref, WEIGHT_ONLY_TOL[torch.bfloat16])


def captured(run) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of ``run()``, after one plain call (kernels load and prepare outside the capture)."""
    run()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


def check_cuda_graph_replay(linear, w, m, fresh_weight, buffers):
    """``linear`` captured once, replayed on fresh inputs and on fresh weights (``fresh_weight(seed)``)
    copied into the same buffers (``buffers(w)``: w's tensors), so a replay reads what they hold now."""
    x = torch.randn(m, w.K, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(w.N, dtype=torch.bfloat16, device="cuda")
    r = torch.randn(m, w.N, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(m, w.N, dtype=torch.bfloat16, device="cuda")
    graph = captured(lambda: linear(x, w, bias, "gelu_tanh", r, out=out))
    for seed in range(3):
        x.copy_(torch.randn_like(x))
        r.copy_(torch.randn_like(r))
        for buffer, fresh in zip(buffers(w), buffers(fresh_weight(seed + 10))):
            buffer.copy_(fresh)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, weight_only_reference(x, w, bias, "gelu_tanh", r), WEIGHT_ONLY_TOL[torch.bfloat16])


def check_compiled_and_out_op(f, out_op, k, n):
    """torch.compile(f, fullgraph=True) breaks no graph and matches eager ``f`` exactly on a [9, k] x, and
    so does ``out_op(x, out)`` (the op's _out form, called through torch.ops) into a NaN-poisoned [9, n] out."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    x = torch.randn(9, k, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        eager, compiled = f(x), torch.compile(f, fullgraph=True)(x)
    assert not torch._dynamo.utils.counters["graph_break"]
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    out = torch.full((9, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    out_op(x, out)
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
