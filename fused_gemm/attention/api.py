"""``fused_gemm.attention``: flash-attention forward (CUTLASS example 88's sm90 kernel, extended; on
other GPUs example 41's sm80 kernel), and its op.

    fused_gemm::attention(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                          max_seqlen_k, return_lse) -> (Tensor o, Tensor lse)
(lse is empty when not asked for).  A plain eager call skips the dispatcher.

Backend: an sm_90 GPU runs the sm90a kernels, any other GPU (compute capability 8.0 or later) the
sm80 ones.  FUSED_GEMM_ATTENTION_BACKEND=sm80 (or sm90a; auto, the default) forces one, read on
every call, so that eager calls, CUDA graphs and torch.compile all see it (the op's schema stays
flash-attn's): that is how the tests run the sm80 kernels on an H100.  On sm90a, a fixed-length causal
call of at most 16 queries per sequence (or one query) runs the decode family's kernel (_on_decode_kernel).
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import torch

from .. import jit
from ..decode.api import select as decode_select
from ..decode.api import selected as decode_selected
from ..decode.op import MAX_TOKENS as SHORT_MAX_Q
from ..decode.op import DecodeOp
from ..generator.attention.heuristics import pick, row_index
from ..kernel_op import DTYPE_NAMES
from ..torch_ops import _dispatch_modes, _is_compiling, define
from .op import AttentionOp, check_arguments

Tensor = torch.Tensor
_selection = jit.Selection("attention")     # key -> compiled AttentionOp
_specs = jit.Selection("attention")         # key -> its AttentionSpec (nothing built)
BACKEND_ENV = "FUSED_GEMM_ATTENTION_BACKEND"
BACKENDS = {"auto": None, "sm90a": "sm90a", "sm90": "sm90a", "sm80": "sm80"}
_device_arch: Dict[int, str] = {}


def backend(dev: int) -> str:
    """The kernel arch attention uses on cuda:``dev``: the forced one, or the GPU's own."""
    forced = os.environ.get(BACKEND_ENV)
    if forced:
        if forced not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV}={forced!r}: choose one of {sorted(BACKENDS)}")
        if BACKENDS[forced] is not None:
            return BACKENDS[forced]
    arch = _device_arch.get(dev)
    if arch is None:
        if dev < 0:              # not a CUDA tensor: the selection refuses it
            return "sm90a"
        cc = torch.cuda.get_device_capability(dev)
        if cc < (8, 0):
            raise RuntimeError(f"attention needs a GPU of compute capability 8.0 or later; cuda:{dev} is "
                               f"{cc[0]}.{cc[1]} ({torch.cuda.get_device_name(dev)})")
        arch = _device_arch[dev] = "sm90a" if cc == (9, 0) else "sm80"
    return arch


def _key(q: Tensor, causal: bool, seqlen_q: int):
    arch = backend(q.get_device())
    return arch, q.dtype, q.shape[-1], bool(causal), row_index(q.shape[-1], bool(causal), seqlen_q, arch)


def choose(q: Tensor, causal: bool, seqlen_q: int, key=None):
    """The prefill kernel's spec for this call (the heuristic table's row), without building it."""
    key = key or _key(q, causal, seqlen_q)
    return _specs.get(key, "q", q, lambda: pick(DTYPE_NAMES[q.dtype], q.shape[-1], key[3], seqlen_q, key[0]))


def select(q: Tensor, causal: bool, seqlen_q: int, key=None) -> AttentionOp:
    """The compiled prefill kernel for this call (built on first use)."""
    key = key or _key(q, causal, seqlen_q)
    return _selection.get(key, "q", q, lambda: jit.compile(choose(q, causal, seqlen_q, key)))


