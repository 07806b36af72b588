"""The attention family on an sm_90 GPU against a float64 reference (skipped without one), every test
on both backends: example 88's sm90a kernels and example 41's sm80 ones (the fallback, forced with
FUSED_GEMM_ATTENTION_BACKEND=sm80): any lengths, bottom-right causal, GQA/MQA, varlen, scale, LSE,
NaN-poisoned outputs, graphs, torch.compile, bad input."""
import math
import sys

import pytest
import torch

import fused_gemm
from fused_gemm.attention.api import BACKEND_ENV, select
from fused_gemm.generator.attention.presets import variants
from test_gpu import TOL

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True, params=["sm90a", "sm80"])
def backend(request, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param


def test_the_forced_backend_runs(backend, monkeypatch):
    q, k, v = qkv(1, 16, 16, 4, 4, 64, torch.bfloat16)
    assert select(q, True, 16).spec.arch == backend
    monkeypatch.setenv(BACKEND_ENV, "auto")
    assert select(q, True, 16).spec.arch == "sm90a"       # this GPU's own


def reference(q, k, v, causal, scale):
    """float64 (o [B, Sq, Hq, D], lse [B, Hq, Sq]); a row that sees no key: o = 0, lse = +inf."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    vd = v.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    s = (qd @ kd.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
    return (p @ vd).transpose(1, 2), torch.where(torch.isinf(lse), math.inf, lse)


def poisoned(shape, dtype):
    """A NaN-filled block handed back to the caching allocator, so that the next output of this
    size lands on it (its pointer is returned to check that it did)."""
    t = torch.full(shape, math.nan, dtype=dtype, device="cuda")
    ptr = t.data_ptr()
    del t
    return ptr


def check(got, ref, dtype, what="o"):
    assert not torch.isnan(got).any(), f"{what}: some elements were never written (NaN poison survived)"
    err = ((got.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    assert err < TOL[dtype], f"{what}: relative error {err:.2e} > {TOL[dtype]:.0e}"


def check_lse(got, ref):
    assert torch.equal(torch.isinf(got), torch.isinf(ref)), "rows with no keys must get lse = +inf"
    finite = ~torch.isinf(ref)
    assert (got.double()[finite] - ref[finite]).abs().max().item() < 1e-3


def qkv(b, sq, sk, hq, hkv, d, dtype):
    q = torch.randn(b, sq, hq, d, dtype=dtype, device="cuda")
    k = torch.randn(b, sk, hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(b, sk, hkv, d, dtype=dtype, device="cuda")
    return q, k, v


@pytest.mark.parametrize("sq, sk", [(1, 1), (7, 7), (128, 128), (1000, 1000), (1, 300), (7, 519), (128, 1000),
                                    (1000, 1300), (4096, 4096)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_any_length_bottom_right_causal(sq, sk, causal):
    dtype = torch.bfloat16
    q, k, v = qkv(2 if sq < 4096 else 1, sq, sk, 4, 2, 128, dtype)
    ptr = poisoned(q.shape, dtype)
    o, lse = fused_gemm.attention(q, k, v, causal=causal, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(128))
    if o.data_ptr() == ptr:
        assert not torch.isnan(o).any()
    check(o, ref_o, dtype)
    check_lse(lse, ref_lse)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("group", [1, 4, 8], ids=["mha", "gqa4", "gqa8"])
def test_dtypes_head_dims_and_gqa(dtype, d, group):
    hkv = 2 if group < 8 else 1
    for sq in (40, 100, 150, 333):   # the table's rows: 64-row tiles, S <= 128, D = 128 causal's 129-192, to 1k
        for causal in (False, True):
            q, k, v = qkv(2, sq, 517, hkv * group, hkv, d, dtype)
            o = fused_gemm.attention(q, k, v, causal=causal, scale=0.3)
            check(o, reference(q, k, v, causal, 0.3)[0], dtype)


def test_head_dim_256_and_mqa():
    q, k, v = qkv(1, 200, 300, 8, 1, 256, torch.bfloat16)
    for causal in (False, True):
        check(fused_gemm.attention(q, k, v, causal=causal), reference(q, k, v, causal, 1 / 16)[0], torch.bfloat16)


def test_causal_rows_that_see_no_key():
    """Sq > Sk, bottom-right: the first Sq - Sk queries see nothing (o = 0, lse = +inf, like flash-attn)."""
    q, k, v = qkv(1, 300, 100, 4, 4, 64, torch.float16)
    o, lse = fused_gemm.attention(q, k, v, causal=True, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, True, 1 / 8)
    check(o, ref_o, torch.float16)
    assert torch.all(o[:, :200] == 0)
    check_lse(lse, ref_lse)


def packed(lengths_q, lengths_k, hq, hkv, d, dtype):
    cu_q = torch.tensor([0] + list(torch.tensor(lengths_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lengths_k).cumsum(0)), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lengths_q), hq, d, dtype=dtype, device="cuda")
    k = torch.randn(sum(lengths_k), hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(sum(lengths_k), hkv, d, dtype=dtype, device="cuda")
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("group", [1, 4], ids=["mha", "gqa4"])
def test_varlen_packed_batch(causal, group):
    lengths_q = [1, 17, 512, 3000]
    lengths_k = [1, 40, 512, 3100]           # prefixes already cached for some sequences
    dtype = torch.bfloat16
    q, k, v, cu_q, cu_k = packed(lengths_q, lengths_k, 2 * group, 2, 128, dtype)
    ptr = poisoned(q.shape, dtype)
    o, lse = fused_gemm.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                  max_seqlen_q=max(lengths_q), max_seqlen_k=max(lengths_k), return_lse=True)
    assert o.shape == q.shape and lse.shape == (2 * group, q.shape[0])
    if o.data_ptr() == ptr:
        assert not torch.isnan(o).any()
    for i in range(len(lengths_q)):
        sq, sk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        ref_o, ref_lse = reference(q[None, sq], k[None, sk], v[None, sk], causal, 1 / math.sqrt(128))
        check(o[sq], ref_o[0], dtype)
        check_lse(lse[:, sq], ref_lse[0])


@pytest.mark.parametrize("spec", variants(), ids=lambda s: s.uri)
def test_kernel_variants(spec, backend):
    """Every kind of sm90a kernel the sweep weighs, table pick or not: fixed-length GQA batches whose
    Q tiles do not divide the length (the causal persistent order: the first takes rounds of single
    tiles, the second pairs of rows in whole rounds and the rest over several L2 sections, the third
    both by Q tile, the fourth, an odd head count, a last section ending with a lone middle row), then
    a varlen one (a persistent CTA walks tiles of several sequences; a 192-row tile straddles a
    sequence's end)."""
    if backend != "sm90a":
        pytest.skip("sm90a kernels")
    op = fused_gemm.compile(spec)
    dtype, d, scale = torch.bfloat16, spec.head_dim, 0.2
    for b, sq, sk, hq in ((3, 1000, 1300, 8), (12, 600, 600, 24), (5, 900, 900, 20), (33, 600, 600, 5)):
        q, k, v = qkv(b, sq, sk, hq, hq // 4, d, dtype)
        ptr = poisoned(q.shape, dtype)
        o, lse = op(q, k, v, scale=scale, return_lse=True)
        ref_o, ref_lse = reference(q, k, v, spec.causal, scale)
        if o.data_ptr() == ptr:
            assert not torch.isnan(o).any()
        check(o, ref_o, dtype)
        check_lse(lse, ref_lse)
    lengths_q, lengths_k = [1, 17, 512, 3000, 200], [1, 40, 512, 3100, 200]
    q, k, v, cu_q, cu_k = packed(lengths_q, lengths_k, 8, 2, d, dtype)
    o, _ = op(q, k, v, scale=scale, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=3000, max_seqlen_k=3100)
    for i in range(len(lengths_q)):
        sq, sk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        check(o[sq], reference(q[None, sq], k[None, sk], v[None, sk], spec.causal, scale)[0][0], dtype)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_head_dim_256_varlen_gqa(causal):
    """D = 256 (sm80: O accumulated in a float workspace, indexed by packed row) on a packed batch."""
    lengths_q, lengths_k = [1, 17, 300], [1, 40, 300]
    q, k, v, cu_q, cu_k = packed(lengths_q, lengths_k, 8, 2, 256, torch.bfloat16)
    o, lse = fused_gemm.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                  max_seqlen_q=300, max_seqlen_k=300, return_lse=True)
    for i in range(len(lengths_q)):
        sq, sk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        ref_o, ref_lse = reference(q[None, sq], k[None, sk], v[None, sk], causal, 1 / 16)
        check(o[sq], ref_o[0], torch.bfloat16)
        check_lse(lse[:, sq], ref_lse[0])


def test_varlen_causal_with_more_queries_than_keys():
    """Per sequence, the first Sq - Sk queries see no key, inside and across Q tiles."""
    lengths_q, lengths_k = [300, 70, 9], [100, 3, 9]
    q, k, v, cu_q, cu_k = packed(lengths_q, lengths_k, 4, 2, 128, torch.float16)
    ptr = poisoned(q.shape, torch.float16)
    o, lse = fused_gemm.attention(q, k, v, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                                  max_seqlen_q=300, max_seqlen_k=100, return_lse=True)
    if o.data_ptr() == ptr:
        assert not torch.isnan(o).any()
    for i in range(len(lengths_q)):
        sq, sk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        ref_o, ref_lse = reference(q[None, sq], k[None, sk], v[None, sk], True, 1 / math.sqrt(128))
        check(o[sq], ref_o[0], torch.float16)
        check_lse(lse[:, sq], ref_lse[0])


def test_varlen_with_empty_sequences():
    q, k, v, cu_q, cu_k = packed([5, 0, 9], [0, 3, 9], 4, 4, 64, torch.float16)
    o, lse = fused_gemm.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=9, max_seqlen_k=9,
                                  return_lse=True)
    assert torch.all(o[:5] == 0) and torch.all(torch.isinf(lse[:, :5]))
    ref_o, _ = reference(q[None, 5:], k[None, 3:], v[None, 3:], False, 1 / 8)
    check(o[5:], ref_o[0], torch.float16)


@pytest.mark.parametrize("before", [0, 512, 4096, 36864])
def test_varlen_wherever_the_tensors_lie(before):
    """Varlen views start at the tensors themselves: whatever lies before q/k/v in memory (a
    descriptor based before its tensor faulted for some allocation layouts)."""
    keep = torch.zeros(before, dtype=torch.uint8, device="cuda") if before else None
    q, k, v, cu_q, cu_k = packed([40], [40], 4, 4, 128, torch.bfloat16)
    o = fused_gemm.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=40, max_seqlen_k=40)
    torch.cuda.synchronize()
    check(o, reference(q[None], k[None], v[None], False, 1 / math.sqrt(128))[0][0], torch.bfloat16)
    del keep


