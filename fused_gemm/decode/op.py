"""DecodeOp: one compiled decode-attention kernel, with the one validation path of the decode op.
q [B, T, Hq, D] (T new tokens per sequence), caches [B, S_max, Hkv, D], int32 cache_seqlens [B].
The kernel reads the lengths on the GPU, so a graph captured once serves any; only the optional
eager check of the lengths (check_lengths) synchronises."""
from __future__ import annotations

import math
import operator

import torch

from .. import checks
from ..checks import INT32_LIMIT
from ..generator import DEFAULT_LAUNCH, LaunchOptions
from ..generator.decode import PROBLEM, DecodeSpec
from ..generator.decode.heuristics import splits as pick_splits
from ..kernel_op import TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary

Tensor = torch.Tensor
# The order DecodeOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("q", "k", "v", "o", "lse", "seqlens", "q_batch", "q_token", "q_head", "k_batch", "k_row", "k_head",
              "v_batch", "v_row", "v_head", "o_batch", "o_token", "o_head", "lse_batch", "lse_head", "batch",
              "tokens", "num_heads", "num_kv_heads", "max_len", "splits", "scale", "device", "workspace",
              "workspace_bytes", "stream")
MAX_TOKENS = 16          # new tokens per sequence (speculative decode); a 16-row tile holds T x (Hq / Hkv)


