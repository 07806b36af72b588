"""AttentionOp: one compiled flash-attention forward kernel (sm90a or sm80), with the one validation
path of the attention ops (flash-attn's layouts: q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D], or packed
[T, H, D] with int32 cu_seqlens).  Launches are graph-capturable; only the optional eager check of
cu_seqlens (check_lengths) synchronises."""
from __future__ import annotations

import math
import operator
import types
from typing import NamedTuple, Optional, Tuple

import torch

from .. import checks
from ..checks import INT32_LIMIT
from ..generator.attention import PROBLEM, AttentionSpec
from ..kernel_op import TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary

# `fused_gemm.attention` is the function (fused_gemm/__init__.py loads it on first access), but the
# import system binds this package over that name when the package is imported first (by
# fused_gemm.compile(AttentionSpec(...)), say): drop that binding so the lazy lookup answers again.
import fused_gemm as _fused_gemm  # noqa: E402

if isinstance(vars(_fused_gemm).get("attention"), types.ModuleType):
    del _fused_gemm.attention

Tensor = torch.Tensor
GRID_LIMIT = 65535       # CUDA's gridDim.y / gridDim.z: heads and batch
# The order AttentionOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("q", "k", "v", "o", "lse", "q_row", "q_batch", "q_head", "k_row", "k_batch", "k_head", "v_row",
              "v_batch", "v_head", "o_row", "o_batch", "o_head", "lse_batch", "lse_head", "cu_q", "cu_k", "batch",
              "num_heads", "num_kv_heads", "head_dim", "max_q", "max_k", "total_q", "total_k", "scale", "pdl",
              "device", "reserved", "workspace", "workspace_bytes", "stream")


def _strides(name: str, t: Tensor, itemsize: int) -> Tuple[int, ...]:
    """(token, batch, head) strides of a [B, S, H, D] (or packed [T, H, D]) tensor that TMA can read."""
    stride = checks.head_dim_last(name, t, itemsize, INT32_LIMIT)
    if t.dim() == 4:
        return stride[1], stride[0], stride[2]
    return stride[0], 0, stride[1]


def _check_cu_seqlens(name: str, t: Tensor, total: int, max_len: int) -> None:
    """Cumulative lengths from 0, non-decreasing, within the packed tensor and max_len (a sync)."""
    lengths = t[1:] - t[:-1]
    first, last, shortest, longest = (int(x) for x in torch.stack((t[0], t[-1], lengths.min(), lengths.max())).cpu())
    if first != 0 or shortest < 0 or last > total or longest > max_len:
        raise ValueError(f"{name} must start at 0, never decrease and end within the {total} packed tokens, with no "
                         f"sequence longer than max_seqlen {max_len}; got first {first}, last {last}, lengths "
                         f"{shortest}..{longest}")


def _cu_seqlens(name: str, t, batch: Optional[int], dev: int) -> int:
    if not isinstance(t, Tensor) or t.dtype is not torch.int32 or t.dim() != 1:
        raise TypeError(f"{name} must be an int32 [batch + 1] tensor of cumulative lengths")
    if t.get_device() != dev:
        raise ValueError(f"{name} is on {t.device}, but q is on cuda:{dev}")
    if batch is not None and t.shape[0] != batch + 1:
        raise ValueError(f"{name} has {t.shape[0]} entries, expected {batch + 1} (as cu_seqlens_q)")
    if t.shape[0] < 2 or (t.shape[0] > 1 and t.stride(0) != 1):
        raise ValueError(f"{name} must be contiguous with at least 2 entries")
    return t.data_ptr()


class Checked(NamedTuple):
    """What check_arguments() accepted: the problem's sizes, the cu_seqlens pointers (0: fixed length),
    the scale, and q's, k's and v's (batch, token, head) strides in elements."""
    dev: int
    varlen: bool
    batch: int
    hq: int
    hkv: int
    max_q: int
    max_k: int
    total_q: int
    total_k: int
    cu_q: int
    cu_k: int
    scale: float
    strides: Tuple[Tuple[int, int, int], ...]


