"""The decode family's spec: attention of a few new tokens per sequence over a KV cache
(flash-decoding: csrc/fused_gemm/decode/decode_attention.hpp).  Batch, heads, lengths, the split
count and strides are runtime arguments."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SpecError
from ..uri import parse as uri_parse
from ..gemm.spec import ARCHES, canonical_dtype

DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
BLOCK_N = 64                 # keys per pipeline stage: 16 per warp, four warps
ROWS = 16                    # query rows (GQA group x new tokens) per CTA


@dataclass(frozen=True)
class DecodeSpec:
    """``stages`` K/V tiles in flight per CTA (shared memory: stages * 2 * 64 * D * 2 bytes).  ``pdl``
    builds the kernels to launch with programmatic dependent launch where it pays (a launch without a
    key split): they wait for the previous kernel before their first global access, so they may
    follow any kernel."""
    family = "decode"

    dtype: str = "bf16"
    head_dim: int = 128
    stages: int = 3
    arch: str = "sm90a"
    pdl: bool = True

    def __post_init__(self):
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.dtype not in DTYPES:
            raise SpecError(f"decode dtype {self.dtype!r} is not one of {DTYPES}")
        if self.head_dim not in HEAD_DIMS:
            raise SpecError(f"head_dim {self.head_dim} is not one of {HEAD_DIMS}")
        if not 2 <= self.stages <= 6 or self.smem_bytes > 227 << 10:
            raise SpecError(f"stages {self.stages}: 2 to 6, within 227 KB of shared memory "
                            f"({self.smem_bytes >> 10} KB at head_dim {self.head_dim})")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")

    @property
    def smem_bytes(self) -> int:
        return self.stages * 2 * BLOCK_N * self.head_dim * 2

    @property
    def uri(self) -> str:
        return f"decode_{self.arch}_{self.dtype}_d{self.head_dim}_s{self.stages}" + ("" if self.pdl else "_nopdl")

    @classmethod
    def from_uri(cls, uri: str) -> "DecodeSpec":
        return uri_parse(cls, _URI, uri, "a decode",
                         lambda g: cls(g["dtype"], int(g["d"]), int(g["s"]), g["arch"], not g["nopdl"]))


_URI = re.compile(r"^decode_(?P<arch>sm\d+a?)_(?P<dtype>[a-z0-9]+)_d(?P<d>\d+)_s(?P<s>\d+)(?P<nopdl>_nopdl)?$")
