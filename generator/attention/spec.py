"""The attention family's spec: flash-attention forward on sm90 (CUTLASS example 88's kernel with
our masks, loads and epilogue: csrc/fused_gemm/attention/sm90_fmha.hpp).

Runtime arguments (not in the spec): batch, heads (GQA: Hq a multiple of Hkv), lengths (fixed or
cu_seqlens), strides, scale, LSE or not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SpecError
from ..gemm.spec import ARCHES, canonical_dtype

DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
BLOCK_N = (64, 128)
BLOCK_M = 128                         # Q rows per CTA: two consumer warpgroups of 64


@dataclass(frozen=True)
class AttentionSpec:
    """softmax(scale * Q K^T [+ causal mask]) V for one dtype and head dim.

    ``block_n`` is the K/V tile (keys per mainloop step); ``persistent`` launches one CTA per SM
    that walks the tiles (example 88's "ping-pong"), else one CTA per (Q tile, head, batch).
    """
    family = "attention"

    dtype: str = "bf16"
    head_dim: int = 128
    causal: bool = False
    block_n: int = 128
    persistent: bool = False
    arch: str = "sm90a"

    def __post_init__(self):
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.dtype not in DTYPES:
            raise SpecError(f"attention dtype {self.dtype!r} is not one of {DTYPES}")
        if self.head_dim not in HEAD_DIMS:
            raise SpecError(f"head_dim {self.head_dim} is not one of {HEAD_DIMS}")
        if self.block_n not in BLOCK_N:
            raise SpecError(f"block_n {self.block_n} is not one of {BLOCK_N}")
        if self.head_dim == 256 and self.block_n != 64:
            raise SpecError("head_dim 256 needs block_n 64 (shared memory)")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")

    @property
    def uri(self) -> str:
        mask = "_causal" if self.causal else ""
        persist = "_persist" if self.persistent else ""
        return f"attention_{self.arch}_{self.dtype}_d{self.head_dim}{mask}_bn{self.block_n}{persist}"

    @classmethod
    def from_uri(cls, uri: str) -> "AttentionSpec":
        m = _URI.match(uri)
        if not m:
            raise SpecError(f"{uri!r} is not an attention kernel URI (like {cls().uri!r})")
        g = m.groupdict()
        spec = cls(g["dtype"], int(g["d"]), g["causal"] is not None, int(g["bn"]), g["persist"] is not None,
                   g["arch"])
        if spec.uri != uri:
            raise SpecError(f"{uri!r} is not in canonical form (it reads as {spec.uri!r})")
        return spec


_URI = re.compile(r"^attention_(?P<arch>sm\d+a?)_(?P<dtype>[a-z0-9]+)_d(?P<d>\d+)(?P<causal>_causal)?_bn(?P<bn>\d+)"
                  r"(?P<persist>_persist)?$")