def check_arguments(spec: AttentionSpec, q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                    check_lengths=False) -> Checked:
    """The one validation path of the attention ops: every argument against ``spec``'s kernel, before
    anything is built or launched (fused_gemm.attention's short route gives what this returns to the
    decode kernel's enqueue, so that a call the decode kernel serves never builds the prefill kernel)."""
    dtype = TORCH_DTYPES[spec.dtype]
    itemsize = dtype.itemsize
    checks.tensor("q", q, dtype, None)
    dev = q.get_device()
    if dev < 0:
        raise ValueError(f"q is on {q.device}; fused-gemm kernels run on CUDA devices")
    checks.tensor("k", k, dtype, dev)
    checks.tensor("v", v, dtype, dev)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    rank = 3 if varlen else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != rank:
            layout = "packed [total, H, D] with cu_seqlens" if varlen else "[B, S, H, D]"
            raise ValueError(f"{name} must be {layout}, got shape {tuple(t.shape)}")
    D = spec.head_dim
    if q.shape[-1] != D or k.shape[-1] != D or v.shape[-1] != D:
        raise ValueError(f"head dims q {q.shape[-1]}, k {k.shape[-1]}, v {v.shape[-1]}: this kernel takes {D}")
    if k.shape != v.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape")
    hq, hkv = q.shape[-2], k.shape[-2]
    if hq < 1:
        raise ValueError(f"q has no heads (shape {tuple(q.shape)})")
    if hkv < 1 or hq % hkv:
        raise ValueError(f"q has {hq} heads, not a multiple of k/v's {hkv} (GQA needs Hq % Hkv == 0)")
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("varlen attention needs both cu_seqlens_q and cu_seqlens_k")
        if max_seqlen_q is None or max_seqlen_k is None:
            raise ValueError("varlen attention needs max_seqlen_q and max_seqlen_k (reading them from "
                             "cu_seqlens would synchronise)")
        cu_q = _cu_seqlens("cu_seqlens_q", cu_seqlens_q, None, dev)
        batch = cu_seqlens_q.shape[0] - 1
        cu_k = _cu_seqlens("cu_seqlens_k", cu_seqlens_k, batch, dev)
        try:
            max_q, max_k = operator.index(max_seqlen_q), operator.index(max_seqlen_k)
        except TypeError:
            raise TypeError("max_seqlen_q and max_seqlen_k must be Python ints") from None
        total_q, total_k = q.shape[0], k.shape[0]
        if max_q < 0 or max_k < 0 or max_q > total_q or max_k > total_k:
            raise ValueError(f"max_seqlen_q {max_q} / max_seqlen_k {max_k} must lie in [0, total tokens "
                             f"{total_q} / {total_k}]")
        if check_lengths and not torch.cuda.is_current_stream_capturing():
            _check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, total_q, max_q)
            _check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, total_k, max_k)
    else:
        if k.shape[0] != q.shape[0]:
            raise ValueError(f"q has batch {q.shape[0]}, k/v {k.shape[0]}")
        batch, max_q, max_k = q.shape[0], q.shape[1], k.shape[1]
        cu_q = cu_k = 0
        total_q, total_k = batch * max_q, batch * max_k
    for name, value in (("tokens", total_q), ("tokens", total_k), ("batch", batch)):
        if value >= INT32_LIMIT - 1:
            raise ValueError(f"{value} {name} is too many (the kernel's sizes are 32-bit)")
    q_tiles = -(-max_q // spec.block_m)
    # A persistent CTA's tile index steps by the grid (up to 2^16 CTAs) past the last tile: keep it 32-bit.
    if batch > GRID_LIMIT or hq > GRID_LIMIT or q_tiles * batch * hq >= INT32_LIMIT - (1 << 16):
        raise ValueError(f"batch {batch} and heads {hq} must be <= {GRID_LIMIT} (CUDA grid), with "
                         f"Q tiles x batch x heads < 2^31 - 2^16")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    scale = checks.scalar("scale", scale)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    checks.refuse_grad("attention", q, k, v)
    q_row, q_batch, q_head = _strides("q", q, itemsize)
    k_row, k_batch, k_head = _strides("k", k, itemsize)
    v_row, v_batch, v_head = _strides("v", v, itemsize)
    return Checked(dev, varlen, batch, hq, hkv, max_q, max_k, total_q, total_k, cu_q, cu_k, scale,
                   ((q_batch, q_row, q_head), (k_batch, k_row, k_head), (v_batch, v_row, v_head)))


class AttentionOp(KernelOp):
    """A compiled attention kernel: ``op(q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k, return_lse)`` -> (o, lse or None)."""

    def __init__(self, spec: AttentionSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._size = self._dtype.itemsize

    def __call__(self, q, k, v, *, scale: Optional[float] = None, cu_seqlens_q=None, cu_seqlens_k=None,
                 max_seqlen_q: Optional[int] = None, max_seqlen_k: Optional[int] = None, return_lse: bool = False,
                 check_lengths: bool = True):
        return self.run(q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse,
                        check_lengths)

    def run(self, q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse,
            check_lengths=False):
        """Validate, then launch on q's device's current stream: (o, lse or None)."""
        checked = self.check(q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, check_lengths)
        return self.enqueue(q, k, v, checked, return_lse)

    def check(self, q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              check_lengths=False) -> "Checked":
        """check_arguments() against this kernel's spec, then this kernel loaded on q's device."""
        checked = check_arguments(self.spec, q, k, v, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, check_lengths)
        self.load_on(q, checked.dev)
        return checked

    def enqueue(self, q, k, v, c: "Checked", return_lse):
        """The launch, on what check_arguments() accepted (as DecodeOp.enqueue on what its run checked): (o, lse or None)."""
        spec, dev, varlen, batch, hq, hkv = self.spec, c.dev, c.varlen, c.batch, c.hq, c.hkv
        max_q, max_k, total_q, total_k, D = c.max_q, c.max_k, c.total_q, c.total_k, spec.head_dim
        cu_q, cu_k = c.cu_q, c.cu_k
        (q_batch, q_row, q_head), (k_batch, k_row, k_head), (v_batch, v_row, v_head) = c.strides
        o = self.new_output(tuple(q.shape), self._dtype, dev)
        o_row, o_batch, o_head = _strides("o", o, self._size)
        if spec.arch == "sm80":   # example 41 offsets rows inside one sequence in 32 bits
            accum_row = hq * D if spec.o_workspace else 0
            if max_q * max(q_row, o_row, accum_row) >= INT32_LIMIT or max_k * max(k_row, v_row) >= INT32_LIMIT:
                raise ValueError(f"a sequence of {max_q} queries / {max_k} keys at these row strides spans 2^31 "
                                 f"elements or more (the {spec.arch} kernel's offsets are 32-bit)")
        lse = None
        if return_lse:
            lse_shape = (hq, total_q) if varlen else (batch, hq, max_q)
            lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
        if total_q == 0 or batch == 0 or max_q == 0:
            if max_q == 0:
                o.zero_()
                if lse is not None:
                    lse.fill_(math.inf)
            return o, lse
        if max_k == 0 or total_k == 0:   # no keys: O = 0 and LSE = +inf, as for any row that sees none
            o.zero_()
            if lse is not None:
                lse.fill_(math.inf)
            return o, lse
        lse_batch, lse_head = (0, total_q) if varlen else (hq * max_q, max_q)
        ws_bytes = total_q * hq * D * 4 if spec.o_workspace else 0     # fp32 O between K/V tiles
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device) if ws_bytes else None
        problem = self._pack(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), 0 if lse is None else lse.data_ptr(),
                             q_row, q_batch, q_head, k_row, k_batch, k_head, v_row, v_batch, v_head,
                             o_row, o_batch, o_head, lse_batch, lse_head, cu_q, cu_k, batch, hq, hkv, D,
                             max_q, max_k, total_q, total_k, c.scale, 0, dev, 0,
                             0 if workspace is None else workspace.data_ptr(), ws_bytes, raw_stream(dev))
        self.launch(problem, dev, max_q, max_k, D)
        return o, lse
