"""The sweep's attention cases, and the SDPA baselines and float64 references that the attention
benchmarks under perf/ share with them.

* attention: M is the sequence length S (queries = keys), B = max(1, 16384 // S) sequences (16k
  tokens, as issue 7's bars), the preset's heads; the epilogue column says "causal" or "none".
  Baselines: SDPA's flash, memory-efficient and cuDNN backends, each where it runs; the row's
  "sdpa" column is the fastest of them in the same run.
* decode_attention: one new token per sequence over a cache of M keys, B sequences (the epilogue
  column: "b32"); SDPA (enable_gqa) on the cache as [B, Hkv, S, D] views, both in CUDA graphs.  The
  floor is the K + V bytes over the copy bandwidth, at every M.
"""
from __future__ import annotations

import math
from typing import Dict

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..attention.api import backend as attention_backend
from ..attention.api import select as attention_select
from ..decode.api import select as decode_select
from ..decode.op import MAX_TOKENS
from .ops import Calls, Case, poison, rel_error, written
from .timing import rotation_count

TOKENS = 16384
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}


def sdpa(backend, q, k, v, causal, gqa=False):
    """SDPA on flash-attn-layout tensors ([B, S, H, D]) with one backend forced."""
    def call():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal, enable_gqa=gqa)
    return call


def usable(call) -> bool:
    try:
        call()
        torch.cuda.synchronize()
        return True
    except RuntimeError:
        return False


def flops(b, h, sq, sk, d, causal) -> float:
    """4 * (query, key) pairs * D per head: QK^T and PV; causal counts only the pairs it computes."""
    pairs = sum(min(sk, max(0, i + 1 + sk - sq)) for i in range(sq)) if causal else sq * sk
    return 4.0 * b * h * pairs * d


def rel_error_attention(o, q, k, v, causal) -> float:
    """``o`` against float64 on the first batch entry, the first 2 heads and the last 256 queries
    (they see the most keys)."""
    g = q.shape[2] // k.shape[2]
    sq, sk = q.shape[1], k.shape[1]
    rows = slice(max(0, sq - 256), sq)
    heads = min(2, q.shape[2])
    qd = q[0, rows, :heads].double().transpose(0, 1)
    kv_heads = -(-heads // g)                                # the KV heads those q heads read
    kd = k[0, :, :kv_heads].double().repeat_interleave(g, 1)[:, :heads].transpose(0, 1)
    vd = v[0, :, :kv_heads].double().repeat_interleave(g, 1)[:, :heads].transpose(0, 1)
    s = qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(rows.start, sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, -math.inf)
    ref = (torch.softmax(s, -1) @ vd).transpose(0, 1)
    return rel_error(o[0, rows, :heads], ref)


def attention_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "causal", with_compile: bool = False,
                   *, heads: int, kv_heads: int, head_dim: int) -> Case:
    """fused_gemm.attention over B = max(1, 16384 // M) sequences of M tokens; n / k are the q / kv widths."""
    import fused_gemm
    if epilogue not in ("causal", "none"):
        raise ValueError(f"attention's epilogue column is 'causal' or 'none', not {epilogue!r}")
    causal = epilogue == "causal"
    b, d = max(1, TOKENS // m), head_dim

    def make():
        q = torch.randn(b, m, heads, d, dtype=dtype, device="cuda")
        kv = [torch.randn(b, m, kv_heads, d, dtype=dtype, device="cuda") for _ in range(2)]
        return q, kv[0], kv[1]

    q, kk, v = make()   # attention reads each input once per call: no rotation past the L2 needed
    gqa = kv_heads != heads
    baselines: Dict[str, Calls] = {}
    for name, backend in BACKENDS.items():
        call = sdpa(backend, q, kk, v, causal, gqa)
        if usable(call):
            baselines[name] = [call]

    def check() -> float:   # every output NaN-poisoned; float64 on a slice (rel_error_attention)
        q, kk, v = make()
        poison(q.shape, dtype=dtype)
        o = fused_gemm.attention(q, kk, v, causal=causal)
        return rel_error_attention(o, q, kk, v, causal) if written(o) else float("nan")

    # fused_gemm.attention runs short causal calls (and single queries) on the decode kernel
    short = (causal or m == 1) and m <= MAX_TOKENS and attention_backend(q.get_device()) == "sm90a"
    kernel = f"{decode_select(q).spec.uri} (short)" if short else attention_select(q, causal, m).spec.uri
    nbytes = 2.0 * (2 * q.numel() + 2 * kk.numel())
    return Case([lambda: fused_gemm.attention(q, kk, v, causal=causal)], baselines, flops(b, heads, m, m, d, causal),
                nbytes, 0.0, check, kernel=f"{kernel} B={b}", extra={"best_of": {"sdpa": tuple(BACKENDS)}})


def decode_attention_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "b32",
                          with_compile: bool = False, *, heads: int, kv_heads: int, head_dim: int) -> Case:
    """fused_gemm.decode_attention: one token per sequence, B sequences (epilogue 'b<B>'), M cached keys each."""
    import fused_gemm
    if not (epilogue.startswith("b") and epilogue[1:].isdigit() and int(epilogue[1:]) > 0):
        raise ValueError(f"decode_attention's epilogue column is the batch, 'b<B>' (e.g. b32), not {epilogue!r}")
    b, d = int(epilogue[1:]), head_dim

    def make():
        q = torch.randn(b, heads, d, dtype=dtype, device="cuda")
        kc, vc = (torch.randn(b, m, kv_heads, d, dtype=dtype, device="cuda") for _ in range(2))
        return q, kc, vc, torch.full((b,), m, dtype=torch.int32, device="cuda")

    sets = [make() for _ in range(rotation_count(4 * b * m * kv_heads * d))]   # caches rotated past the L2
    q, kc, vc, lens = sets[0]

    def sdpa_decode(q, kc, vc):
        return F.scaled_dot_product_attention(q[:, :, None], kc.transpose(1, 2), vc.transpose(1, 2),
                                              enable_gqa=kv_heads != heads)

    def check() -> float:   # every output NaN-poisoned; float64 on two sequences
        q, kc, vc, lens = make()
        poison(q.shape, dtype=dtype)
        out = fused_gemm.decode_attention(q, kc, vc, lens)
        if not written(out):
            return float("nan")
        rows = min(b, 2)
        ref = F.scaled_dot_product_attention(q[:rows, :, None].double(), kc[:rows].transpose(1, 2).double(),
                                             vc[:rows].transpose(1, 2).double(), enable_gqa=kv_heads != heads)
        return rel_error(out[:rows], ref[:, :, 0])

    kv_bytes = 2.0 * kc.numel() * kc.element_size()
    ours = [(lambda s=s: fused_gemm.decode_attention(*s, check_lengths=False)) for s in sets]
    sdpa_calls = [(lambda s=s: sdpa_decode(*s[:3])) for s in sets]
    return Case(ours, {"sdpa": sdpa_calls}, flops(b, heads, 1, m, d, False), kv_bytes + 4.0 * q.numel(), kv_bytes,
                check, kernel=decode_select(q).spec.uri, graph=True, floor_every_m=True)
