"""The int4 family's spec: a mixed-input GEMM, W4A16 (int4 weights dequantised inside the mainloop)
or W8A16 (fp8 e4m3 weights converted inside the mainloop), or the family's int4 decode kernel.

    D[M, N] = epilogue(X[M, K] @ dequant(W)^T),   dequant(W)[n, k] = scale[g, n] * q[n, k] (+ zero[g, n])

with g = k // group_size.  CUTLASS's sm90 mixed-input mainloop converts the narrow operand in
registers (the "RS" wgmma: A from registers), so the weight must be the kernel's A operand: a
mixed-input kernel always computes D^T = W . X^T (``config.swap_ab`` is required), which also puts a decode
step's few tokens on the tile's narrow N side.  The group size is a runtime argument (CUTLASS reads
it per launch): one kernel serves every group size that its tile K divides, and per-channel scales
(group size = K).  ``weight`` 's4' is symmetric (signed codes, scales only), 'u4' asymmetric
(unsigned codes, scales and additive zero offsets).  'e4m3' is an fp8 weight with one fp32 scale per
output channel (g = K, no zero offsets): the mainloop only converts it (exact in bf16 and fp16) and
the epilogue multiplies the fp32 accumulator by scale[n], which one scale per channel allows (it
factors out of the K sum) and which saves the mainloop's scale loads and 16-bit rounding.  e4m3 is a
weight kind of this family, not a family of its own: its mainloop, tile configs, epilogue trees, ABI,
op and table are the int4 kernels'.  The tile configuration is the GEMM family's ``TileConfig``, the
epilogue its ``Epilogue`` restricted to bias, activation and residual (an e4m3 kernel's per-channel
scale comes with its weight, not spelled in the epilogue).

A ``DecodeConfig`` in place of the tile config names a decode kernel instead, a weight-streaming GEMV on
mma.sync for M up to 16 tokens with the same ABI: for int4 (s4/u4) weights the family's own
(csrc/fused_gemm/int4_decode/sm90_int4_decode.hpp, the same weight layout and scales); for e4m3 weights the
GEMM family's dense one (csrc/fused_gemm/gemv/sm90_dense_decode.hpp), which converts the weight in
registers and applies its per-channel scale as the epilogue's column scale.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple, Union

from .. import pair
from ..errors import SpecError
from ..gemv import CSRC_FOLDER as GEMV, DECODE_URI, DecodeConfig, check_dense_decode
from ..uri import operand_dtypes, parse as uri_parse
from ..gemm.spec import (ACTIVATIONS, ARCHES, OUTPUT_DTYPES, SCHEDULES, TILE_SCHEDULERS, TILE_URI, Epilogue,
                         TileConfig, canonical_dtype)

DTYPES = ("bf16", "fp16")          # activations; int4 scales and zero offsets are in the same dtype (the MMA's)
INT4_WEIGHTS = ("s4", "u4")        # s4: symmetric; u4: asymmetric, with zero offsets
FP8_WEIGHTS = ("e4m3",)            # per-channel fp32 scales, applied in the epilogue
WEIGHTS = INT4_WEIGHTS + FP8_WEIGHTS
TILE_K = (64, 128)                 # a k-tile must divide the group size; CUTLASS's mixed-input mainloop needs >= 64
DEFAULT_CONFIG = TileConfig((64, 16, 128), (1, 1, 1), "pingpong", "persistent", swap_ab=True)


@dataclass(frozen=True)
class Int4Spec:
    """out[M, N] = act(alpha * x @ dequant(W)^T + bias) + beta * residual, fp32 accumulation."""
    family = "int4"

    dtype: str = "bf16"                      # activations, scales, zero offsets
    weight: str = "s4"
    out_dtype: Optional[str] = None          # default: dtype
    residual_dtype: Optional[str] = None     # default: out_dtype
    bias_dtype: Optional[str] = None         # default: dtype
    epilogue: Epilogue = field(default_factory=Epilogue)
    config: Union[TileConfig, DecodeConfig] = DEFAULT_CONFIG
    pdl: bool = True
    arch: str = "sm90a"
    # SwiGLU/GeGLU: the weight is pack_gate_up's [2I, K] (quantised after packing) and the output
    # act(x . W_gate^T + b_gate) * (x . W_up^T + b_up) [M, I]; epilogue.activation is the gate's, a
    # bias is [2I] (b_gate, then b_up).
    gated: bool = False

    def __post_init__(self):
        dtype = canonical_dtype(self.dtype)
        out = canonical_dtype(self.out_dtype or dtype)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "weight", canonical_dtype(self.weight))
        object.__setattr__(self, "out_dtype", out)
        object.__setattr__(self, "residual_dtype", canonical_dtype(self.residual_dtype or out))
        object.__setattr__(self, "bias_dtype", canonical_dtype(self.bias_dtype or dtype))
        if isinstance(self.epilogue, str):
            object.__setattr__(self, "epilogue", Epilogue.parse(self.epilogue))
        if dtype not in DTYPES:
            raise SpecError(f"int4 activation dtype {dtype!r} is not one of {DTYPES}")
        if self.weight not in WEIGHTS:
            raise SpecError(f"int4 weight dtype {self.weight!r} is not one of {WEIGHTS} (s4 symmetric, u4 with zeros, "
                            "e4m3 fp8 with per-channel scales)")
        for name in ("out_dtype", "residual_dtype", "bias_dtype"):
            if getattr(self, name) not in OUTPUT_DTYPES:
                raise SpecError(f"{name} {getattr(self, name)!r} must be one of {OUTPUT_DTYPES}")
        ep = self.epilogue
        if ep.row_scale or ep.col_scale or ep.a_scale or ep.b_scale:
            raise SpecError(f"int4 epilogue {ep.name!r}: the weight's scales come with the weight (the mainloop's, or "
                            "an e4m3 weight's implied first step); the epilogue takes bias, an activation and a "
                            "residual only")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported yet; supported: {ARCHES}")
        cfg = self.config
        if self.gated:
            if self.weight not in INT4_WEIGHTS:
                raise SpecError(f"a gated int4-family kernel reads int4 weights {INT4_WEIGHTS}, not {self.weight!r}")
            if self.decode and cfg.blocks != 8:
                raise SpecError("a gated decode kernel needs blocks=8 (each cluster rank's outputs whole 16-row blocks)")
        if self.decode:
            if self.fp8_weight:   # the GEMM family's dense decode kernel, reading the e4m3 weight
                check_dense_decode(cfg, 8)
                return
            if cfg.unroll:
                raise SpecError("decode unroll is the dense decode kernel's (e4m3 weights); the int4 one has none")
            return
        if not cfg.swap_ab:
            raise SpecError("int4 kernels need config.swap_ab=True: the mixed-input mainloop converts its A "
                            "operand in registers, so the weight is A and the kernel computes D^T = W . X^T")
        if cfg.scheduler == "split_k_parallel":
            raise SpecError("int4 kernels have no split_k_parallel path (persistent or stream_k schedulers)")
        if cfg.tile[2] not in TILE_K:
            raise SpecError(f"int4 tile K {cfg.tile[2]} must be one of {TILE_K} (it must divide the group size)")
        if cfg.schedule == "auto" or cfg.epilogue_tile is not None:
            raise SpecError("int4 kernels name their schedule (cooperative, pingpong or warpspecialized) and "
                            "leave the epilogue tile to CUTLASS")
        if cfg.cluster[1] != 1:
            # A cluster along the tokens would multicast the weight tile, which the mixed-input
            # mainloop loads per CTA (its scales are never multicast).
            raise SpecError(f"int4 cluster {cfg.cluster}: the token (N) extent must be 1")

    @property
    def uri(self) -> str:
        dts = f"a-{self.dtype}_w-{self.weight}_d-{self.out_dtype}" + operand_dtypes(
            self.epilogue.residual and self.residual_dtype, self.epilogue.bias and self.bias_dtype)
        pdl = "" if self.pdl else "_nopdl"
        gated = "_gated" if self.gated else ""
        return f"int4_{self.arch}_{dts}_{self.config.name}{pdl}{gated}_ep-{self.epilogue.name.replace('+', '-')}"

    @classmethod
    def from_uri(cls, uri: str) -> "Int4Spec":
        return uri_parse(cls, _URI, uri, "an int4", lambda g: cls(
            g["a"], g["w"], g["d"], g["c"], g["bias"], Epilogue.parse(g["ep"].replace("-", "+")),
            DecodeConfig.from_name(g["decode"]) if g["decode"] else TileConfig.from_uri_groups(g),
            pdl=not g["nopdl"], arch=g["arch"], gated=bool(g["gated"])))

    def with_config(self, config: Union[TileConfig, DecodeConfig]) -> "Int4Spec":
        return replace(self, config=config)

    @property
    def decode(self) -> bool:
        """The decode kernel (a DecodeConfig), not the mixed-input wgmma GEMM."""
        return isinstance(self.config, DecodeConfig)

    @property
    def fp8_weight(self) -> bool:
        """An fp8 weight (W8A16): converted in the mainloop, its per-channel scale an epilogue step."""
        return self.weight in FP8_WEIGHTS

    @property
    def csrc_includes(self) -> Tuple[str, ...]:
        """csrc/fused_gemm folders this kernel includes besides its family's (in its cache key only):
        the fp8-weight glue, the decode kernel, and the gated pieces (the pair epilogue, GatedPairOp,
        their int4 glue), each kept out of the other int4 kernels' keys."""
        if self.gated and not self.decode:
            return (*pair.CSRC_INCLUDES, "gated", "int4_gated")
        if self.decode:
            return (GEMV,) if self.fp8_weight else ("int4_decode", GEMV)
        return ("fp8_weight",) if self.fp8_weight else ()

    def supports_group(self, group_size: int, k: int) -> bool:
        """Whether this kernel's k-tile can take scales in groups of ``group_size`` along K = ``k``
        (CUTLASS: a group is whole k-tiles, or the whole K; an fp8 weight's scales are per channel)."""
        if self.fp8_weight:
            return group_size == k
        if self.decode:
            return group_size % 32 == 0 and k % group_size == 0
        return group_size == k or group_size % self.config.tile[2] == 0


_DT = r"[a-z0-9]+"
_URI = re.compile(
    rf"^int4_(?P<arch>sm\d+a?)_a-(?P<a>{_DT})_w-(?P<w>{_DT})_d-(?P<d>{_DT})(?:_c-(?P<c>{_DT}))?"
    rf"(?:_bias-(?P<bias>{_DT}))?(?:_(?P<decode>{DECODE_URI})|{TILE_URI}(?P<swap>_swapab)?)"
    rf"(?P<nopdl>_nopdl)?(?P<gated>_gated)?_ep-(?P<ep>[a-z_-]+)$")

__all__ = ["ACTIVATIONS", "DEFAULT_CONFIG", "DTYPES", "DecodeConfig", "FP8_WEIGHTS", "INT4_WEIGHTS", "Int4Spec",
           "SCHEDULES", "TILE_K", "TILE_SCHEDULERS", "WEIGHTS"]
