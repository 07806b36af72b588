"""Runtime knobs of the GEMM tile schedulers: chosen per call, no recompile.  Plain data (no torch),
so the heuristics table, the presets and the CLI can name them without importing the runtime."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Tuple

RASTER = {"heuristic": 0, "along_m": 1, "along_n": 2}
DECOMPOSITION = {"heuristic": 0, "data_parallel": 1, "split_k": 2, "stream_k": 3}
REDUCTION = {"deterministic": 0, "nondeterministic": 1}


@dataclass(frozen=True)
class LaunchOptions:
    """splits/decomposition/reduction apply to stream-K kernels, splits also to split_k_parallel ones (K slices; 1:
    the kernel's own count) and to the decode kernel (its cluster's K split); swizzle/raster to all.  pdl launches
    with programmatic dependent launch, so the kernel's prologue overlaps the previous kernel (the
    library must be built with ``GemmSpec(pdl=True)``).  Deterministic reduction (the default) keeps
    split-K results bit-identical run to run.
    """
    splits: int = 1
    swizzle: int = 1
    raster: str = "heuristic"
    decomposition: str = "heuristic"
    reduction: str = "deterministic"
    pdl: bool = False
    abi: Tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.splits, int) or not 1 <= self.splits <= 64:
            raise ValueError(f"launch.splits must be an int in [1, 64], got {self.splits!r}")
        if self.swizzle not in (1, 2, 4, 8):
            raise ValueError(f"launch.swizzle must be 1, 2, 4 or 8, got {self.swizzle!r}")
        for name, table in (("raster", RASTER), ("decomposition", DECOMPOSITION), ("reduction", REDUCTION)):
            if getattr(self, name) not in table:
                raise ValueError(f"launch.{name} must be one of {list(table)}, got {getattr(self, name)!r}")
        # The ABI fields splits..pdl, in FgGemmProblem order.
        object.__setattr__(self, "abi", (self.splits, self.swizzle, RASTER[self.raster],
                                         DECOMPOSITION[self.decomposition], REDUCTION[self.reduction],
                                         int(bool(self.pdl))))

    @property
    def label(self) -> str:
        """The fields that differ from the defaults, 'swizzle=2,pdl=True' ('default' for none): what the
        benchmarks print, and what ``from_label`` reads back."""
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if f.init and getattr(self, f.name) != f.default) or "default"

    @classmethod
    def from_label(cls, text: str) -> "LaunchOptions":
        kinds = {f.name: type(f.default) for f in fields(cls) if f.init}
        kw = {}
        for item in filter(None, text.split(",")) if text != "default" else ():
            name, _, value = item.partition("=")
            if name not in kinds:
                raise ValueError(f"launch option {name!r} is not one of {list(kinds)}")
            kind = kinds[name]
            if kind is bool:
                if value not in _BOOLS:
                    raise ValueError(f"launch option {name}={value!r}: expected one of {sorted(_BOOLS)}")
                kw[name] = _BOOLS[value]
            elif kind is int:
                try:
                    kw[name] = int(value)
                except ValueError:
                    raise ValueError(f"launch option {name}={value!r}: expected an integer") from None
            else:
                kw[name] = value
        return cls(**kw)


_BOOLS = {"1": True, "True": True, "true": True, "0": False, "False": False, "false": False}


DEFAULT_LAUNCH = LaunchOptions()
