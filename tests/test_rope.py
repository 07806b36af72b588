"""The rope family (QKV projection + rotary embedding) on an sm_90 GPU against a float64 Hugging
Face-style reference (skipped without one)."""
import math
import warnings

import pytest
import torch

import fused_gemm
import fused_gemm.rope.api
from fused_gemm import pack_qkv_rope, qkv_rope, rope_cos_sin_cache
from test_gpu import TOL, assert_close

pytestmark = pytest.mark.gpu

K = 392
M_VALUES = [1, 7, 16, 17, 100, 129, 1000, 4095, 8193]   # 100: the 64x128 row (heuristics.ROWS); 8193: L1 kept
# (dtype, head_dim, rotary_dim, bias): each in the rope-tests preset for both styles (fp16: neox)
CONFIGS = [(torch.bfloat16, 128, 128, False), (torch.bfloat16, 64, 32, True), (torch.bfloat16, 256, 128, False)]


def rotate_reference(t, cos, sin, rotary_dim, style):
    """Hugging Face apply_rotary_pos_emb (neox: rotate_half) or the GPT-J interleaved form, float64."""
    rot, keep = t[..., :rotary_dim], t[..., rotary_dim:]
    cos, sin = cos[:, None, :], sin[:, None, :]          # [T, 1, R/2]
    if style == "neox":
        x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    return torch.cat((out, keep), dim=-1)


