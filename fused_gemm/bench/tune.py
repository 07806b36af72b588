"""`fused-gemm tune`: time candidate kernels per (dtype, N, K, M bucket) and write the winners to the
GPU's tuned table (data: ``fused_gemm/generator/gemm/tuned/<gpu>.json``).

Per cell, three passes, each interleaved with torch.mm on the same rotated inputs (ratios are taken
per repetition, so clock drift cancels):
  1. every candidate tile config with its first launch option;
  2. every launch option of the best three configs;
  3. after the choice (per cell, or across cells with ``minimal``), the pick and the runner-up are
     timed again with more repetitions, so that the table does not record noise, and the winner's
     output is checked against float64 before it is written.
``minimal`` picks the fewest tile configs (kernels to build, per epilogue) such that every cell has
one within ``tolerance`` of its best measured variant, then each cell's best among those.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .. import jit
from ..generator import GemmSpec, LaunchOptions, build_many
from ..generator.gemm import tuned, tuning_space
from ..generator.gemm.spec import config_from_name
from ..generator.gemm.tuned import Entry, TunedTable
from . import environment
from .ops import TOLERANCE, rel_error
from .sweep import timed_in_graph
from .timing import paired_ratios, rotation_count, time_samples, warm_gpu

TUNE_EPILOGUE = "bias+gelu_tanh"   # what the tables are tuned with; the tiling serves every epilogue
Variant = Tuple[str, LaunchOptions]   # (tile config name, launch options)
GROUP = 3                             # variants timed together with torch.mm (see Cells.time)


def candidate_specs(dtype: str, ms: Sequence[int], arch: str = "sm90a") -> List[GemmSpec]:
    """Every kernel the tuner may time for these M values (what `fused-gemm tune --build` builds)."""
    configs = dict.fromkeys(c.config for m in ms for c in tuning_space.candidates(arch, dtype, m))
    return [GemmSpec(dtype, epilogue=TUNE_EPILOGUE, config=c, arch=arch) for c in configs]


@dataclass
class Cell:
    n: int
    k: int
    m: int
    times: Dict[Variant, float] = field(default_factory=dict)   # ours / torch.mm, per variant timed
    final: Optional[Tuple[Variant, float]] = None               # (variant, torch.mm / ours) after pass 3

    def best(self, allowed: Optional[set] = None) -> Optional[Variant]:
        pool = [(t, v) for v, t in self.times.items() if allowed is None or v[0] in allowed]
        return min(pool, key=lambda p: p[0])[1] if pool else None


class Cells:
    """The inputs of one (N, K, M) cell and the calls of each variant on them."""

    def __init__(self, dtype: torch.dtype, n: int, k: int, m: int):
        self.dtype, self.n, self.k, self.m = dtype, n, k, m
        per_set = 2 * (m * k + n * k + n + m * n)
        self.sets = [self._make() for _ in range(rotation_count(per_set))]
        self.ops: Dict[str, object] = {}

    def _make(self):
        x = torch.randn(self.m, self.k, dtype=self.dtype, device="cuda")
        w = torch.randn(self.n, self.k, dtype=self.dtype, device="cuda") / self.k ** 0.5
        b = torch.randn(self.n, dtype=self.dtype, device="cuda")
        return x, w, b

    def op(self, config_name: str):
        if config_name not in self.ops:
            spec = GemmSpec(_DTYPE[self.dtype], epilogue=TUNE_EPILOGUE, config=config_from_name(config_name))
            self.ops[config_name] = jit.compile(spec)
        return self.ops[config_name]

    def calls(self, variant: Variant):
        op, launch = self.op(variant[0]), variant[1]
        return [(lambda s=s: op.run(s[0], s[1], s[2], None, None, None, 1.0, 1.0, None, None, launch))
                for s in self.sets]

    def mm(self):
        return [(lambda s=s: torch.mm(s[0], s[1].t())) for s in self.sets]

    def runnable(self, variant: Variant) -> bool:
        try:
            self.calls(variant)[0]()
            torch.cuda.synchronize()
            return True
        except (ValueError, RuntimeError) as exc:
            print(f"  skip {variant[0]} {variant[1]}: {exc}", file=sys.stderr)
            return False

    def time(self, variants: Sequence[Variant], reps: int) -> Dict[Variant, float]:
        """ours / torch.mm per variant, timed in small groups, each interleaved with torch.mm: a group
        of two dozen variants let torch.mm's share of the run (and so its clocks and L2 state) drift
        from what it sees alone, and read up to 15% optimistic on an H100 against pairs and graphs."""
        out: Dict[Variant, float] = {}
        for i in range(0, len(variants), GROUP):
            out.update(self._time_group(variants[i:i + GROUP], reps))
        return out

    def _time_group(self, variants: Sequence[Variant], reps: int) -> Dict[Variant, float]:
        graph = timed_in_graph(self.m, 2.0 * self.m * self.n * self.k)
        names = {f"v{i}": v for i, v in enumerate(variants)}
        calls = {name: self.calls(v) for name, v in names.items()}
        calls["mm"] = self.mm()
        big = 2.0 * self.m * self.n * self.k > 2e11
        samples = time_samples(calls, graph=graph, reps=reps, min_calls=32 if graph else (4 if big else 16))
        ratios = paired_ratios(samples, "mm")
        return {v: ratios[name] for name, v in names.items()}

    def error(self, variant: Variant) -> float:
        import torch.nn.functional as F
        x, w, b = self._make()
        out = torch.full((self.m, self.n), float("nan"), dtype=self.dtype, device="cuda")
        self.op(variant[0]).run(x, w, b, None, None, None, 1.0, 1.0, None, out, variant[1])
        ref = F.gelu(F.linear(x.double(), w.double(), b.double()), approximate="tanh")
        return rel_error(out, ref)


_DTYPE = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def measure(cell: Cell, dtype: torch.dtype, arch: str = "sm90a") -> None:
    """Passes 1 and 2: fills cell.times."""
    io = Cells(dtype, cell.n, cell.k, cell.m)
    cands = tuning_space.candidates(arch, _DTYPE[dtype], cell.m)
    first = [v for v in ((c.config.name, c.launches[0]) for c in cands) if io.runnable(v)]
    times = io.time(first, reps=5)
    cell.times.update(times)
    top = sorted(first, key=lambda v: times[v])[:3]
    launches = {c.config.name: c.launches for c in cands}
    second = [v for v in ((name, launch) for name, _ in top for launch in launches[name]) if io.runnable(v)]
    times = io.time(second, reps=7)
    cell.times.update(times)   # pass 2 re-times the top configs' first launches too: keep the later


def minimal_configs(cells: Sequence[Cell], tolerance: float) -> List[str]:
    """Greedy set cover: fewest configs such that every cell has one within tolerance of its best."""
    near: List[set] = []
    for c in cells:
        if c.times:    # a cell where nothing ran is left to the heuristic
            best = min(c.times.values())
            near.append({v[0] for v, t in c.times.items() if t <= best * (1 + tolerance)})
    chosen: List[str] = []
    uncovered = set(range(len(near)))
    while uncovered:
        counts: Dict[str, int] = {}
        for i in uncovered:
            for name in near[i]:
                counts[name] = counts.get(name, 0) + 1
        name = max(sorted(counts), key=lambda x: counts[x])
        chosen.append(name)
        uncovered = {i for i in uncovered if name not in near[i]}
    return chosen


def confirm(cell: Cell, dtype: torch.dtype, allowed: Optional[set]) -> None:
    """Pass 3: the pick and the runner-up again, with more repetitions; the winner checked against
    float64 (then the rest, in measured order, if both fail).  A cell where nothing passes keeps no
    entry (the heuristic serves it) and says so."""
    io = Cells(dtype, cell.n, cell.k, cell.m)
    ranked = [v for _, v in sorted(((t, v) for v, t in cell.times.items() if allowed is None or v[0] in allowed),
                                   key=lambda p: p[0])]
    times = io.time(ranked[:2], reps=15) if ranked else {}
    order = sorted(ranked[:2], key=lambda v: times[v]) + ranked[2:]
    tol = TOLERANCE[dtype]
    for variant in order:
        err = io.error(variant)
        if err <= tol:
            cell.final = (variant, 1.0 / times.get(variant, cell.times[variant]))
            return
        print(f"  {variant[0]} {variant[1]} fails the float64 check at {cell.n}x{cell.k} M={cell.m}: {err:.2e}",
              file=sys.stderr)
    print(f"  no candidate passed at N={cell.n} K={cell.k} M={cell.m}: left to the heuristic", file=sys.stderr)


def tune(shapes: Sequence[Tuple[int, int]], ms: Sequence[int], dtype: torch.dtype = torch.bfloat16,
         minimal: bool = False, tolerance: float = 0.02, build: bool = True, jobs: Optional[int] = None,
         progress: bool = True, on_measured: Optional[Callable[[Sequence[Cell]], None]] = None
         ) -> Tuple[TunedTable, List[Cell]]:
    """``on_measured(cells)`` runs after passes 1-2 and again at the end (the CLI saves the raw
    timings there, so an interrupted or failed pass 3 loses nothing)."""
    bad = [m for m in ms if m not in tuned.M_BUCKETS]
    if bad:
        raise ValueError(f"M values {bad} are not buckets of the tuned tables {tuned.M_BUCKETS}")
    dname = _DTYPE[dtype]
    if build:
        build_many(candidate_specs(dname, ms), jobs=jobs, progress=progress)
    warm_gpu()
    cells = [Cell(n, k, m) for n, k in shapes for m in ms]
    started = time.monotonic()
    for i, cell in enumerate(cells):
        if progress:
            sys.stderr.write(f"\r[{i + 1}/{len(cells)}] {time.monotonic() - started:5.0f}s  "
                             f"N={cell.n} K={cell.k} M={cell.m}          ")
            sys.stderr.flush()
        measure(cell, dtype)
        torch.cuda.empty_cache()
    if on_measured:
        on_measured(cells)
    allowed = set(minimal_configs(cells, tolerance)) if minimal else None
    for cell in cells:
        confirm(cell, dtype, allowed)
        torch.cuda.empty_cache()
    if progress:
        sys.stderr.write("\n")
    if on_measured:
        on_measured(cells)
    done = [c for c in cells if c.final is not None]
    env = environment.describe()
    meta = {"measured": env["date"], "gpu": env["gpu"], "driver": env.get("driver"), "torch": env["torch"],
            "epilogue": TUNE_EPILOGUE, "minimal": minimal, "tolerance": tolerance,
            "kernels": len({c.final[0][0] for c in done})}
    entries = tuple(Entry(dname, c.n, c.k, c.m, config_from_name(c.final[0][0]), c.final[0][1], c.final[1])
                    for c in done)
    return TunedTable(environment.gpu_slug(), meta, entries), cells


def merge(old: Optional[TunedTable], new: TunedTable) -> TunedTable:
    """New entries replace old ones of the same (dtype, N, K, M); the rest of the old table stays."""
    if old is None:
        return new
    keys = {(e.dtype, e.n, e.k, e.m) for e in new.entries}
    kept = tuple(e for e in old.entries if (e.dtype, e.n, e.k, e.m) not in keys)
    entries = kept + new.entries
    # The meta describes the last run; the kernel count is the merged table's (what an AOT set builds).
    meta = {**new.meta, "kernels": len({e.config.name for e in entries}), "cells_in_last_run": len(new.entries)}
    return TunedTable(new.gpu, meta, entries)


def write(table: TunedTable, path: Optional[Path] = None) -> Path:
    """Merges ``table`` into the table file (default: the package's table for its GPU)."""
    path = Path(path) if path else tuned.table_path(table.gpu)
    existing = TunedTable.from_json(path.read_text()) if path.is_file() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(merge(existing, table).to_json())
    tuned.load.cache_clear()
    from ..gemm import linear     # choices memoised from the old table
    from ..rope import api as rope_api
    linear._selection.clear()
    rope_api._selection.clear()
    return path


def write_measurements(cells: Sequence[Cell], path: Path) -> None:
    """Every variant's measured time over torch.mm, for a later look at what the tuner saw."""
    raw = [{"n": c.n, "k": c.k, "m": c.m, "final": [c.final[0][0], str(c.final[0][1]), c.final[1]] if c.final else None,
            "ours_over_mm": {f"{v[0]} {v[1]}": round(t, 4) for v, t in sorted(c.times.items(), key=lambda p: p[1])}}
           for c in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1))
