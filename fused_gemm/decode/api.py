"""``fused_gemm.decode_attention``: new tokens' attention over a KV cache, and its op.

    fused_gemm::decode_attention(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse)
        -> (Tensor o, Tensor lse)        (lse is empty when not asked for)
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import jit
from ..generator.decode.heuristics import pick
from ..kernel_op import DTYPE_NAMES
from ..torch_ops import _dispatch_modes, _is_compiling, define
from .op import DecodeOp

Tensor = torch.Tensor
_selection = jit.Selection("decode_attention")


def select(q: Tensor) -> DecodeOp:
    return _selection.get((q.dtype, q.shape[-1]), "q", q, lambda: jit.compile(pick(DTYPE_NAMES[q.dtype], q.shape[-1])))


def selected(q: Tensor) -> Optional[DecodeOp]:
    """The op select(q) chose before, or None (nothing is chosen or built here)."""
    return _selection.peek((q.dtype, q.shape[-1]))


def _decode(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse, check_lengths=False):
    if not isinstance(q, Tensor):
        raise TypeError(f"q must be a torch.Tensor, got {type(q).__name__}")
    return select(q).run(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse, check_lengths)


def decode_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor, *,
                     scale: Optional[float] = None, max_seqlen_k: Optional[int] = None, return_lse: bool = False,
                     check_lengths: bool = True):
    """softmax(scale * q K^T) V for each sequence's first ``cache_seqlens[b]`` cached keys.

    q [B, Hq, D] (one new token) or [B, T, Hq, D] (T <= 16, e.g. speculative decoding: token t sits at
    position len - T + t and sees keys up to it); caches [B, S_max, Hkv, D] (Hq a multiple of Hkv: a GQA
    group shares every K/V read); cache_seqlens int32 [B] (clamped to S_max), read on the GPU only, so
    the call is CUDA-graph capturable and a captured graph serves changing lengths.  ``max_seqlen_k``
    (optional, <= S_max) only sizes the split of the keys across CTAs.  Returns o like q, or (o, lse)
    with fp32 lse [B, Hq(, T)].  Eager calls check the lengths against S_max (a sync;
    ``check_lengths=False`` skips it; inside a CUDA graph or torch.compile they are clamped instead).
    """
    args = (q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse)
    if (type(q) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(q, Tensor):
        o, lse = _decode(*args, check_lengths=check_lengths)
    else:
        o, lse = torch.ops.fused_gemm.decode_attention(*args)
        lse = lse if return_lse else None
    return (o, lse) if return_lse else o


def _impl(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse):
    o, lse = _decode(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse)
    return o, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _fake(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse):
    if not return_lse:
        lse = q.new_empty((0,), dtype=torch.float32)
    elif q.dim() == 3:
        lse = q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return torch.empty_like(q, memory_format=torch.contiguous_format), lse


define("decode_attention", "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor cache_seqlens, float? scale, "
       "int? max_seqlen_k, bool return_lse) -> (Tensor, Tensor)", _impl, _fake)
