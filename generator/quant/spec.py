"""The quant family's spec: dynamic per-token fp8 quantisation of activations in one kernel
(csrc/fused_gemm/quant/quantize_fp8.hpp).  Rows, columns and strides are runtime arguments."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SpecError
from ..uri import parse as uri_parse
from ..gemm.spec import ARCHES, canonical_dtype

DTYPES = ("bf16", "fp16")      # what it reads
OUT_DTYPES = ("e4m3",)         # what it writes
CACHED_CHUNKS = 4              # 16-element chunks a thread keeps in registers: rows up to 4 * 256 * 16 = 16384


@dataclass(frozen=True)
class QuantSpec:
    """x [..., K] (``dtype``) -> (``out_dtype`` [..., K], fp32 scale per row: absmax / the format's max)."""
    family = "quant"

    dtype: str = "bf16"
    out_dtype: str = "e4m3"
    arch: str = "sm90a"

    def __post_init__(self):
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        object.__setattr__(self, "out_dtype", canonical_dtype(self.out_dtype))
        if self.dtype not in DTYPES:
            raise SpecError(f"quant input dtype {self.dtype!r} is not one of {DTYPES}")
        if self.out_dtype not in OUT_DTYPES:
            raise SpecError(f"quant output dtype {self.out_dtype!r} is not one of {OUT_DTYPES}")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")

    @property
    def uri(self) -> str:
        return f"quant_{self.arch}_{self.dtype}_{self.out_dtype}_per-token"

    @classmethod
    def from_uri(cls, uri: str) -> "QuantSpec":
        return uri_parse(cls, _URI, uri, "a quant", lambda g: cls(g["dtype"], g["out"], g["arch"]))


_URI = re.compile(r"^quant_(?P<arch>sm\d+a?)_(?P<dtype>[a-z0-9]+)_(?P<out>[a-z0-9]+)_per-token$")