def test_varlen_empty_queries_and_checked_lengths():
    q, k, v, cu_q, cu_k = packed([0, 0], [5, 7], 4, 4, 64, torch.bfloat16)
    q = torch.randn(16, 4, 64, dtype=torch.bfloat16, device="cuda")           # padding tokens only
    o = fused_gemm.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=0, max_seqlen_k=7)
    assert torch.all(o == 0)
    q, k, v, cu_q, cu_k = packed([5, 9], [5, 9], 4, 4, 64, torch.bfloat16)
    for bad, fragment in (([0, 5, 20], "end within"), ([0, 9, 5], "never decrease"), ([1, 5, 14], "start at 0")):
        with pytest.raises(ValueError, match=fragment):
            fused_gemm.attention(q, k, v, cu_seqlens_q=torch.tensor(bad, dtype=torch.int32, device="cuda"),
                                 cu_seqlens_k=cu_k, max_seqlen_q=14, max_seqlen_k=9)
    with pytest.raises(ValueError, match="longer than max_seqlen"):
        fused_gemm.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=5, max_seqlen_k=9)
    with pytest.raises(TypeError, match="Python ints"):
        fused_gemm.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=9.0, max_seqlen_k=9)


@pytest.mark.parametrize("dtype, d, group",
                         [(torch.bfloat16, 128, 4), (torch.float16, 64, 1), (torch.bfloat16, 256, 8)], ids=["bf16-d128-gqa4", "fp16-d64-mha", "bf16-d256-gqa8"])