def _attention(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse,
               check_lengths=False):
    if not isinstance(q, Tensor):
        raise TypeError(f"q must be a torch.Tensor, got {type(q).__name__}")
    if q.dim() not in (3, 4):
        raise ValueError(f"q must be [B, Sq, Hq, D] (or packed [total, Hq, D] with cu_seqlens), got {tuple(q.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    seqlen_q = max_seqlen_q if cu_seqlens_q is not None and type(max_seqlen_q) is int else q.shape[-3]
    key = _key(q, causal, seqlen_q)   # once: the backend ($FUSED_GEMM_ATTENTION_BACKEND) checked is the one run
    spec = choose(q, causal, seqlen_q, key)
    checked = check_arguments(spec, q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              check_lengths)
    if (causal or seqlen_q == 1) and seqlen_q <= SHORT_MAX_Q and not checked.varlen and spec.arch == "sm90a":
        routed = _on_decode_kernel(q, k, v, checked.scale, return_lse, checked.strides)
        if routed is not None:
            return routed
    # Built only here: a call the decode kernel serves never waits for the prefill kernel's build.
    op = select(q, causal, seqlen_q, key)
    op.load_on(q, checked.dev)
    return op.enqueue(q, k, v, checked, return_lse)


def _on_decode_kernel(q, k, v, scale, return_lse, strides):
    """A causal prefill of Sq <= SHORT_MAX_Q queries over Sk >= Sq keys (or one query over any) is what the
    decode kernel computes for Sq new tokens over full caches of Sk keys (its token t sees keys
    j <= Sk - Sq + t: attention's bottom-right mask); it packs a GQA group's queries into 16-row tiles
    where the prefill kernel would spend a 128-row tile on each head's few queries (the caller routes
    sm90a calls only: the decode kernels are built for it alone).  None: not this case, or a CUDA-graph
    capture before the decode kernel was loaded (warm up with the short shapes first): the prefill
    kernel serves those."""
    b, sq, hq, _ = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    dev = q.get_device()
    if not 1 <= sq <= min(sk, SHORT_MAX_Q) or not DecodeOp.fits(b, sq, hq, hkv, sk):
        return None
    if torch.cuda.is_current_stream_capturing():
        op = decode_selected(q)
        if op is None or not op.ready_on(dev):
            return None
        return op.enqueue(q, k, v, None, scale, sk, return_lse, None, strides)
    return decode_select(q).enqueue(q, k, v, None, scale, sk, return_lse, None, strides)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: Optional[float] = None,
              cu_seqlens_q: Optional[Tensor] = None, cu_seqlens_k: Optional[Tensor] = None,
              max_seqlen_q: Optional[int] = None, max_seqlen_k: Optional[int] = None, return_lse: bool = False,
              check_lengths: bool = True):
    """softmax(scale * q k^T) v, flash-attn's layout and conventions, in one kernel.

    q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D] (Hq a multiple of Hkv: GQA/MQA read k/v in place), or packed
    [total, H, D] with int32 ``cu_seqlens_q``/``cu_seqlens_k`` [B + 1] and ``max_seqlen_q``/``max_seqlen_k``.
    bf16 or fp16; D in 64, 128, 256.  ``causal`` aligns the mask bottom-right (query i of Sq sees keys
    j <= i + Sk - Sq); a query that sees no key gets 0.  ``scale`` defaults to 1/sqrt(D).  Returns o
    (like q), or (o, lse) with ``return_lse``: fp32 [B, Hq, Sq] (packed: [Hq, total_q]), natural log.
    Eager varlen calls check cu_seqlens against the packed tensors and max_seqlen (a sync;
    ``check_lengths=False`` skips it, as do CUDA-graph captures and torch.compile).  An sm_90 GPU
    runs example 88's kernels (a causal call of at most 16 queries per sequence, or one query, fixed
    length: the decode kernel), any other (8.0+) example 41's; $FUSED_GEMM_ATTENTION_BACKEND
    (``sm80``, ``sm90a``, ``auto``) forces one.
    """
    args = (q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
    if (type(q) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(q, Tensor):
        o, lse = _attention(*args, check_lengths=check_lengths)
    else:
        o, lse = torch.ops.fused_gemm.attention(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k,
                                                max_seqlen_q, max_seqlen_k, return_lse)
        lse = lse if return_lse else None
    return (o, lse) if return_lse else o


def _impl(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse):
    o, lse = _attention(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
    return o, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _fake(q, k, v, causal, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse):
    if not return_lse:
        lse = q.new_empty((0,), dtype=torch.float32)
    elif cu_seqlens_q is not None:
        lse = q.new_empty((q.shape[-2], q.shape[0]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return torch.empty_like(q, memory_format=torch.contiguous_format), lse


define("attention", "(Tensor q, Tensor k, Tensor v, bool causal, float? scale, Tensor? cu_seqlens_q, "
       "Tensor? cu_seqlens_k, int? max_seqlen_q, int? max_seqlen_k, bool return_lse) -> (Tensor, Tensor)",
       _impl, _fake)