def row_groups(tokens: int, num_heads: int, num_kv_heads: int) -> int:
    """16-row MMA tiles a kv head's queries fill: its GQA group's heads times the new tokens."""
    return -(-tokens * (num_heads // num_kv_heads) // 16)


class DecodeOp(KernelOp):
    """``op(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse)`` -> (o, lse or None).
    ``launch=LaunchOptions(splits=n)`` (n > 1) cuts each sequence's keys into n ranges instead of the
    heuristic's count (generator/decode/heuristics.py): for timing the choice, as perf/decode_splits.py does."""

    def __init__(self, spec: DecodeSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._size = self._dtype.itemsize
        self._sm_count = {}

    def prepare(self, device: int) -> None:
        super().prepare(device)
        self._sm_count[device] = torch.cuda.get_device_properties(device).multi_processor_count

    def __call__(self, q, k_cache, v_cache, cache_seqlens, *, scale=None, max_seqlen_k=None, return_lse=False,
                 check_lengths=True, launch=None):
        return self.run(q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse, check_lengths, launch)

    def run(self, q, k_cache, v_cache, cache_seqlens, scale, max_seqlen_k, return_lse, check_lengths=True,
            launch=None):
        D = self.spec.head_dim
        checks.tensor("q", q, self._dtype, None)
        dev = q.get_device()
        if dev not in self._ready:
            self._first_use(q, dev)
        squeeze = q.dim() == 3
        q4 = q.unsqueeze(1) if squeeze else q
        if q4.dim() != 4:
            raise ValueError(f"q must be [B, Hq, D] or [B, T, Hq, D], got shape {tuple(q.shape)}")
        B, T, Hq, Dq = q4.shape
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
            checks.tensor(name, t, self._dtype, dev)
            if t.dim() != 4:
                raise ValueError(f"{name} must be [B, S_max, Hkv, D], got shape {tuple(t.shape)}")
        if k_cache.shape != v_cache.shape:
            raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ")
        _, S, Hkv, Dk = k_cache.shape
        if Dq != D or Dk != D:
            raise ValueError(f"head dims q {Dq}, cache {Dk}: this kernel takes {D}")
        if k_cache.shape[0] != B:
            raise ValueError(f"q has batch {B}, the caches {k_cache.shape[0]}")
        if Hkv < 1 or Hq % Hkv:
            raise ValueError(f"q has {Hq} heads, not a multiple of the caches' {Hkv} (GQA needs Hq % Hkv == 0)")
        if not 1 <= T <= MAX_TOKENS:
            raise ValueError(f"{T} new tokens per sequence; decode_attention takes 1 to {MAX_TOKENS}")
        if not isinstance(cache_seqlens, Tensor) or cache_seqlens.dtype is not torch.int32 or \
                tuple(cache_seqlens.shape) != (B,):
            raise TypeError(f"cache_seqlens must be an int32 [B={B}] tensor")
        if cache_seqlens.get_device() != dev or (B > 1 and cache_seqlens.stride(0) != 1):
            raise ValueError(f"cache_seqlens must be contiguous on cuda:{dev}")
        if not self.fits(B, T, Hq, Hkv, S):
            raise ValueError(f"cache length {S}, batch {B} or kv heads x 16-row groups {Hkv * row_groups(T, Hq, Hkv)} "
                             "past the kernel's limits (2^31, 65535, 65535)")
        scale = checks.scalar("scale", 1.0 / math.sqrt(D) if scale is None else scale)
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale}")
        try:
            hint = S if max_seqlen_k is None else operator.index(max_seqlen_k)
        except TypeError:
            raise TypeError("max_seqlen_k must be a Python int") from None
        if S and not 0 < hint <= S:
            raise ValueError(f"max_seqlen_k {max_seqlen_k} must lie in [1, S_max = {S}]")
        if check_lengths and B and not torch.cuda.is_current_stream_capturing():
            lo, hi = torch.aminmax(cache_seqlens)   # a sync: check_lengths=False skips it (graphs never check)
            if int(lo) < 0 or int(hi) > S:
                raise ValueError(f"cache_seqlens hold values in [{int(lo)}, {int(hi)}], outside the caches' "
                                 f"0..S_max = {S} (inside a CUDA graph they are clamped instead)")
        if launch is not None:   # PDL is not a launch option here: it follows DecodeSpec.pdl (unsplit launches)
            if type(launch) is LaunchOptions and launch.abi[1:] != DEFAULT_LAUNCH.abi[1:]:
                raise ValueError(f"launch {launch}: {self.spec.uri} takes launch.splits only (key ranges a "
                                 "sequence, 2 to 64; 1 lets the heuristic choose)")
            launch = self.checked_launch(launch)   # its type (pdl is refused above)
        checks.refuse_grad("decode_attention", q, k_cache, v_cache)
        q_strides = checks.head_dim_last("q", q4, self._size)[:3]                  # (batch, token, head)
        k_strides = checks.head_dim_last("k_cache", k_cache, self._size)[:3]
        v_strides = checks.head_dim_last("v_cache", v_cache, self._size)[:3]
        o, lse = self.enqueue(q4, k_cache, v_cache, cache_seqlens, scale, hint, return_lse, launch,
                              (q_strides, k_strides, v_strides))
        if squeeze:
            return o[:, 0], (lse[..., 0] if lse is not None else None)
        return o, lse

    @staticmethod
    def fits(batch: int, tokens: int, num_heads: int, num_kv_heads: int, max_len: int) -> bool:
        """Whether the kernel's grid and 32-bit offsets hold this problem."""
        return max_len < INT32_LIMIT and batch <= 65535 and \
            num_kv_heads * row_groups(tokens, num_heads, num_kv_heads) <= 65535

    def enqueue(self, q4, k_cache, v_cache, cache_seqlens, scale: float, hint: int, return_lse: bool, launch,
                strides):
        """The launch, on arguments already checked (by run, or by fused_gemm.attention for a short causal
        prefill: cache_seqlens None, every cache full): q4 [B, T, Hq, D]; strides (batch, row, head) of q4
        and the caches in elements.  Returns (o [B, T, Hq, D], lse [B, Hq, T] or None)."""
        B, T, Hq, D = q4.shape
        S, Hkv = k_cache.shape[1], k_cache.shape[2]
        dev = q4.get_device()
        if dev not in self._ready:
            self._first_use(q4, dev)
        groups = row_groups(T, Hq, Hkv)
        o = self.new_output((B, T, Hq, D), self._dtype, dev)
        lse = torch.empty((B, Hq, T), dtype=torch.float32, device=q4.device) if return_lse else None
        if B == 0 or S == 0:
            o.zero_()
            if lse is not None:
                lse.fill_(math.inf)
            return o, lse
        splits = launch.splits if launch is not None and launch.splits > 1 else \
            pick_splits(B * Hkv * groups, hint, D, self._sm_count[dev])
        parts = B * Hkv * groups * splits * 16
        ws_bytes = parts * (D + 1) * 4 if splits > 1 else 0
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=q4.device) if ws_bytes else None
        q_strides, k_strides, v_strides = strides
        problem = self._pack(q4.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), o.data_ptr(),
                             0 if lse is None else lse.data_ptr(),
                             0 if cache_seqlens is None else cache_seqlens.data_ptr(), *q_strides,
                             *k_strides, *v_strides, T * Hq * D, Hq * D, D, Hq * T, T, B, T, Hq, Hkv, S, splits,
                             scale, dev, 0 if workspace is None else workspace.data_ptr(), ws_bytes, raw_stream(dev))
        self.launch(problem, dev, B, S, D)
        return o, lse
