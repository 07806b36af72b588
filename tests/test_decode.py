"""The decode family (attention of new tokens over a KV cache, split keys + LSE merge) on an sm_90
GPU against a float64 reference (skipped without one)."""
import math

import pytest
import torch

import fused_gemm
import fused_gemm.decode.api as decode_api
from fused_gemm.generator.decode.heuristics import pick
from test_attention import check, check_lse, poisoned

pytestmark = pytest.mark.gpu


def reference(q, k_cache, v_cache, lengths, scale):
    """float64 o [B, T, Hq, D] and lse [B, Hq, T]: token t of T sees keys j <= len - T + t."""
    b, t, hq, d = q.shape
    hkv = k_cache.shape[2]
    outs, lses = [], []
    for i, n in enumerate(lengths):
        k = k_cache[i, :n].double().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)   # [Hq, n, D]
        v = v_cache[i, :n].double().repeat_interleave(hq // hkv, dim=1).transpose(0, 1)
        s = (q[i].double().transpose(0, 1) @ k.transpose(-1, -2)) * scale                  # [Hq, T, n]
        pos = torch.arange(t, device=q.device)[:, None] + n - t
        s = s.masked_fill(torch.arange(n, device=q.device)[None, :] > pos, -math.inf)
        lse = torch.logsumexp(s, -1)
        p = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)
        outs.append((p @ v).transpose(0, 1))
        lses.append(torch.where(torch.isinf(lse), math.inf, lse))
    return torch.stack(outs), torch.stack(lses)