@pytest.mark.parametrize("sq, sk", [(1, 1), (5, 5), (16, 16), (3, 700), (16, 4099)])
def test_short_causal_prefill_on_the_decode_kernel(backend, dtype, d, group, sq, sk, monkeypatch):
    """Causal Sq <= 16 over Sk >= Sq keys (and one query over any) runs the decode kernel on sm90a:
    bottom-right mask, GQA, scale, LSE, a strided q, every output written."""
    api = sys.modules["fused_gemm.attention.api"]   # fused_gemm.attention is the function, not this package
    routed = []
    monkeypatch.setattr(api, "decode_select", lambda q, real=api.decode_select: routed.append(q.shape) or real(q))
    q, k, v = qkv(3, sq, sk, 2 * group, 2, d, dtype)
    q = torch.cat((q, q), dim=-1)[..., :d]                    # rows 2 D apart: a strided view
    for causal in (True, False):
        ptr = poisoned(q.shape, dtype)
        o, lse = fused_gemm.attention(q, k, v, causal=causal, scale=0.2, return_lse=True)
        ref_o, ref_lse = reference(q, k, v, causal, 0.2)
        if o.data_ptr() == ptr:
            assert not torch.isnan(o).any()
        check(o, ref_o, dtype)
        check_lse(lse, ref_lse)
        # the prefill kernel still serves these shapes where the route does not apply (varlen, a capture
        # before the decode kernel is loaded): run it directly
        o, lse = select(q, causal, sq).run(q, k, v, 0.2, None, None, None, None, True)
        check(o, ref_o, dtype)
        check_lse(lse, ref_lse)
    # sm90a routes the causal call, and the non-causal one when it is a single query
    assert len(routed) == (0 if backend == "sm80" else 1 + (sq == 1))
    if backend == "sm90a":   # not routed: more queries than the decode kernel's 16, or than keys
        for sq2, sk2 in ((17, 17), (8, 4)):
            q, k, v = qkv(1, sq2, sk2, 4, 2, 128, torch.bfloat16)
            fused_gemm.attention(q, k, v, causal=True)
        assert len(routed) == 1 + (sq == 1)