def reference(x, w, bias, positions, cache, hq, hkv, d, r, style):
    qkv = x.double() @ w.double().T
    if bias is not None:
        qkv = qkv + bias.double()
    t = x.shape[0]
    q, k, v = qkv.split((hq * d, hkv * d, hkv * d), dim=1)
    cs = cache.double()[positions.long()]
    cos, sin = cs[:, : r // 2], cs[:, r // 2:]
    return (rotate_reference(q.reshape(t, hq, d), cos, sin, r, style),
            rotate_reference(k.reshape(t, hkv, d), cos, sin, r, style), v.reshape(t, hkv, d))


def problem(m, dtype, d, r, bias, hq=8, hkv=2, max_pos=4096, pos_dtype=torch.int64):
    n = (hq + 2 * hkv) * d
    x = torch.randn(m, K, dtype=dtype, device="cuda")
    w = torch.randn(n, K, dtype=dtype, device="cuda") / math.sqrt(K)
    b = torch.randn(n, dtype=dtype, device="cuda") if bias else None
    positions = torch.randint(0, max_pos, (m,), device="cuda", dtype=pos_dtype)
    cache = rope_cos_sin_cache(max_pos, r, base=500000.0, device="cuda")
    return x, w, b, positions, cache


def check(got, ref, dtype):
    for g, e in zip(got, ref):
        assert g.shape == e.shape
        assert_close(g, e, dtype)


@pytest.mark.parametrize("m", M_VALUES)
@pytest.mark.parametrize("config", CONFIGS, ids=["d128r128", "d64r32bias", "d256r128"])
@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_qkv_rope_matches_float64(style, config, m):
    dtype, d, r, bias = config
    x, w, b, positions, cache = problem(m, dtype, d, r, bias)
    packed = pack_qkv_rope(w, b, num_heads=8, num_kv_heads=2, head_dim=d, rotary_dim=r, style=style)
    expected = reference(x, w, b, positions, cache, 8, 2, d, r, style)
    check(qkv_rope(x, packed, positions=positions, cos_sin_cache=cache), expected, dtype)
    # The same kernel into NaN-poisoned outputs: every element written.
    op, launch = fused_gemm.rope.api.select(x, packed.bias, d, r, style, m, packed.weight.shape[0])
    outs = [torch.full((m, h, d), float("nan"), dtype=dtype, device="cuda") for h in (8, 2, 2)]
    check(op(x, packed.weight, packed.bias, positions, cache, 8, 2, *outs, launch=launch), expected, dtype)


@pytest.mark.parametrize("heads", [(8, 8), (8, 2), (16, 2)], ids=["mha", "gqa4", "gqa8"])
@pytest.mark.parametrize("m", [7, 129])
def test_gqa_ratios_and_int32_positions(heads, m):
    hq, hkv = heads
    x, w, b, positions, cache = problem(m, torch.bfloat16, 128, 128, False, hq, hkv, pos_dtype=torch.int32)
    packed = pack_qkv_rope(w, num_heads=hq, num_kv_heads=hkv, head_dim=128)
    check(qkv_rope(x, packed, positions=positions, cos_sin_cache=cache),
          reference(x, w, b, positions, cache, hq, hkv, 128, 128, "neox"), torch.bfloat16)


def test_fp16_partial_rotary_bias_long_positions_llama3_scaling():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    for m in (1, 16, 129):
        x, w, b, _, _ = problem(m, torch.float16, 128, 64, True, 4, 1)
        cache = rope_cos_sin_cache(131072, 64, base=500000.0, scaling=scaling, device="cuda")
        positions = torch.randint(100000, 131072, (m,), device="cuda")
        packed = pack_qkv_rope(w, b, num_heads=4, num_kv_heads=1, head_dim=128, rotary_dim=64)
        check(qkv_rope(x, packed, positions=positions, cos_sin_cache=cache),
              reference(x, w, b, positions, cache, 4, 1, 128, 64, "neox"), torch.float16)


def test_outputs_into_a_kv_cache_slice_and_nan_poison():
    """RopeOp writes k and v into given views (e.g. a contiguous KV cache at a slot range)."""
    m, hq, hkv, d = 17, 8, 2, 128
    x, w, _, positions, cache = problem(m, torch.bfloat16, d, d, False, hq, hkv)
    packed = pack_qkv_rope(w, num_heads=hq, num_kv_heads=hkv, head_dim=d)
    op, launch = fused_gemm.rope.api.select(x, None, d, d, "neox", m)
    k_cache = torch.full((2, 64, hkv, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    v_cache = torch.full_like(k_cache, float("nan"))
    q = torch.full((m, hq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = op(x, packed.weight, None, positions, cache, hq, hkv, q, k_cache[1, 5:5 + m], v_cache[1, 5:5 + m],
             launch=launch)
    check(got, reference(x, w, None, positions, cache, hq, hkv, d, d, "neox"), torch.bfloat16)
    assert got[1].data_ptr() == k_cache[1, 5].data_ptr()
    assert torch.isnan(k_cache[0]).all() and torch.isnan(k_cache[1, :5]).all() and torch.isnan(k_cache[1, 5 + m:]).all()


def _measured_rows():
    from fused_gemm.generator.rope.heuristics import ROWS, SHAPE_ROWS
    rows = [(f"any-m{b}", b, row) for b, row in ROWS.items()]
    return rows + [(f"{gpu}-{n}x{k}-m{b}", b, row) for gpu, shapes in SHAPE_ROWS.items()
                   for (n, k), by_bucket in shapes.items() for b, row in by_bucket.items()]


@pytest.mark.parametrize("bucket,row", [r[1:] for r in _measured_rows()], ids=[r[0] for r in _measured_rows()])
def test_measured_rows_kernels_match_float64(bucket, row):
    """Each kernel a measured row (heuristics.ROWS, SHAPE_ROWS of any GPU) picks, at an odd M of its
    bucket, with its launch options, every output element written."""
    from fused_gemm.generator.rope import RopeSpec
    m, hq, hkv, d = bucket - 3, 8, 2, 128
    spec, launch = row.apply(RopeSpec("bf16", d, d, "neox", False))
    x, w, _, positions, cache = problem(m, torch.bfloat16, d, d, False, hq, hkv)
    packed = pack_qkv_rope(w, num_heads=hq, num_kv_heads=hkv, head_dim=d)
    outs = [torch.full((m, h, d), float("nan"), dtype=torch.bfloat16, device="cuda") for h in (hq, hkv, hkv)]
    got = fused_gemm.jit.compile(spec)(x, packed.weight, None, positions, cache, hq, hkv, *outs, launch=launch)
    check(got, reference(x, w, None, positions, cache, hq, hkv, d, d, "neox"), torch.bfloat16)


def test_qkv_rope_in_cuda_graph_and_under_compile():
    m = 4
    x, w, _, positions, cache = problem(m, torch.bfloat16, 128, 128, False)
    packed = pack_qkv_rope(w, num_heads=8, num_kv_heads=2, head_dim=128)
    outs = qkv_rope(x, packed, positions=positions, cos_sin_cache=cache)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = qkv_rope(x, packed, positions=positions, cos_sin_cache=cache)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        positions.copy_(torch.randint(0, 4096, (m,), device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        check(outs, reference(x, w, None, positions, cache, 8, 2, 128, 128, "neox"), torch.bfloat16)

    def attention_inputs(x, positions):
        q, k, v = qkv_rope(x, packed, positions=positions, cos_sin_cache=cache)
        return q * 2, k, v

    compiled = torch.compile(attention_inputs, fullgraph=True)
    with torch.no_grad():
        for t in (7, 129):
            xt = torch.randn(t, K, dtype=torch.bfloat16, device="cuda")
            pt = torch.randint(0, 4096, (t,), device="cuda")
            for a, e in zip(compiled(xt, pt), attention_inputs(xt, pt)):
                assert torch.equal(a, e)
        with pytest.raises(ValueError, match="outside the cos/sin cache"):   # checked as in eager, outside a capture
            compiled(xt, torch.full_like(pt, 4096))


def test_unpacked_weight_warns_and_matches(monkeypatch):
    x, w, b, positions, cache = problem(7, torch.bfloat16, 64, 32, True)
    monkeypatch.setattr(fused_gemm.rope.api, "_warned_unpacked", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = qkv_rope(x, w, b, positions=positions, cos_sin_cache=cache, num_heads=8, num_kv_heads=2, head_dim=64,
                       rotary_dim=32)
    assert any("pack_qkv_rope" in str(c.message) for c in caught)
    check(got, reference(x, w, b, positions, cache, 8, 2, 64, 32, "neox"), torch.bfloat16)


def test_bad_inputs_raise_before_launch():
    x, w, _, positions, cache = problem(7, torch.bfloat16, 128, 128, False)
    packed = pack_qkv_rope(w, num_heads=8, num_kv_heads=2, head_dim=128)
    kw = dict(positions=positions, cos_sin_cache=cache)
    with pytest.raises(ValueError, match="outside the cos/sin cache"):
        qkv_rope(x, packed, positions=positions + 4096, cos_sin_cache=cache)
    with pytest.raises(ValueError, match="disagrees"):
        qkv_rope(x, packed, num_heads=4, **kw)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        pack_qkv_rope(torch.randn(9 * 128, K), num_heads=5, num_kv_heads=2, head_dim=128)
    with pytest.raises(ValueError, match="head_dim"):
        pack_qkv_rope(torch.randn(12 * 96, K), num_heads=8, num_kv_heads=2, head_dim=96)
    with pytest.raises(ValueError, match="rotary_dim"):
        pack_qkv_rope(w.cpu(), num_heads=8, num_kv_heads=2, head_dim=128, rotary_dim=40)
    with pytest.raises(TypeError, match="positions must be an int32 or int64"):
        qkv_rope(x, packed, positions=positions.float(), cos_sin_cache=cache)
    with pytest.raises(ValueError, match="cos_sin_cache must be"):
        qkv_rope(x, packed, positions=positions, cos_sin_cache=cache[:, :64].contiguous())
    with pytest.raises(TypeError, match="weight has dtype"):
        qkv_rope(x, pack_qkv_rope(w.half(), num_heads=8, num_kv_heads=2, head_dim=128), **kw)
    with pytest.raises(ValueError, match="weight has shape"):
        fused_gemm.rope.api._qkv_rope(x, packed.weight[:-128], None, positions, cache, 8, 2, 128, 128, "neox")
    with pytest.raises(RuntimeError, match="requires grad"):
        qkv_rope(x.clone().requires_grad_(), packed, **kw)
    with pytest.raises(ValueError, match="has 0 positions"):
        qkv_rope(x, packed, positions=positions, cos_sin_cache=cache[:0], check_positions=False)
    flat = torch.empty(cache.numel() + 1, device="cuda")
    with pytest.raises(ValueError, match="16-byte aligned"):
        qkv_rope(x, packed, positions=positions, cos_sin_cache=flat[1:].view_as(cache))
    op, launch = fused_gemm.rope.api.select(x, None, 128, 128, "neox", 7)
    q = torch.zeros(7, 8, 128, dtype=torch.bfloat16, device="cuda")
    inside_q = q.view(-1)[:28].view(torch.int64)          # 7 positions stored in q's own memory
    with pytest.raises(ValueError, match="q overlaps positions"):
        op(x, packed.weight, None, inside_q, cache, 8, 2, q, launch=launch, check_positions=False)
