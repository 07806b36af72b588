"""The gated family's spec: one SwiGLU/GeGLU kernel, out = act(x W_gate^T + b_g) * (x W_up^T + b_u).

The weight is the packed [2I, K] matrix of ``fused_gemm.pack_gate_up`` (16-row blocks: 8 gate rows
then their 8 up rows), so each gate value and its up partner land in the same thread's
accumulators and the [M, 2I] intermediate never leaves registers.  The mainloop and tile
configurations are the GEMM family's (``TileConfig``); the epilogue is csrc/fused_gemm/gated.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional

from ..errors import SpecError
from ..uri import operand_dtypes, parse as uri_parse
from ..pair import check_pair_config
from ..gemm.spec import (ACTIVATIONS, ARCHES, DTYPES as ELEMENTS, OPERAND_PAIRS, OUTPUT_DTYPES, TILE_URI, TileConfig,
                         canonical_dtype)

# The 16-bit mainloops: the pair epilogue reads 16-bit operands (fp8 is the GEMM family's alone, for now).
DTYPES = tuple(a for a, b in OPERAND_PAIRS if a == b and ELEMENTS[a][1] == 16)


@dataclass(frozen=True)
class GatedSpec:
    """out[M, I] = act(alpha * x W_g^T + b_g) * (alpha * x W_u^T + b_u) + beta * residual.

    x [M, K] and the packed weight [2I, K] share ``dtype``; ``bias`` compiles in the two bias vectors
    (either may be absent at run time), ``residual`` the residual add.  ``vector_store`` stores a tile
    with 16-byte stores after a transpose within each quad of lanes, instead of one 4-byte store per
    output pair (weight on the tile's N side, N a multiple of 64).
    """
    family = "gated"

    dtype: str = "bf16"
    out_dtype: Optional[str] = None          # default: dtype
    activation: str = "silu"
    bias: bool = False
    residual: bool = False
    bias_dtype: Optional[str] = None         # default: dtype
    residual_dtype: Optional[str] = None     # default: out_dtype
    config: TileConfig = field(default_factory=lambda: TileConfig((128, 128, 64), (1, 2, 1), "pingpong"))
    pdl: bool = True
    arch: str = "sm90a"
    vector_store: bool = False

    def __post_init__(self):
        dtype = canonical_dtype(self.dtype)
        out = canonical_dtype(self.out_dtype or dtype)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "out_dtype", out)
        object.__setattr__(self, "bias_dtype", canonical_dtype(self.bias_dtype or dtype))
        object.__setattr__(self, "residual_dtype", canonical_dtype(self.residual_dtype or out))
        if dtype not in DTYPES:
            raise SpecError(f"gated dtype {dtype!r} has no mainloop yet; supported: {DTYPES}")
        for name in ("out_dtype", "bias_dtype", "residual_dtype"):
            if getattr(self, name) not in OUTPUT_DTYPES:
                raise SpecError(f"{name} {getattr(self, name)!r} must be one of {OUTPUT_DTYPES}")
        if self.activation not in ACTIVATIONS:
            raise SpecError(f"activation {self.activation!r} is not one of {ACTIVATIONS}")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")
        check_pair_config(self.config, "gated")
        if self.vector_store and (self.config.swap_ab or self.config.tile[1] % 64):
            raise SpecError(f"vector_store takes the weight on the tile's N side in groups of four 16-row blocks: "
                            f"tile {self.config.tile}{' with swap-AB' if self.config.swap_ab else ''} has none")

    @property
    def uri(self) -> str:
        dts = f"a-{self.dtype}_d-{self.out_dtype}" + operand_dtypes(self.residual and self.residual_dtype,
                                                                    self.bias and self.bias_dtype)
        pdl = "" if self.pdl else "_nopdl"
        vst = "_vst" if self.vector_store else ""
        return f"gated_{self.arch}_{dts}_{self.config.name}{pdl}{vst}_act-{self.activation}"

    @classmethod
    def from_uri(cls, uri: str) -> "GatedSpec":
        return uri_parse(cls, _URI, uri, "a gated", lambda g: cls(
            g["a"], g["d"], g["act"], bias=g["bias"] is not None, residual=g["c"] is not None, bias_dtype=g["bias"],
            residual_dtype=g["c"], config=TileConfig.from_uri_groups(g), pdl=not g["nopdl"], arch=g["arch"],
            vector_store=bool(g["vst"])))

    def with_config(self, config: TileConfig) -> "GatedSpec":
        return replace(self, config=config)


_DT = r"[a-z0-9]+"
_URI = re.compile(
    rf"^gated_(?P<arch>sm\d+a?)_a-(?P<a>{_DT})_d-(?P<d>{_DT})(?:_c-(?P<c>{_DT}))?(?:_bias-(?P<bias>{_DT}))?"
    rf"{TILE_URI}"
    rf"(?P<swap>_swapab)?(?P<nopdl>_nopdl)?(?P<vst>_vst)?_act-(?P<act>{'|'.join(ACTIVATIONS)})$")