def test_a_routed_call_builds_no_prefill_kernel(backend, monkeypatch):
    """A call the decode kernel serves is validated against the prefill kernel's spec but never builds
    or loads that kernel (an FMHA build takes minutes); bad input is still refused the same way."""
    api = sys.modules["fused_gemm.attention.api"]
    q, k, v = qkv(2, 4, 300, 8, 2, 128, torch.bfloat16)
    if backend == "sm80":   # no route: the prefill (sm80) kernel serves it
        check(fused_gemm.attention(q, k, v, causal=True), reference(q, k, v, True, 1 / math.sqrt(128))[0],
              torch.bfloat16)
        return

    def refuse(*args):
        raise AssertionError("the prefill kernel was selected for a call the decode kernel serves")

    monkeypatch.setattr(api, "select", refuse)
    ref = reference(q, k, v, True, 1 / math.sqrt(128))[0]
    check(fused_gemm.attention(q, k, v, causal=True), ref, torch.bfloat16)
    graph = torch.cuda.CUDAGraph()   # captured too: the prefill kernel was never built or loaded
    with torch.cuda.graph(graph):
        o = fused_gemm.attention(q, k, v, causal=True)
    o.fill_(float("nan"))
    graph.replay()
    check(o, ref, torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of"):
        fused_gemm.attention(q, k[:, :, :1].expand(-1, -1, 3, -1), v[:, :, :1].expand(-1, -1, 3, -1), causal=True)
    with pytest.raises(ValueError, match="scale must be positive"):
        fused_gemm.attention(q, k, v, causal=True, scale=-1.0)


def test_strided_views_of_a_packed_qkv():
    """q/k/v as views of one [B, S, 3, H, D] projection output: no copies needed."""
    qkv_out = torch.randn(2, 300, 3, 8, 64, dtype=torch.bfloat16, device="cuda")
    q, k, v = qkv_out.unbind(2)
    o = fused_gemm.attention(q, k, v, causal=True)
    check(o, reference(q, k, v, True, 1 / 8)[0], torch.bfloat16)


def test_capture_of_a_short_call_before_the_decode_kernel_is_loaded(backend, monkeypatch):
    """A capture whose short causal call finds the decode kernel not loaded yet runs the prefill kernel
    (warmed by a longer call of its length row) instead of failing."""
    api = sys.modules["fused_gemm.attention.api"]
    monkeypatch.setattr(api, "decode_selected", lambda q: None)
    q, k, v = qkv(2, 64, 256, 8, 2, 128, torch.bfloat16)
    fused_gemm.attention(q, k, v, causal=True)                 # loads the prefill kernel of Sq <= 64
    q = q[:, :4].contiguous()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = fused_gemm.attention(q, k, v, causal=True)
    graph.replay()
    check(o, reference(q, k, v, True, 1 / math.sqrt(128))[0], torch.bfloat16)


@pytest.mark.parametrize("sq", [64, 4], ids=["prefill", "short"])
def test_graph_capture_and_compile(sq):
    q, k, v = qkv(2, sq, 256, 8, 2, 128, torch.bfloat16)
    o = fused_gemm.attention(q, k, v, causal=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = fused_gemm.attention(q, k, v, causal=True)
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        graph.replay()
        check(o, reference(q, k, v, True, 1 / math.sqrt(128))[0], torch.bfloat16)

    @torch.compile(fullgraph=True)
    def block(q, k, v):
        return fused_gemm.attention(q, k, v, causal=True, return_lse=True)
    o, lse = block(q, k, v)
    ref_o, ref_lse = reference(q, k, v, True, 1 / math.sqrt(128))
    check(o, ref_o, torch.bfloat16)
    check_lse(lse, ref_lse)


def test_bad_input_is_refused_before_launch():
    q, k, v = qkv(1, 16, 16, 6, 4, 128, torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of k/v's 4"):
        fused_gemm.attention(q, k, v)
    q, k, v = qkv(1, 16, 16, 4, 4, 96, torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim 96"):
        fused_gemm.attention(q, k, v)
    q, k, v = qkv(1, 16, 16, 4, 4, 64, torch.bfloat16)
    with pytest.raises(TypeError, match="dtype"):
        fused_gemm.attention(q, k.half(), v)
    with pytest.raises(ValueError, match="same shape"):
        fused_gemm.attention(q, k, v[:, :8])
    with pytest.raises(ValueError, match="scale must be positive"):
        fused_gemm.attention(q, k, v, scale=0.0)
    with pytest.raises(ValueError, match="max_seqlen"):
        cu = torch.tensor([0, 16], dtype=torch.int32, device="cuda")
        fused_gemm.attention(q[0], k[0], v[0], cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(TypeError, match="int32"):
        fused_gemm.attention(q[0], k[0], v[0], cu_seqlens_q=cu.long(), cu_seqlens_k=cu, max_seqlen_q=16,
                             max_seqlen_k=16)
    with pytest.raises(ValueError, match="multiples of 8 elements"):
        fused_gemm.attention(q, k, torch.randn(1, 16, 4, 68, dtype=torch.bfloat16, device="cuda")[..., :64])
    with pytest.raises(ValueError, match="no heads"):
        fused_gemm.attention(q[:, :, :0], k, v)
    with pytest.raises(ValueError, match="on CUDA"):
        fused_gemm.attention(q.cpu(), k.cpu(), v.cpu())
    q.requires_grad_(True)
    with pytest.raises(RuntimeError, match="no backward"):
        fused_gemm.attention(q, k, v)
