"""Tuned per-GPU tables: which kernel serves which (op, dtype, N, K, M bucket), measured by `fused-gemm tune`.

A table is JSON data shipped with the package (``tuned/<gpu>.json``), not code.  Each entry names
a tile config and launch options for one op, one weight shape and one M bucket; the buckets are the
M values the tuner timed, and an entry serves every M above the previous bucket up to its own (the
largest bucket also serves every larger M).  Shapes and buckets a table lacks fall back to the op's
heuristic table (``heuristics.py``, the gated and fp8 rows).  The tile config is tuned with one
epilogue and serves them all: the epilogue changes the last few percent, the tiling the first tens.
Ops (OPS): ``linear`` (bf16/fp16), ``gated`` (gated_linear, the packed [2I, K] weight's N = 2I),
``fp8`` (fp8_linear without fast accumulation, dtype e4m3: the entry also names the fp32 promotion
interval), ``qkv_rope`` (the QKV projection with RoPE; its shared-memory reserve stays qkv_rope's rule)
and ``fp8_fast`` (fp8_linear with use_fast_accum=True, dtype e4m3: other tiles win without promotion).
"""
from __future__ import annotations

import bisect
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .heuristics import SPLIT_MIN_K, Rule
from .launch import LaunchOptions
from .spec import FP8_PROMOTION, TileConfig, config_from_name, k_slices_fit

TABLE_DIR = Path(__file__).with_name("tuned")
# M values the tuner times; a call's M is served by the first bucket >= M (the last serves all above).
M_BUCKETS: Tuple[int, ...] = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_GPU = re.compile(r"\b([A-Z]\d{2,3})\b")