def problem(lengths, s_max, hq, hkv, d, tokens=1, dtype=torch.bfloat16):
    b = len(lengths)
    q = torch.randn(b, tokens, hq, d, dtype=dtype, device="cuda")
    k = torch.randn(b, s_max, hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(b, s_max, hkv, d, dtype=dtype, device="cuda")
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    return q, k, v, seqlens


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("group", [1, 4, 8], ids=["mha", "gqa4", "gqa8"])
def test_decode_matches_float64(dtype, d, group):
    lengths = [1, 17, 1000, 2048]
    q, k, v, seqlens = problem(lengths, 2048, 2 * group, 2, d, dtype=dtype)
    ptr = poisoned((len(lengths), 1, 2 * group, d), dtype)
    o, lse = fused_gemm.decode_attention(q[:, 0], k, v, seqlens, return_lse=True)
    assert o.shape == (len(lengths), 2 * group, d) and lse.shape == (len(lengths), 2 * group)
    if o.data_ptr() == ptr:
        assert not torch.isnan(o).any()
    ref_o, ref_lse = reference(q, k, v, lengths, 1 / math.sqrt(d))
    check(o, ref_o[:, 0], dtype)
    check_lse(lse, ref_lse[..., 0])


def test_one_long_sequence_splits_and_mqa_and_d256():
    """B = 1: the keys are split across many CTAs and merged by LSE; MQA (Hkv = 1) with 32 query heads
    takes two 16-row groups."""
    q, k, v, seqlens = problem([30001], 32768, 32, 1, 128)
    o = fused_gemm.decode_attention(q, k, v, seqlens, scale=0.05)
    check(o, reference(q, k, v, [30001], 0.05)[0], torch.bfloat16)
    q, k, v, seqlens = problem([3000, 77], 4096, 8, 2, 256)
    check(fused_gemm.decode_attention(q, k, v, seqlens), reference(q, k, v, [3000, 77], 1 / 16)[0], torch.bfloat16)


def test_forced_key_splits():
    """launch=LaunchOptions(splits=n) on the op: n key ranges a sequence, merged by LSE, whatever the
    heuristic would pick (here one range: 128 groups of short sequences); other options are refused."""
    from fused_gemm.decode.api import select
    from fused_gemm.generator import LaunchOptions
    lengths = [1, 300, 1000, 2048] * 4
    q, k, v, seqlens = problem(lengths, 2048, 32, 8, 128)
    op = select(q)
    ref = reference(q, k, v, lengths, 1 / math.sqrt(128))[0]
    for n in (2, 3, 7, 19):   # 19: the merge's batches of 8 splits, the last one partial
        check(op(q, k, v, seqlens, launch=LaunchOptions(splits=n))[0], ref, torch.bfloat16)
    with pytest.raises(ValueError, match="takes launch.splits only"):
        op(q, k, v, seqlens, launch=LaunchOptions(swizzle=2))


@pytest.mark.parametrize("pdl", [True, False], ids=["pdl", "plain"])
def test_reads_what_the_previous_kernel_wrote(pdl):
    """Launched with PDL (an unsplit launch), the kernel may start before the previous kernel ends: it
    must wait for it before reading q, the caches and the lengths.  The sharpest case: two calls
    chained, the first's output the second's q (the first lets the next kernel start before it writes
    O).  Then torch kernels rewriting the caches and lengths just before each call, and B = 1 (split
    keys and the merge, launched without PDL).  pdl=False: the plain build agrees."""
    from dataclasses import replace
    from fused_gemm import jit
    from fused_gemm.generator.decode.heuristics import splits
    op = jit.compile(replace(pick("bf16", 128), pdl=pdl))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lengths = [900, 3, 2047, 1500] * 8
    q, k, v, seqlens = problem(lengths, 2048, 8, 8, 128)
    if pdl:
        assert splits(len(lengths) * 8, 2048, 128, sms) == 1, "this case must take the (PDL) unsplit launch"
    scale = 1 / math.sqrt(128)
    for _ in range(3):
        o1, _ = op.run(q[:, 0], k, v, seqlens, None, None, False, False)
        o2, _ = op.run(o1, k, v, seqlens, None, None, False, False)
        check(o2, reference(o1[:, None], k, v, lengths, scale)[0][:, 0], torch.bfloat16)
    for lengths, heads in (([20000], (8, 2)), (lengths, (8, 8))):
        q, k, v, seqlens = problem(lengths, 20480 if len(lengths) == 1 else 2048, *heads, 128)
        for trial in range(3):
            k.copy_(torch.randn_like(k))
            v.mul_(-1.0)
            q.add_(1.0)
            seqlens.sub_(trial)
            o, _ = op.run(q[:, 0], k, v, seqlens, None, None, False, False)
            check(o, reference(q, k, v, [n - trial for n in lengths], scale)[0][:, 0], torch.bfloat16)
            seqlens.add_(trial)


def test_speculative_tokens_are_causal_among_themselves():
    lengths = [5, 600, 1500]
    q, k, v, seqlens = problem(lengths, 1536, 8, 2, 128, tokens=4, dtype=torch.float16)
    o, lse = fused_gemm.decode_attention(q, k, v, seqlens, return_lse=True)
    ref_o, ref_lse = reference(q, k, v, lengths, 1 / math.sqrt(128))
    check(o, ref_o, torch.float16)
    check_lse(lse, ref_lse)


def test_empty_sequences_give_zero_and_infinite_lse():
    q, k, v, seqlens = problem([0, 40], 256, 4, 4, 64)
    o, lse = fused_gemm.decode_attention(q, k, v, seqlens, return_lse=True)
    assert torch.all(o[0] == 0) and torch.all(torch.isinf(lse[0]))
    check(o[1:], reference(q[1:], k[1:], v[1:], [40], 1 / 8)[0], torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [64, 128])
def test_stale_slots_past_the_length_are_never_used(dtype, d):
    """A cache's slots past a sequence's length hold whatever an earlier step left there (NaN here).  The
    unsplit kernel loads its first stages before it knows the length; what they bring past it must not
    reach O (0 * NaN is NaN), in the partial tile and in whole tiles past the length."""
    lengths = [1, 17, 64, 100, 128, 130, 191, 0]
    q, k, v, seqlens = problem(lengths, 192, 8, 2, d, dtype=dtype)
    ref = reference(q, k, v, lengths, 1 / math.sqrt(d))[0][:, 0]
    for i, n in enumerate(lengths):
        k[i, n:] = float("nan")
        v[i, n:] = float("nan")
    o = fused_gemm.decode_attention(q[:, 0], k, v, seqlens)
    assert not torch.isnan(o).any()
    check(o[:-1], ref[:-1], dtype)
    assert torch.all(o[-1] == 0)


def test_graph_replays_with_changing_lengths_and_compile():
    lengths = [100, 2000]
    q, k, v, seqlens = problem(lengths, 4096, 8, 2, 128)
    o = fused_gemm.decode_attention(q, k, v, seqlens)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = fused_gemm.decode_attention(q, k, v, seqlens)
    for new in ([101, 2001], [4096, 1], [0, 3000]):
        seqlens.copy_(torch.tensor(new, dtype=torch.int32))
        q.copy_(torch.randn_like(q))
        graph.replay()
        ref = reference(q, k, v, new, 1 / math.sqrt(128))[0]
        assert torch.all(o[0] == 0) if new[0] == 0 else True
        rows = [i for i, n in enumerate(new) if n > 0]
        check(o[rows], ref[rows], torch.bfloat16)

    @torch.compile(fullgraph=True)
    def step(q, k, v, seqlens):
        return fused_gemm.decode_attention(q, k, v, seqlens, return_lse=True)
    seqlens.copy_(torch.tensor(lengths, dtype=torch.int32))
    o, lse = step(q, k, v, seqlens)
    ref_o, ref_lse = reference(q, k, v, lengths, 1 / math.sqrt(128))
    check(o, ref_o, torch.bfloat16)
    check_lse(lse, ref_lse)


def test_warmup_then_first_call_inside_a_capture():
    q, k, v, seqlens = problem([30, 60], 128, 8, 8, 64, dtype=torch.float16)
    decode_api._selection.clear()
    fused_gemm.warmup(pick("fp16", 64))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = fused_gemm.decode_attention(q, k, v, seqlens)
    graph.replay()
    check(o, reference(q, k, v, [30, 60], 1 / 8)[0], torch.float16)


def test_bad_input_is_refused_before_launch():
    q, k, v, seqlens = problem([10, 20], 64, 6, 4, 128)
    with pytest.raises(ValueError, match="multiple of the caches' 4"):
        fused_gemm.decode_attention(q, k, v, seqlens)
    q, k, v, seqlens = problem([10, 20], 64, 4, 4, 96)
    with pytest.raises(ValueError, match="head_dim 96"):
        fused_gemm.decode_attention(q, k, v, seqlens)
    q, k, v, seqlens = problem([10, 65], 64, 4, 4, 64)
    with pytest.raises(ValueError, match="outside the caches"):
        fused_gemm.decode_attention(q, k, v, seqlens)
    seqlens[1] = 20
    with pytest.raises(TypeError, match="dtype"):
        fused_gemm.decode_attention(q, k.half(), v, seqlens)
    with pytest.raises(TypeError, match="int32"):
        fused_gemm.decode_attention(q, k, v, seqlens.long())
    with pytest.raises(ValueError, match="1 to 16"):
        fused_gemm.decode_attention(q.expand(2, 17, 4, 64), k, v, seqlens)
    with pytest.raises(ValueError, match="differ"):
        fused_gemm.decode_attention(q, k, v[:, :32], seqlens)
