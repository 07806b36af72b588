"""The GEMM family's spec: a frozen, hashable description of one fused GEMM kernel.

A ``GemmSpec`` names everything that changes the generated source; nothing that varies per
call (pointers, sizes, alpha/beta, split count) lives here.  Its ``uri`` names every parameter
and ``GemmSpec.from_uri`` reads it back, so a cache folder, a log line or an error message says
exactly which kernel it is about, and `fused-gemm build --uri ...` rebuilds it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple, Union

from ..errors import SpecError
from ..gemv import CSRC_FOLDER as GEMV, DECODE_URI, DecodeConfig, check_dense_decode
from ..uri import operand_dtypes, parse as uri_parse

# name -> (CUTLASS element type, bits)
DTYPES = {
    "bf16": ("cutlass::bfloat16_t", 16),
    "fp16": ("cutlass::half_t", 16),
    "fp32": ("float", 32),
    "e4m3": ("cutlass::float_e4m3_t", 8),
    "e5m2": ("cutlass::float_e5m2_t", 8),
    "s4": ("cutlass::int4b_t", 4),
    "u4": ("cutlass::uint4b_t", 4),
}
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "float8_e4m3fn": "e4m3", "e4m3": "e4m3", "float8_e5m2": "e5m2", "e5m2": "e5m2",
    "int4": "s4", "s4": "s4", "uint4": "u4", "u4": "u4",
}
# (A, B) operand pairs with a mainloop today.  The spec keeps A and B apart so that fp8 (e4m3 x e4m3,
# W8A8: CUTLASS's FP8 mainloop) and int4 weights (bf16 x s4/u4, dequantised in the mainloop) slot in as
# new pairs, not a rewrite.
OPERAND_PAIRS = (("bf16", "bf16"), ("fp16", "fp16"), ("e4m3", "e4m3"))
FP8_TILE_K = (64, 128)   # a k-tile must divide 128: the default promotion (every 4 wgmmas of K = 32)
FP8_MMA_K = 32           # K of one e4m3 wgmma
FP8_PROMOTION = 4        # CUTLASS's default mma_promotion_interval: fp32 promotion every 128 of K
FP8_PROMOTIONS = (4, 8, 16)
OUTPUT_DTYPES = ("bf16", "fp16", "fp32")   # C (residual) and D
ARCHES = ("sm90a",)                        # sm80 and sm100 get their own templates later
PLANNED_ARCHES = ("sm80", "sm100a")
B_LAYOUTS = ("nk", "kn")                   # nn.Linear weight [N,K], or [K,N]
SCHEDULES = {"cooperative": "coop", "pingpong": "pp", "warpspecialized": "ws", "auto": "auto"}
# split_k_parallel: K cut into slices that one batched launch multiplies into fp32 partials, then a reduction
# kernel that sums them and applies the epilogue (csrc/fused_gemm/splitk; any schedule, unlike stream-K's).
TILE_SCHEDULERS = {"persistent": "persist", "stream_k": "streamk", "split_k_parallel": "splitkpar"}
# The wgmma N sizes CuTe's MMA selectors (cute/arch/mma_sm90.hpp) pick by default.  Any other tile N
# (112, 144, 224, ...) they serve with the largest of these that divides it, 8 to 32 wide (seven wgmmas of
# N = 16 a k-step for a 112-wide tile: half to three quarters of the speed, perf/results/h200_mid_m_tiles.txt),
# unless the kernel defines CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED: TileConfig.extended_wgmma.
STANDARD_WGMMA_N = (8, 16, 32, 64, 96, 128, 192, 256)

# Order of the pipeline the recipe describes: D = act(alpha*row*col*acc + bias) + beta*C, where
# row is row_scale[m] or a_scale (one value for all of A) and col is col_scale[n] or b_scale.
ACTIVATIONS = ("identity", "relu", "gelu", "gelu_tanh", "silu", "sigmoid")
_STAGES = ("row_scale", "a_scale", "col_scale", "b_scale", "bias", "activation", "residual")
_SCALES = ("row_scale", "a_scale", "col_scale", "b_scale", "bias")   # the boolean steps before the activation


SLICE_ALIGN = 8   # split_k_parallel: a K slice is a multiple of 8 elements (csrc/fused_gemm/splitk kSliceAlign)


def k_slices_fit(k: int, splits: int) -> bool:
    """Whether ``splits`` equal K slices are each a multiple of SLICE_ALIGN elements (16-byte TMA bases)."""
    return splits >= 1 and k % splits == 0 and k // splits % SLICE_ALIGN == 0


def canonical_dtype(name) -> str:
    """'bfloat16', torch.bfloat16, 'bf16' -> 'bf16'."""
    key = str(name).replace("torch.", "")
    if key not in _DTYPE_ALIASES:
        raise SpecError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}")
    return _DTYPE_ALIASES[key]


@dataclass(frozen=True)
class Epilogue:
    """What happens to the fp32 accumulator before it is stored.

    D = activation(alpha * row_scale[m] * col_scale[n] * acc + bias[n]) + beta * C[m, n]
    alpha (and beta, with a residual) are runtime scalars of every kernel.  ``a_scale`` and
    ``b_scale`` are per-tensor scales (fp8's): one fp32 each that lives on the GPU, read by the
    kernel (no host sync), given as a one-element row_scale / col_scale argument; each replaces
    its vector (a tensor has one activation scale, per-tensor or per-token, not both).
    """
    row_scale: bool = False
    col_scale: bool = False
    bias: bool = False
    activation: str = "identity"
    residual: bool = False
    a_scale: bool = False
    b_scale: bool = False

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise SpecError(f"activation {self.activation!r} is not one of {ACTIVATIONS}")
        for vector, scalar in (("row_scale", "a_scale"), ("col_scale", "b_scale")):
            if getattr(self, vector) and getattr(self, scalar):
                raise SpecError(f"epilogue has both {vector} and {scalar}: they take the same argument "
                                f"({vector}), a vector or one value; fold the per-tensor scale into the vector")

    @property
    def name(self) -> str:
        """Readable, parseable form, e.g. 'bias+gelu_tanh+residual'; 'none' for a plain GEMM."""
        parts = [s for s in _SCALES if getattr(self, s)]
        if self.activation != "identity":
            parts.append(self.activation)
        if self.residual:
            parts.append("residual")
        return "+".join(parts) or "none"

    @classmethod
    def parse(cls, text: str) -> "Epilogue":
        """Inverse of ``name``; steps must come in pipeline order (scales, bias, act, residual)."""
        text = (text or "none").strip()
        if text in ("none", "identity", ""):
            return cls()
        kw, last = {}, -1
        for token in text.split("+"):
            token = token.strip()
            stage = "activation" if token in ACTIVATIONS else token
            if stage not in _STAGES:
                raise SpecError(
                    f"epilogue {text!r}: unknown step {token!r}; steps are "
                    f"{list(_STAGES[:3]) + list(ACTIVATIONS[1:]) + ['residual']}")
            pos = _STAGES.index(stage)
            if stage in kw or pos < last:
                raise SpecError(
                    f"epilogue {text!r}: step {token!r} repeated or out of order; the order is "
                    "row_scale|a_scale+col_scale|b_scale+bias+<activation>+residual")
            kw[stage] = token if stage == "activation" else True
            last = pos
        return cls(**kw)

    def __str__(self) -> str:
        return self.name


def _triple(text: str) -> Tuple[int, ...]:
    return tuple(int(v) for v in text.split("x"))


@dataclass(frozen=True)
class TileConfig:
    """How the work is cut up: CTA tile, cluster, kernel schedule, tile scheduler, swap-AB.

    swap_ab computes D^T = W . X^T so that a small M (decode) lands on the tile's N side and the
    weight's N fills the 64/128-row side of the wgmma.
    """
    tile: Tuple[int, int, int] = (128, 256, 64)
    cluster: Tuple[int, int, int] = (2, 1, 1)
    schedule: str = "cooperative"
    scheduler: str = "persistent"
    swap_ab: bool = False
    epilogue_tile: Optional[Tuple[int, int]] = None   # None: CUTLASS picks (EpilogueTileAuto)

    def __post_init__(self):
        object.__setattr__(self, "tile", tuple(int(v) for v in self.tile))
        object.__setattr__(self, "cluster", tuple(int(v) for v in self.cluster))
        if len(self.tile) != 3 or len(self.cluster) != 3:
            raise SpecError("tile and cluster are (M, N, K) triples")
        if self.epilogue_tile is not None:
            et = tuple(int(v) for v in self.epilogue_tile)
            object.__setattr__(self, "epilogue_tile", et)
            if len(et) != 2 or self.tile[0] % et[0] or self.tile[1] % et[1] or et[1] % 8:
                raise SpecError(f"epilogue_tile {et} must divide the tile's (M, N) {self.tile[:2]}")
        if self.schedule not in SCHEDULES:
            raise SpecError(f"schedule {self.schedule!r} is not one of {tuple(SCHEDULES)}")
        if self.scheduler not in TILE_SCHEDULERS:
            raise SpecError(f"scheduler {self.scheduler!r} is not one of {tuple(TILE_SCHEDULERS)}")
        tm, tn, tk = self.tile
        if tm not in (64, 128, 256):
            raise SpecError(f"tile M {tm} must be 64, 128 or 256 (wgmma is 64 rows per warpgroup)")
        if not (8 <= tn <= 256 and tn % 8 == 0):
            raise SpecError(f"tile N {tn} must be a multiple of 8 in [8, 256]")
        if tk not in (32, 64, 128, 256):
            raise SpecError(f"tile K {tk} must be 32, 64, 128 or 256")
        if self.schedule == "cooperative" and tm % 128:
            raise SpecError("the cooperative schedule splits tile M over two warpgroups: tile M must be 128 or 256")
        if self.cluster[2] != 1 or self.cluster[0] * self.cluster[1] > 4 or min(self.cluster) < 1:
            raise SpecError(f"cluster {self.cluster}: at most 4 CTAs, K extent 1")
        if self.scheduler == "stream_k" and self.schedule != "cooperative":
            raise SpecError("stream-K needs the cooperative schedule in CUTLASS 3.x")

    @classmethod
    def from_uri_groups(cls, g) -> "TileConfig":
        """The config that ``name`` spelled, from a URI regex's groups (tile, cluster, schedule,
        scheduler, swap and, where the family has it, etile)."""
        etile = g.get("etile")
        return cls(_triple(g["tile"]), _triple(g["cluster"]), {v: k for k, v in SCHEDULES.items()}[g["schedule"]],
                   {v: k for k, v in TILE_SCHEDULERS.items()}[g["scheduler"]], swap_ab=bool(g["swap"]),
                   epilogue_tile=_triple(etile) if etile else None)

    @classmethod
    def from_name(cls, name: str) -> "TileConfig":
        """Inverse of ``name`` (what tuned tables store)."""
        m = _CONFIG_NAME.match(name)
        if not m:
            raise SpecError(f"{name!r} is not a tile config name (like {cls().name!r})")
        config = cls.from_uri_groups(m.groupdict())
        if config.name != name:
            raise SpecError(f"{name!r} is not in canonical form (it reads as {config.name!r})")
        return config

    @property
    def extended_wgmma(self) -> bool:
        """The tile's N needs CuTe's extended wgmma shapes to run as one wgmma (see STANDARD_WGMMA_N)."""
        return self.tile[1] not in STANDARD_WGMMA_N

    @property
    def name(self) -> str:
        t = "x".join(map(str, self.tile))
        c = "x".join(map(str, self.cluster))
        epi = "_e" + "x".join(map(str, self.epilogue_tile)) if self.epilogue_tile else ""
        return (f"t{t}_c{c}_{SCHEDULES[self.schedule]}_{TILE_SCHEDULERS[self.scheduler]}{epi}"
                + ("_swapab" if self.swap_ab else ""))


def config_from_name(name: str) -> Union[TileConfig, DecodeConfig]:
    """A tile config or a decode config from its ``name`` (what tuned tables store)."""
    return DecodeConfig.from_name(name) if name.startswith("decode_") else TileConfig.from_name(name)


@dataclass(frozen=True)
class GemmSpec:
    """One kernel: D[M,N] = epilogue(A[M,K] @ B^T) with fp32 accumulation.

    A is row-major activations [M,K]; B is an nn.Linear weight [N,K] ('nk') or [K,N] ('kn');
    C (residual) and D are row-major [M,N].  ``pdl`` compiles in grid-dependency control, which
    a launch with programmatic dependent launch needs (a library without it refuses such launches).
    fp8 (e4m3 x e4m3): both operands K-major (b_layout 'nk'), output bf16 by default; ``fast_accum``
    picks CUTLASS's FP8FastAccum schedules (wgmma's own reduced-precision accumulation, never promoted
    to fp32: faster, less accurate at large K) over the default that adds the accumulators into fp32
    every 128 of K, as cuBLAS does with fast accumulation off (torch._scaled_mm's default);
    ``promotion`` (wgmmas between two promotions, 4 = every 128 of K; a template parameter of our
    mainloop, not CUTLASS's mma_promotion_interval argument, which it ignores) promotes less often.  The promotions run while the tensor cores work on the next
    interval (csrc/fused_gemm/fp8: two temporary accumulators), not after a drain as CUTLASS's do.
    A ``DecodeConfig`` in place of the tile config names the family's decode kernel
    (csrc/fused_gemm/gemv/sm90_dense_decode.hpp): a weight-streaming GEMV on mma.sync for M up to 16
    tokens, 16-bit operands and an [N, K] weight, with the same epilogue steps but per-tensor scales.
    """
    family = "gemm"                          # class attribute: the registry entry this spec belongs to

    a_dtype: str = "bf16"                    # activations
    b_dtype: Optional[str] = None            # weight; default: a_dtype
    out_dtype: Optional[str] = None          # D; default: a_dtype
    residual_dtype: Optional[str] = None     # C; default: out_dtype
    bias_dtype: Optional[str] = None         # bias vector; default: a_dtype (out_dtype for 8/4-bit A)
    b_layout: str = "nk"
    epilogue: Epilogue = field(default_factory=Epilogue)
    config: Union[TileConfig, DecodeConfig] = field(default_factory=TileConfig)
    pdl: bool = True
    arch: str = "sm90a"
    fast_accum: bool = False                 # fp8 only: see above
    promotion: int = FP8_PROMOTION           # fp8 without fast_accum only: see above

    def __post_init__(self):
        a = canonical_dtype(self.a_dtype)
        b = canonical_dtype(self.b_dtype or a)
        wide_a = DTYPES[a][1] == 16
        out = canonical_dtype(self.out_dtype or (a if wide_a else "bf16"))   # 8-bit A: a 16-bit result
        object.__setattr__(self, "a_dtype", a)
        object.__setattr__(self, "b_dtype", b)
        object.__setattr__(self, "out_dtype", out)
        object.__setattr__(self, "residual_dtype", canonical_dtype(self.residual_dtype or out))
        object.__setattr__(self, "bias_dtype", canonical_dtype(self.bias_dtype or (a if wide_a else out)))
        if isinstance(self.epilogue, str):
            object.__setattr__(self, "epilogue", Epilogue.parse(self.epilogue))
        if self.arch not in ARCHES:
            extra = " (planned)" if self.arch in PLANNED_ARCHES else ""
            raise SpecError(f"arch {self.arch!r}{extra} is not supported yet; supported: {ARCHES}")
        if (a, b) not in OPERAND_PAIRS:
            raise SpecError(f"operand dtypes A={a}, B={b} have no mainloop yet; supported (A, B): {OPERAND_PAIRS}")
        for name in ("out_dtype", "residual_dtype", "bias_dtype"):
            if getattr(self, name) not in OUTPUT_DTYPES:
                raise SpecError(f"{name} {getattr(self, name)!r} must be one of {OUTPUT_DTYPES}")
        if self.b_layout not in B_LAYOUTS:
            raise SpecError(f"b_layout {self.b_layout!r} is not one of {B_LAYOUTS}")
        if self.decode:
            self._check_decode()
        elif a == "e4m3":
            if self.b_layout != "nk":
                raise SpecError("fp8 (e4m3) GEMMs need a K-major weight, b_layout 'nk' ([N, K], nn.Linear's): "
                                "wgmma reads 8-bit operands only K-major; transpose the weight once at load")
            if self.config.tile[2] not in FP8_TILE_K:
                raise SpecError(f"fp8 tile K {self.config.tile[2]} must be one of {FP8_TILE_K} (128 = one "
                                "128-byte swizzle row; the FP8 mainloop promotes every 128 of K)")
            if self.fast_accum and self.config.schedule == "auto":
                raise SpecError("fast_accum names an FP8FastAccum kernel schedule: pick cooperative, pingpong "
                                "or warpspecialized, not auto")
            mmas = self.config.tile[2] // FP8_MMA_K   # wgmma instructions per k-tile
            if self.promotion != FP8_PROMOTION and self.fast_accum:
                raise SpecError(f"promotion {self.promotion}: fast_accum never promotes to fp32; leave promotion "
                                f"at {FP8_PROMOTION}")
            if type(self.promotion) is not int or self.promotion not in FP8_PROMOTIONS or self.promotion % mmas:
                raise SpecError(f"promotion {self.promotion!r}: wgmmas between fp32 promotions, an int in "
                                f"{FP8_PROMOTIONS} and a multiple of the {mmas} a k-tile issues")
        elif self.fast_accum:
            raise SpecError(f"fast_accum is an fp8 mainloop option; A={a} has none")
        if self.split_k_parallel:
            if DTYPES[a][1] != 16:
                raise SpecError(f"split_k_parallel kernels multiply 16-bit operands (bf16, fp16), not {a}")
            if self.epilogue.a_scale or self.epilogue.b_scale:
                raise SpecError(f"epilogue {self.epilogue.name!r}: the split-K reduction takes row_scale/col_scale "
                                "vectors, not per-tensor scales (fold one into alpha)")
        if self.promotion != FP8_PROMOTION and a != "e4m3":
            raise SpecError(f"promotion is an fp8 mainloop option; A={a} has none")

    def _check_decode(self) -> None:
        if DTYPES[self.a_dtype][1] != 16:
            raise SpecError(f"the decode kernel multiplies 16-bit operands (bf16, fp16), not {self.a_dtype}")
        if self.b_layout != "nk":
            raise SpecError("the decode kernel streams an [N, K] weight (b_layout 'nk', nn.Linear's)")
        check_dense_decode(self.config, 16)
        if self.epilogue.a_scale or self.epilogue.b_scale:
            raise SpecError(f"epilogue {self.epilogue.name!r}: the decode kernel takes row_scale/col_scale vectors, "
                            "not per-tensor scales (fold one into alpha)")
        if self.fast_accum or self.promotion != FP8_PROMOTION:
            raise SpecError("fast_accum and promotion are fp8 mainloop options; the decode kernel has none")

    @property
    def decode(self) -> bool:
        """The decode kernel (a DecodeConfig), not a wgmma GEMM."""
        return isinstance(self.config, DecodeConfig)

    @property
    def split_k_parallel(self) -> bool:
        """K slices into fp32 partials, summed by a reduction kernel that applies the epilogue
        (csrc/fused_gemm/splitk/sm90_split_k_parallel.hpp)."""
        return not self.decode and self.config.scheduler == "split_k_parallel"

    @property
    def promotion_tiles(self) -> Optional[int]:
        """k-tiles between fp32 promotions for an fp8 wgmma kernel without fast accumulation (its
        mainloop is csrc/fused_gemm/fp8's); None for every other kernel."""
        if self.decode or self.a_dtype != "e4m3" or self.fast_accum:
            return None
        return self.promotion // (self.config.tile[2] // FP8_MMA_K)

    @property
    def vectors_ahead(self) -> bool:
        """The epilogue's vectors (scales, bias) are read by its load warp ahead of each tile
        (csrc/fused_gemm/evt/sm90_prefetched_vector.hpp) instead of when the tile's epilogue starts, where
        a cooperative kernel's tensor cores wait out the L2 round trip: fp8's 128x128x128 tile at K = 4096
        computes in ~9 us, and the wait cost it 1-2% (H100, perf/results/h100_sweep_fp8.txt).  Persistent
        cooperative fp8 kernels only: a ping-pong kernel hides its epilogue behind the other warpgroup's
        mainloop (read ahead, its fast-accumulation kernel moved +2.8 / +0.3 / -0.9% at M = 1024 / 4096 /
        16384: noise), the plain warp-specialized kernel issues its epilogue loads only after its
        mainloop, and stream-K's separate reduction stores one subtile at a time.  bf16/fp16 kernels keep
        CUTLASS's broadcasts (their tables were tuned with them)."""
        ep = self.epilogue
        return (not self.decode and self.a_dtype == "e4m3" and self.config.scheduler == "persistent"
                and self.config.schedule == "cooperative" and (ep.row_scale or ep.col_scale or ep.bias))

    @property
    def own_headers(self) -> Tuple[str, ...]:
        """Headers of ours (under csrc/) this kernel includes besides its family's: the EVT nodes for
        scales read on the GPU and for vectors read ahead, the fp8 mainloop, the split-K reduction."""
        if self.decode:
            return ()
        ep = self.epilogue
        needed = (("fused_gemm/evt/sm90_device_scalar.hpp", ep.a_scale or ep.b_scale),
                  ("fused_gemm/evt/sm90_prefetched_vector.hpp", self.vectors_ahead),
                  ("fused_gemm/fp8/sm90_fp8_promotion.hpp", bool(self.promotion_tiles)),
                  ("fused_gemm/splitk/sm90_split_k_parallel.hpp", self.split_k_parallel))
        return tuple(header for header, on in needed if on)

    @property
    def csrc_includes(self) -> Tuple[str, ...]:
        """csrc/fused_gemm folders this kernel includes besides its family's (in its cache key only):
        the decode kernel's, or those of its own headers."""
        if self.decode:
            return (GEMV,)
        return tuple(dict.fromkeys(header.split("/")[1] for header in self.own_headers))

    @property
    def uri(self) -> str:
        """A file-name-safe name that spells out every parameter; ``from_uri`` reads it back."""
        dts = f"a-{self.a_dtype}_b-{self.b_dtype}_d-{self.out_dtype}" + operand_dtypes(
            self.epilogue.residual and self.residual_dtype, self.epilogue.bias and self.bias_dtype)
        ep = self.epilogue.name.replace("+", "-")
        pdl = "" if self.pdl else "_nopdl"
        fast = "_fastacc" if self.fast_accum else ""
        promo = f"_promo{self.promotion}" if self.promotion != FP8_PROMOTION else ""
        return f"gemm_{self.arch}_{dts}_w-{self.b_layout}_{self.config.name}{pdl}{fast}{promo}_ep-{ep}"

    @classmethod
    def from_uri(cls, uri: str) -> "GemmSpec":
        return uri_parse(cls, _URI, uri, "a GEMM", lambda g: cls(
            g["a"], g["b"], g["d"], g["c"], g["bias"], g["layout"], Epilogue.parse(g["ep"].replace("-", "+")),
            DecodeConfig.from_name(g["decode"]) if g["decode"] else TileConfig.from_uri_groups(g),
            pdl=not g["nopdl"], arch=g["arch"], fast_accum=bool(g["fastacc"]),
            promotion=int(g["promo"]) if g["promo"] else FP8_PROMOTION))

    def with_config(self, config: Union[TileConfig, DecodeConfig]) -> "GemmSpec":
        return replace(self, config=config)


_DT = r"[a-z0-9]+"
# TileConfig.name's tile, cluster, schedule and scheduler, as URI regex groups (every family's URI has them)
TILE_URI = (rf"_t(?P<tile>\d+x\d+x\d+)_c(?P<cluster>\d+x\d+x\d+)"
            rf"_(?P<schedule>{'|'.join(SCHEDULES.values())})_(?P<scheduler>{'|'.join(TILE_SCHEDULERS.values())})")
_CONFIG_NAME = re.compile(TILE_URI[1:] + r"(?:_e(?P<etile>\d+x\d+))?(?P<swap>_swapab)?$")
_URI = re.compile(
    rf"^gemm_(?P<arch>sm\d+a?)_a-(?P<a>{_DT})_b-(?P<b>{_DT})_d-(?P<d>{_DT})(?:_c-(?P<c>{_DT}))?"
    rf"(?:_bias-(?P<bias>{_DT}))?_w-(?P<layout>nk|kn)(?:_(?P<decode>{DECODE_URI})|{TILE_URI}"
    r"(?:_e(?P<etile>\d+x\d+))?(?P<swap>_swapab)?)(?P<nopdl>_nopdl)?(?P<fastacc>_fastacc)?(?:_promo(?P<promo>\d+))?_ep-(?P<ep>[a-z_-]+)$")