def gpu_key(device_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA H200' -> 'h200', 'NVIDIA H100 PCIe' -> 'h100-pcie':
    the table's file name.  PCIe and NVL parts have other SM counts (114, 132) and clocks than the SXM
    part of the same name, and the tables pick tiles for whole waves: they get tables of their own."""
    name = device_name.upper()
    m = _GPU.search(name)
    if not m:
        return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    variant = next((v for v in ("PCIE", "NVL") if v in name), "")
    return m.group(1).lower() + (f"-{variant.lower()}" if variant else "")


def bucket_of(m: int) -> int:
    """Index of the bucket that serves M tokens."""
    return min(bisect.bisect_left(M_BUCKETS, m), len(M_BUCKETS) - 1)


OPS = ("linear", "gated", "fp8", "qkv_rope", "fp8_fast")
FP8_OPS = {"fp8": False, "fp8_fast": True}   # fp8_linear's ops, by use_fast_accum
FP8_OP = {fast: op for op, fast in FP8_OPS.items()}


@dataclass(frozen=True)
class Entry:
    dtype: str
    n: int
    k: int
    m: int                     # the bucket (an M the tuner timed)
    config: TileConfig
    launch: LaunchOptions
    speedup_vs_mm: float = 0.0  # measured when tuned: the op's baseline time / ours (informational; for
                                # linear and gated torch.mm on the weight, for fp8 torch._scaled_mm)
    op: str = "linear"
    promotion: int = FP8_PROMOTION   # fp8: wgmmas between fp32 promotions (GemmSpec.promotion)

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"tuned entry op {self.op!r} is not one of {OPS}")
        if self.promotion != FP8_PROMOTION and FP8_OPS.get(self.op) is not False:   # only precise fp8 promotes
            raise ValueError(f"tuned entry of op {self.op!r} names promotion {self.promotion}: only fp8's entries "
                             "promote (GemmSpec.promotion)")

    @property
    def key(self) -> Tuple[str, str, int, int, int]:
        return self.op, self.dtype, self.n, self.k, self.m

    def rule(self, max_m: int) -> Rule:
        return Rule(max_m, self.config, self.launch, self.promotion)

    def to_json(self) -> dict:
        launch = {f: getattr(self.launch, f) for f in ("splits", "swizzle", "raster", "decomposition", "reduction",
                                                         "pdl") if getattr(self.launch, f) != getattr(LaunchOptions(), f)}
        extra = {"op": self.op} if self.op != "linear" else {}
        if self.promotion != FP8_PROMOTION:
            extra["promotion"] = self.promotion
        return {**extra, "dtype": self.dtype, "n": self.n, "k": self.k, "m": self.m, "config": self.config.name,
                "launch": launch, "speedup_vs_mm": round(self.speedup_vs_mm, 4)}

    @classmethod
    def from_json(cls, d: dict) -> "Entry":
        return cls(d["dtype"], int(d["n"]), int(d["k"]), int(d["m"]), config_from_name(d["config"]),
                   LaunchOptions(**d.get("launch", {})), float(d.get("speedup_vs_mm", 0.0)), d.get("op", "linear"),
                   int(d.get("promotion", FP8_PROMOTION)))


@dataclass(frozen=True)
class TunedTable:
    gpu: str
    meta: dict = field(compare=False)
    entries: Tuple[Entry, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "_rules", _index(self.entries))
        object.__setattr__(self, "_at", {e.key: e.rule(e.m) for e in self.entries})

    def rule_at(self, dtype: str, n: int, k: int, bucket_m: int, op: str = "linear") -> Optional[Rule]:
        return self._at.get((op, dtype, n, k, bucket_m))

    def rules(self, dtype: str, n: int, k: int, op: str = "linear") -> Optional[Tuple[Rule, ...]]:
        """The shape's rows as heuristic-style rules (one per bucket, ascending), or None."""
        return self._rules.get((op, dtype, n, k))

    def configs(self, op: Optional[str] = None) -> List[TileConfig]:
        """Every distinct tile config the table uses (of one op, or all): what a prebuilt kernel set must hold."""
        return list(dict.fromkeys(e.config for e in self.entries if op is None or e.op == op))

    def to_json(self) -> str:
        entries = sorted(self.entries, key=lambda e: (e.op != "linear", e.op, e.dtype, e.n, e.k, e.m))
        body = ",\n  ".join(json.dumps(e.to_json()) for e in entries)
        return f'{{"gpu": {json.dumps(self.gpu)}, "meta": {json.dumps(self.meta)},\n "entries": [\n  {body}\n ]}}\n'

    @classmethod
    def from_json(cls, text: str) -> "TunedTable":
        """A table file; entries of an op this version does not know (a newer tuner's) or that it refuses are
        left out, with a warning for the latter, so that they cannot take the other ops' entries down with them."""
        d = json.loads(text)
        entries = []
        for e in d["entries"]:
            if e.get("op", "linear") not in OPS:
                continue
            try:
                entries.append(Entry.from_json(e))
            except ValueError as exc:
                warnings.warn(f"tuned table {d['gpu']!r}: entry {e} left out: {exc}")
        return cls(d["gpu"], d.get("meta", {}), tuple(entries))


_BIG_M = 1 << 62


def _index(entries: Tuple[Entry, ...]) -> Dict[Tuple[str, str, int, int], Tuple[Rule, ...]]:
    by_shape: Dict[Tuple[str, str, int, int], List[Entry]] = {}
    for e in entries:
        by_shape.setdefault(e.key[:4], []).append(e)
    out = {}
    for key, es in by_shape.items():
        es.sort(key=lambda e: e.m)
        out[key] = tuple(e.rule(_BIG_M if i == len(es) - 1 else e.m) for i, e in enumerate(es))
    return out


def tables_enabled() -> bool:
    """FUSED_GEMM_TUNED=0 makes every op ignore the shipped per-GPU tables (the heuristics decide)."""
    return os.environ.get("FUSED_GEMM_TUNED", "1") not in ("0", "")


def table_path(gpu: str) -> Path:
    return TABLE_DIR / f"{gpu}.json"


@lru_cache(maxsize=None)
def load(gpu: str) -> Optional[TunedTable]:
    """The shipped table for ``gpu`` (a gpu_key), or None if none ships."""
    path = table_path(gpu)
    return TunedTable.from_json(path.read_text()) if path.is_file() else None


# A linear call in fp16 takes the bf16 entry of its cell where the table has no fp16 one: wgmma and mma.sync run
# both at one rate on the same bytes, so a tile choice carries over (the tables are tuned in bf16; measured on an
# H200: perf/results/h200_split_k_parallel.txt, section I).
SHARED_TILES = {"fp16": "bf16"}


def entry_dtypes(dtype: str, op: str = "linear") -> Tuple[str, ...]:
    """The entries' dtypes a call of ``op`` in ``dtype`` reads, first match first."""
    return (dtype, SHARED_TILES[dtype]) if op == "linear" and dtype in SHARED_TILES else (dtype,)


# A linear call on a weight the table lacks takes the entry, at its M bucket, of the tabled weight nearest in rows (then
# in K) if that one is within this ratio of rows: the tile choice follows the tile count, which the rows set (the
# tables' picks at M = 128 go from 64x64 tiles up to 4096 rows, to 64x96 / 64x112 / 64x128 pairs up to 8192, to 128x112+ wider).
# Not for decode buckets (M <= 16: the decode kernel's CTA shape is chosen per weight class; the rule starts with the
# bucket of M = 17-64), and only where the
# entry's tile divides the weight's rows: the tables' 112- and 144-wide tiles were picked where they make whole waves,
# and on 16384 rows a 14336-row weight's 112-wide tile ran at 0.67-0.70x torch.mm against 0.91-0.96x for the
# heuristic's (H200, 16 weights of four models at five shardings no table has, M = 1-4096: geomean 0.925x -> 0.977x
# with both rules; perf/results/h200_split_k_parallel.txt, sections J and K; not measured on an H100).  Where the
# nearest weight's tile does not divide the rows, the next nearest whose tile does serves (2026-11-28: the one-wave
# tiles, 160 wide for 1280 rows, 112 for 3584, would otherwise leave 1536-, 2560- and 3072-row weights to the heuristic;
# the cells this changed were not measured).
NEAREST_ROWS_RATIO = 1.5
NEAREST_MIN_BUCKET = 64


def _split_k_parallel(config) -> bool:
    return isinstance(config, TileConfig) and config.scheduler == "split_k_parallel"


def nearest_rule_for(gpu: str, dtype: str, n: int, k: int, m: int) -> Optional[Rule]:
    """linear's rule for an [n, k] weight the table of ``gpu`` lacks: the entry, at M's bucket, of the nearest tabled
    weight (see NEAREST_ROWS_RATIO) among those whose entry's tile divides n, or None.  A split-K entry's forced count
    falls back to the automatic one (splits=1) where it does not cut this K into 8-element multiples."""
    table = load(gpu)
    if table is None or n <= 0 or k <= 0:
        return None
    bucket = M_BUCKETS[bucket_of(m)]
    if bucket < NEAREST_MIN_BUCKET:
        return None
    for entry_dtype in entry_dtypes(dtype):
        cells = [e for e in table.entries if e.op == "linear" and e.dtype == entry_dtype and e.m == bucket
                 and max(n, e.n) <= NEAREST_ROWS_RATIO * min(n, e.n)
                 and (not _split_k_parallel(e.config) or k >= SPLIT_MIN_K)
                 and isinstance(e.config, TileConfig) and n % e.config.tile[0 if e.config.swap_ab else 1] == 0]
        if cells:
            near = min(cells, key=lambda e: (abs(math.log(n / e.n)), abs(math.log(k / e.k))))
            rule = near.rule(bucket)
            splits = rule.launch.splits
            if _split_k_parallel(near.config) and splits > 1 and not k_slices_fit(k, splits):
                rule = replace(rule, launch=replace(rule.launch, splits=1))
            return rule
    return None


def rule_for(gpu: str, dtype: str, n: int, k: int, m: int, op: str = "linear", shared: bool = False
             ) -> Optional[Rule]:
    """The tuned rule serving this call shape of ``op`` on ``gpu``: the entry of M's bucket (with ``shared``, for
    fp16 linear calls bf16's where fp16 has none: SHARED_TILES; linear's own kernels, not the families that read the
    GEMM's entries for their tiles), or None (then the op's heuristic decides; a table tuned at a few buckets leaves
    the others to it)."""
    table = load(gpu)
    if table is None:
        return None
    bucket = M_BUCKETS[bucket_of(m)]
    for entry_dtype in (entry_dtypes(dtype, op) if shared else (dtype,)):
        rule = table.rule_at(entry_dtype, n, k, bucket, op)
        if rule is not None:
            return rule
    return None
