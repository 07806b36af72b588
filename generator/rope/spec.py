"""The rope family's spec: a QKV projection whose epilogue applies rotary embeddings to q and k
and writes q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] (head counts are runtime arguments).

The weight is ``fused_gemm.pack_qkv_rope``'s row permutation of W_qkv: each rotation pair's two
rows 8 apart in a 16-row block, so both land in one thread's accumulators (csrc/fused_gemm/rope).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..errors import SpecError
from ..uri import parse as uri_parse
from ..pair import check_pair_config
from ..gemm.spec import ARCHES, DTYPES as ELEMENTS, OPERAND_PAIRS, TILE_URI, TileConfig, canonical_dtype

# The 16-bit mainloops: the pair epilogue reads 16-bit operands (fp8 is the GEMM family's alone, for now).
DTYPES = tuple(a for a, b in OPERAND_PAIRS if a == b and ELEMENTS[a][1] == 16)
STYLES = ("neox", "gptj")
HEAD_DIMS = (64, 128, 256)
L1_RESERVES_KB = (0, 64)
SM90_SMEM_BYTES = 227 << 10          # shared memory a CTA may opt into on sm_90


@dataclass(frozen=True)
class RopeSpec:
    """q, k, v = split(x W^T + bias) with q and k rotated at each token's position.

    ``style`` 'neox' pairs dim j with j + R/2 (Hugging Face ``rotate_half``); 'gptj' pairs 2j with
    2j + 1.  ``rotary_dim`` R (default: head_dim) rotates the first R dims of each head.
    """
    family = "rope"

    dtype: str = "bf16"
    head_dim: int = 128
    rotary_dim: int = 0                      # 0: head_dim
    style: str = "neox"
    bias: bool = False
    config: TileConfig = field(default_factory=lambda: TileConfig((128, 128, 64), (1, 2, 1), "pingpong"))
    pdl: bool = True
    arch: str = "sm90a"
    l1_reserve_kb: int = 0                   # shared memory kept for L1 (a mainloop stage less): heuristics.py

    def __post_init__(self):
        dtype = canonical_dtype(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "rotary_dim", int(self.rotary_dim) or int(self.head_dim))
        if dtype not in DTYPES:
            raise SpecError(f"rope dtype {dtype!r} has no mainloop yet; supported: {DTYPES}")
        if self.head_dim not in HEAD_DIMS:
            raise SpecError(f"head_dim {self.head_dim} is not one of {HEAD_DIMS}")
        if self.rotary_dim % 16 or not 16 <= self.rotary_dim <= self.head_dim:
            raise SpecError(f"rotary_dim {self.rotary_dim} must be a multiple of 16 in [16, head_dim={self.head_dim}] "
                            "(rotation pairs are packed in 16-row blocks)")
        if self.style not in STYLES:
            raise SpecError(f"style {self.style!r} is not one of {STYLES}")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")
        check_pair_config(self.config, "rope")
        if self.l1_reserve_kb not in L1_RESERVES_KB or (self.l1_reserve_kb and self.config.swap_ab):
            raise SpecError(f"l1_reserve_kb {self.l1_reserve_kb} must be one of {L1_RESERVES_KB}, and 0 on swap-AB "
                            "(decode) tiles, whose weight stream wants every stage")
        tm, tn, tk = self.config.tile
        stage_bytes = (tm + tn) * tk * 2    # one A and one B k-tile of 16-bit elements
        if (SM90_SMEM_BYTES - (self.l1_reserve_kb << 10)) // stage_bytes < 2:
            raise SpecError(f"l1_reserve_kb {self.l1_reserve_kb} leaves tile {self.config.tile} fewer than 2 "
                            f"mainloop stages ({stage_bytes} bytes each)")
        tile_n = self.config.tile[1]
        chunk = 16 * self.chunk_blocks
        if not self.config.swap_ab and tile_n % self.head_dim and (self.head_dim % tile_n or tile_n % chunk):
            raise SpecError(f"tile {self.config.tile}: its N ({tile_n}) must hold whole heads, or divide head_dim "
                            f"{self.head_dim} in whole {chunk}-row chunks (the epilogue works per head and chunk)")

    @property
    def chunk_blocks(self) -> int:
        """16-row blocks per chunk of the packed head layout (fused_gemm.pack_qkv_rope)."""
        rot, keep = self.rotary_dim // 16, (self.head_dim - self.rotary_dim) // 16
        return math.gcd(math.gcd(rot, keep or rot), 4)

    @property
    def uri(self) -> str:
        bias = f"_bias-{self.dtype}" if self.bias else ""
        pdl = "" if self.pdl else "_nopdl"
        l1 = f"_l1r{self.l1_reserve_kb}" if self.l1_reserve_kb else ""
        return (f"rope_{self.arch}_a-{self.dtype}{bias}_d{self.head_dim}_r{self.rotary_dim}_{self.style}_"
                f"{self.config.name}{l1}{pdl}")

    @classmethod
    def from_uri(cls, uri: str) -> "RopeSpec":
        return uri_parse(cls, _URI, uri, "a rope", lambda g: cls(
            g["a"], int(g["d"]), int(g["r"]), g["style"], bias=g["bias"] is not None,
            config=TileConfig.from_uri_groups(g), pdl=not g["nopdl"], arch=g["arch"], l1_reserve_kb=int(g["l1"] or 0)))

    def with_config(self, config: TileConfig) -> "RopeSpec":
        return replace(self, config=config)

    def accepts(self, config: TileConfig) -> bool:
        """Whether this epilogue can run on ``config`` (a GEMM tile picked for the same shape)."""
        try:
            self.with_config(config)
        except SpecError:
            return False
        return True


_URI = re.compile(
    r"^rope_(?P<arch>sm\d+a?)_a-(?P<a>[a-z0-9]+)(?:_bias-(?P<bias>[a-z0-9]+))?_d(?P<d>\d+)_r(?P<r>\d+)"
    rf"_(?P<style>{'|'.join(STYLES)}){TILE_URI}"
    r"(?P<swap>_swapab)?(?:_l1r(?P<l1>\d+))?(?P<nopdl>_nopdl)?$")
