"""The spec model: a frozen, hashable description of one fused GEMM kernel.

A ``GemmSpec`` names everything that changes the generated source; nothing that varies per
call (pointers, sizes, alpha/beta, split count) lives here.  Its ``uri`` names every parameter,
so a cache folder or a log line says exactly which kernel it is about.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

# name -> (CUTLASS element type, bytes, torch dtype name)
DTYPES = {
    "bf16": ("cutlass::bfloat16_t", 2, "bfloat16"),
    "fp16": ("cutlass::half_t", 2, "float16"),
    "fp32": ("float", 4, "float32"),
}
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
}
OPERAND_DTYPES = ("bf16", "fp16")          # A and B (tensor-core inputs)
OUTPUT_DTYPES = ("bf16", "fp16", "fp32")   # C (residual) and D
ARCHES = ("sm90a",)                        # sm80 and sm100 get their own templates later
PLANNED_ARCHES = ("sm80", "sm100a")
B_LAYOUTS = ("nk", "kn")                   # nn.Linear weight [N,K], or [K,N]
SCHEDULES = ("cooperative", "pingpong", "warpspecialized", "auto")
TILE_SCHEDULERS = ("persistent", "stream_k")

# Order of the pipeline the recipe describes: D = act(alpha*row*col*acc + bias) + beta*C.
ACTIVATIONS = ("identity", "relu", "gelu", "gelu_tanh", "silu", "sigmoid")
_STAGES = ("row_scale", "col_scale", "bias", "activation", "residual")


class SpecError(ValueError):
    """A spec, or a string meant to become one, is not valid."""


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
    alpha (and beta, with a residual) are runtime scalars of every kernel.
    """
    row_scale: bool = False
    col_scale: bool = False
    bias: bool = False
    activation: str = "identity"
    residual: bool = False

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise SpecError(f"activation {self.activation!r} is not one of {ACTIVATIONS}")

    @property
    def name(self) -> str:
        """Readable, parseable form, e.g. 'bias+gelu_tanh+residual'; 'none' for a plain GEMM."""
        parts = [s for s in ("row_scale", "col_scale", "bias") if getattr(self, s)]
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
                    "row_scale+col_scale+bias+<activation>+residual")
            kw[stage] = token if stage == "activation" else True
            last = pos
        return cls(**kw)

    def __str__(self) -> str:
        return self.name


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
        if self.epilogue_tile is not None:
            et = tuple(int(v) for v in self.epilogue_tile)
            object.__setattr__(self, "epilogue_tile", et)
            if len(et) != 2 or self.tile[0] % et[0] or self.tile[1] % et[1] or et[1] % 8:
                raise SpecError(f"epilogue_tile {et} must divide the tile's (M, N) {self.tile[:2]}")
        if len(self.tile) != 3 or len(self.cluster) != 3:
            raise SpecError("tile and cluster are (M, N, K) triples")
        if self.schedule not in SCHEDULES:
            raise SpecError(f"schedule {self.schedule!r} is not one of {SCHEDULES}")
        if self.scheduler not in TILE_SCHEDULERS:
            raise SpecError(f"scheduler {self.scheduler!r} is not one of {TILE_SCHEDULERS}")
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

    @property
    def name(self) -> str:
        t = "x".join(map(str, self.tile))
        c = "x".join(map(str, self.cluster))
        sched = {"cooperative": "coop", "pingpong": "pp", "warpspecialized": "ws", "auto": "auto"}[self.schedule]
        tsch = {"persistent": "persist", "stream_k": "streamk"}[self.scheduler]
        epi = "_e" + "x".join(map(str, self.epilogue_tile)) if self.epilogue_tile else ""
        return f"t{t}_c{c}_{sched}_{tsch}{epi}" + ("_swapab" if self.swap_ab else "")


@dataclass(frozen=True)
class GemmSpec:
    """One kernel: D[M,N] = epilogue(A[M,K] @ B^T) with fp32 accumulation.

    A is row-major activations [M,K]; B is an nn.Linear weight [N,K] ('nk') or [K,N] ('kn');
    C (residual) and D are row-major [M,N].
    """
    dtype: str = "bf16"                      # A and B
    out_dtype: Optional[str] = None          # D; default: dtype
    residual_dtype: Optional[str] = None     # C; default: out_dtype
    bias_dtype: Optional[str] = None         # bias vector; default: dtype
    b_layout: str = "nk"
    epilogue: Epilogue = field(default_factory=Epilogue)
    config: TileConfig = field(default_factory=TileConfig)
    arch: str = "sm90a"

    def __post_init__(self):
        dt = canonical_dtype(self.dtype)
        object.__setattr__(self, "dtype", dt)
        out = canonical_dtype(self.out_dtype or dt)
        object.__setattr__(self, "out_dtype", out)
        object.__setattr__(self, "residual_dtype", canonical_dtype(self.residual_dtype or out))
        object.__setattr__(self, "bias_dtype", canonical_dtype(self.bias_dtype or dt))
        if isinstance(self.epilogue, str):
            object.__setattr__(self, "epilogue", Epilogue.parse(self.epilogue))
        if self.arch not in ARCHES:
            extra = " (planned)" if self.arch in PLANNED_ARCHES else ""
            raise SpecError(f"arch {self.arch!r}{extra} is not supported yet; supported: {ARCHES}")
        if dt not in OPERAND_DTYPES:
            raise SpecError(f"dtype {dt!r}: A and B must be one of {OPERAND_DTYPES}")
        if out not in OUTPUT_DTYPES or self.residual_dtype not in OUTPUT_DTYPES:
            raise SpecError(f"out_dtype/residual_dtype must be one of {OUTPUT_DTYPES}")
        if self.b_layout not in B_LAYOUTS:
            raise SpecError(f"b_layout {self.b_layout!r} is not one of {B_LAYOUTS}")

    @property
    def uri(self) -> str:
        """A file-name-safe name that spells out every parameter of the spec."""
        dts = f"{self.dtype}_{self.out_dtype}"
        if self.epilogue.residual:
            dts += f"_c{self.residual_dtype}"
        if self.epilogue.bias:
            dts += f"_bias{self.bias_dtype}"
        ep = self.epilogue.name.replace("+", "-")
        return f"gemm_{self.arch}_{dts}_b{self.b_layout}_{self.config.name}_ep-{ep}"

    def with_config(self, config: TileConfig) -> "GemmSpec":
        return replace(self, config=config)
