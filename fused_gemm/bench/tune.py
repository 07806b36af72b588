"""`fused-gemm tune`: time candidate kernels per (op, dtype, N, K, M bucket) and write the winners to the
GPU's tuned table (data: ``fused_gemm/generator/gemm/tuned/<gpu>.json``).

Ops (Workload subclasses, one each): ``linear`` (bias + gelu_tanh, against torch.mm), ``gated``
(gated_linear's SwiGLU on the packed [2I, K] weight, against torch.mm on that weight), ``fp8``
(fp8_linear with row x column scales and fp32 promotion, against torch._scaled_mm with the same scales),
``qkv_rope`` (a model's QKV projection with NeoX rotary, against torch.mm on its weight) and ``fp8_fast``
(fp8's with fast accumulation, against torch._scaled_mm's).
Per cell, three passes, each interleaved with the op's baseline on the same rotated inputs (ratios are
taken per repetition, so clock drift cancels):
  1. every candidate kernel with its first launch option;
  2. every launch option of the best three kernels;
  3. after the choice (per cell, or across cells with ``minimal``), the pick and the runner-up are
     timed again with more repetitions, so that the table does not record noise, and the winner's
     output is checked against float64 before it is written.
``minimal`` picks the fewest kernels (per op and epilogue) such that every cell has one within
``tolerance`` of its best measured variant, then each cell's best among those.
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
from ..generator import LaunchOptions, SpecError, build_many
from ..generator.gemm import tuned, tuning_space
from ..generator.gemm.presets import tuned_kernel
from ..generator.gemm.tuned import Entry, TunedTable
from ..generator.rope import heuristics as rope_heuristics
from . import environment
from .ops import ROPE_MAX_POSITION, TOLERANCE, packed_positions, fp8_scaled_operands, rel_error, rope_error
from .sweep import timed_in_graph
from .timing import paired_ratios, rotation_count, time_samples, warm_gpu

TUNE_EPILOGUE = "bias+gelu_tanh"   # what the linear tables are tuned with; the tiling serves every epilogue
Variant = Tuple[str, LaunchOptions]   # (kernel name: tuning_space.Candidate.name, launch options)
GROUP = 3                             # variants timed together with the baseline (see Workload.time)
_DTYPE = {torch.bfloat16: "bf16", torch.float16: "fp16"}
FP8 = torch.float8_e4m3fn


@dataclass
class Cell:
    n: int
    k: int
    m: int
    times: Dict[Variant, float] = field(default_factory=dict)   # ours / baseline, per variant timed
    final: Optional[Tuple[Variant, float]] = None               # (variant, baseline / ours) after pass 3

    def best(self, allowed: Optional[set] = None) -> Optional[Variant]:
        pool = [(t, v) for v, t in self.times.items() if allowed is None or v[0] in allowed]
        return min(pool, key=lambda p: p[0])[1] if pool else None


class Workload:
    """One op's inputs for one (N, K, M) cell, the calls of each candidate kernel on them, and the
    baseline's.  Subclasses name the op, its candidates and specs, and how to call and check it."""
    op = "linear"
    baseline_name = "torch.mm"

    def __init__(self, dtype: torch.dtype, n: int, k: int, m: int):
        self.dtype, self.n, self.k, self.m = dtype, n, k, m
        self.sets = [self.make() for _ in range(rotation_count(self.set_bytes()))]
        self.ops: Dict[str, object] = {}
        self._candidates = {c.name: c for c in self.candidates(m)}

    # -- what a subclass defines --------------------------------------------------------------------
    @classmethod
    def table_dtype(cls, dtype: torch.dtype) -> str:
        return _DTYPE[dtype]

    @classmethod
    def space(cls, m: int, dtype: torch.dtype) -> Tuple[tuning_space.Candidate, ...]:
        """The tuning space's candidates for M (before the op's spec has refused any)."""
        return tuning_space.candidates("sm90a", _DTYPE[dtype], m)

    def set_bytes(self) -> int:
        raise NotImplementedError

    def make(self):
        raise NotImplementedError

    def call(self, op, s, launch):
        raise NotImplementedError

    def baseline_call(self, s):
        raise NotImplementedError

    def error(self, variant: Variant) -> float:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------------
    @classmethod
    def spec(cls, candidate: tuning_space.Candidate, dtype: torch.dtype, m: int = 1, gpu: Optional[str] = None):
        """The candidate's kernel at the op's tuned epilogue (for M tokens on ``gpu`` where that matters)."""
        return tuned_kernel(cls.op, cls.table_dtype(dtype), candidate.config, candidate.promotion, m, gpu)

    @classmethod
    def candidates(cls, m: int, dtype: torch.dtype = torch.bfloat16) -> Tuple[tuning_space.Candidate, ...]:
        """The space's candidates whose kernel the op can build (a tile its epilogue takes)."""
        out = []
        for c in cls.space(m, dtype):
            try:
                cls.spec(c, dtype, m)
            except (SpecError, AttributeError):   # a tile the epilogue refuses, or a decode kernel it has none for
                continue
            out.append(c)
        return tuple(out)

    @classmethod
    def candidate_specs(cls, dtype: torch.dtype, ms: Sequence[int]) -> list:
        """Every kernel the tuner may time for these M values on any GPU (what `fused-gemm tune` builds
        first; qkv_rope's shared-memory reserve differs by GPU, rope_heuristics.GPU_L1_RESERVE_ROWS)."""
        gpus = (None, *rope_heuristics.GPU_L1_RESERVE_ROWS)
        return list(dict.fromkeys(cls.spec(c, dtype, m, gpu) for gpu in gpus for m in ms
                                  for c in cls.candidates(m, dtype)))

    def op_for(self, name: str):
        if name not in self.ops:
            self.ops[name] = jit.compile(self.spec(self._candidates[name], self.dtype, self.m, environment.gpu_slug()))
        return self.ops[name]

    def launches(self, name: str) -> Tuple[LaunchOptions, ...]:
        return self._candidates[name].launches

    def entry(self, variant: Variant, speedup: float) -> Entry:
        c = self._candidates[variant[0]]
        return Entry(self.table_dtype(self.dtype), self.n, self.k, self.m, c.config, variant[1], speedup, self.op,
                     c.promotion)

    def calls(self, variant: Variant):
        op, launch = self.op_for(variant[0]), variant[1]
        return [(lambda s=s: self.call(op, s, launch)) for s in self.sets]

    def runnable(self, variant: Variant) -> bool:
        try:
            self.calls(variant)[0]()
            torch.cuda.synchronize()
            return True
        except (ValueError, RuntimeError) as exc:
            print(f"  skip {variant[0]} {variant[1]}: {exc}", file=sys.stderr)
            return False

    def time(self, variants: Sequence[Variant], reps: int) -> Dict[Variant, float]:
        """ours / baseline per variant, timed in small groups, each interleaved with the baseline: a group
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
        calls["base"] = [(lambda s=s: self.baseline_call(s)) for s in self.sets]
        big = 2.0 * self.m * self.n * self.k > 2e11
        samples = time_samples(calls, graph=graph, reps=reps, min_calls=32 if graph else (4 if big else 16))
        ratios = paired_ratios(samples, "base")
        return {v: ratios[name] for name, v in names.items()}


class LinearWork(Workload):
    """linear(bias, gelu_tanh) against torch.mm (no epilogue)."""

    def set_bytes(self):
        return 2 * (self.m * self.k + self.n * self.k + self.n + self.m * self.n)

    def make(self):
        x = torch.randn(self.m, self.k, dtype=self.dtype, device="cuda")
        w = torch.randn(self.n, self.k, dtype=self.dtype, device="cuda") / self.k ** 0.5
        b = torch.randn(self.n, dtype=self.dtype, device="cuda")
        return x, w, b

    def call(self, op, s, launch):
        return op.run(s[0], s[1], s[2], None, None, None, 1.0, 1.0, None, None, launch)

    def baseline_call(self, s):
        return torch.mm(s[0], s[1].t())

    def error(self, variant):
        import torch.nn.functional as F
        x, w, b = self.make()
        out = torch.full((self.m, self.n), float("nan"), dtype=self.dtype, device="cuda")
        self.op_for(variant[0]).run(x, w, b, None, None, None, 1.0, 1.0, None, out, variant[1])
        ref = F.gelu(F.linear(x.double(), w.double(), b.double()), approximate="tanh")
        return rel_error(out, ref)


class GatedWork(Workload):
    """gated_linear (SwiGLU, no bias) on the packed [2I, K] weight (N = 2I) against torch.mm on that
    weight: the GEMM alone, as linear's tables are tuned against it.  Candidates: linear's tiles that
    the pair epilogue takes (persistent scheduler, registers-to-global stores)."""
    op = "gated"

    def set_bytes(self):
        return 2 * (self.m * self.k + self.n * self.k + self.m * self.n // 2)

    def make(self):
        x = torch.randn(self.m, self.k, dtype=self.dtype, device="cuda")
        w = torch.randn(self.n, self.k, dtype=self.dtype, device="cuda") / self.k ** 0.5
        return x, w

    def call(self, op, s, launch):
        return op.run(s[0], s[1], None, None, None, 1.0, 1.0, None, None, launch)

    def baseline_call(self, s):
        return torch.mm(s[0], s[1].t())

    def error(self, variant):
        import torch.nn.functional as F
        from ..gated.op import pack_gate_up
        x = torch.randn(self.m, self.k, dtype=self.dtype, device="cuda")
        wg, wu = (torch.randn(self.n // 2, self.k, dtype=self.dtype, device="cuda") / self.k ** 0.5 for _ in range(2))
        out = torch.full((self.m, self.n // 2), float("nan"), dtype=self.dtype, device="cuda")
        self.op_for(variant[0]).run(x, pack_gate_up(wg, wu), None, None, None, 1.0, 1.0, None, out, variant[1])
        ref = F.silu(x.double() @ wg.double().t()) * (x.double() @ wu.double().t())
        return rel_error(out, ref)


class Fp8Work(Workload):
    """fp8_linear (e4m3, per-token x per-channel scales, bf16 out, fp32 promotion) against
    torch._scaled_mm with the same scales and its default (not fast) accumulation."""
    op = "fp8"
    baseline_name = "torch._scaled_mm"

    @classmethod
    def table_dtype(cls, dtype):
        return "e4m3"

    @classmethod
    def space(cls, m, dtype=FP8):
        return tuning_space.candidates("sm90a", "e4m3", m, fast_accum=tuned.FP8_OPS[cls.op])

    def set_bytes(self):
        return self.m * self.k + self.n * self.k + 2 * self.m * self.n + 4 * (self.m + self.n)

    def make(self):
        return fp8_scaled_operands(self.m, self.n, self.k)

    def call(self, op, s, launch):
        return op.run(s[0], s[1], None, None, s[2].view(-1), s[3].view(-1), 1.0, 1.0, None, None, launch)

    def baseline_call(self, s):
        return torch._scaled_mm(s[0], s[1].t(), scale_a=s[2], scale_b=s[3], out_dtype=torch.bfloat16,
                                use_fast_accum=tuned.FP8_OPS[self.op])

    def error(self, variant):
        x, w, xs, ws = self.make()
        out = torch.full((self.m, self.n), float("nan"), dtype=torch.bfloat16, device="cuda")
        self.op_for(variant[0]).run(x, w, None, None, xs.view(-1), ws.view(-1), 1.0, 1.0, None, out, variant[1])
        ref = (x.double() @ w.double().t()) * xs.double() * ws.double()
        return rel_error(out, ref)


class Fp8FastWork(Fp8Work):
    """fp8_linear as Fp8Work's, with fast accumulation (no promotion), against torch._scaled_mm with
    use_fast_accum=True."""
    op = "fp8_fast"


class RopeWork(Workload):
    """qkv_rope (NeoX, full rotary, no bias) on a model's packed QKV weight against torch.mm on it (the
    GEMM alone), positions of a packed prefill batch.  Candidates: linear's tiles that hold whole heads
    or whole chunks of one (RopeSpec); each with the shared-memory reserve qkv_rope's rule gives it."""
    op = "qkv_rope"

    def __init__(self, dtype, n, k, m):
        self.heads, self.kv_heads, self.head_dim = rope_geometry(n, k)
        from .. import rope_cos_sin_cache
        self.cache = rope_cos_sin_cache(ROPE_MAX_POSITION, self.head_dim, device="cuda")
        super().__init__(dtype, n, k, m)

    @classmethod
    def space(cls, m, dtype=torch.bfloat16):
        return super().space(m, dtype) + tuple(c for c in tuning_space.ROPE_EXTRA if c.serves(m))

    def set_bytes(self):
        return 2 * (self.n * self.k + self.m * (self.k + self.n))

    def make(self):
        from .. import pack_qkv_rope
        x = torch.randn(self.m, self.k, dtype=self.dtype, device="cuda")
        w = torch.randn(self.n, self.k, dtype=self.dtype, device="cuda") / self.k ** 0.5
        packed = pack_qkv_rope(w, num_heads=self.heads, num_kv_heads=self.kv_heads, head_dim=self.head_dim)
        return x, w, packed, packed_positions(self.m, ROPE_MAX_POSITION)

    def call(self, op, s, launch):
        return op.run(s[0], s[2].weight, None, s[3], self.cache, self.heads, self.kv_heads, None, None, None, launch,
                      False)

    def baseline_call(self, s):
        return torch.mm(s[0], s[1].t())

    def error(self, variant):
        x, w, packed, pos = self.make()
        rows = min(self.m, 256)
        got = self.call(self.op_for(variant[0]), (x, w, packed, pos), variant[1])
        return rope_error(got, x, w, pos, self.cache, self.heads, self.kv_heads, self.head_dim, rows)


def rope_geometry(n: int, k: int) -> Tuple[int, int, int]:
    """(q heads, kv heads, head dim) of the model preset whose QKV weight is [n, k]."""
    from .models import MODELS
    for model in MODELS.values():
        if model.layers()[0][1:] == (n, k) and model.head_dim == rope_heuristics.TUNED_HEAD_DIM:
            return model.attention()
    raise ValueError(f"qkv_rope tunes a model preset's QKV weight with {rope_heuristics.TUNED_HEAD_DIM}-wide heads; "
                     f"no preset has one of shape [{n}, {k}]")


WORKLOADS: Dict[str, type] = {w.op: w for w in (LinearWork, GatedWork, Fp8Work, RopeWork, Fp8FastWork)}
assert tuple(WORKLOADS) == tuned.OPS


def candidate_specs(dtype: str, ms: Sequence[int], op: str = "linear") -> list:
    """Every kernel the tuner may time for these M values (what `fused-gemm tune --build` builds)."""
    return WORKLOADS[op].candidate_specs(TORCH_DTYPES[dtype], ms)


TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "e4m3": FP8}


def measure(cell: Cell, work: type, dtype: torch.dtype) -> None:
    """Passes 1 and 2: fills cell.times."""
    io = work(dtype, cell.n, cell.k, cell.m)
    cands = work.candidates(cell.m, dtype)
    first = [v for v in ((c.name, c.launches[0]) for c in cands) if io.runnable(v)]
    times = io.time(first, reps=5)
    cell.times.update(times)
    top = sorted(first, key=lambda v: times[v])[:3]
    second = [v for v in ((name, launch) for name, _ in top for launch in io.launches(name)) if io.runnable(v)]
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


def confirm(cell: Cell, work: type, dtype: torch.dtype, allowed: Optional[set]) -> Optional[Entry]:
    """Pass 3: the pick and the runner-up again, with more repetitions; the winner checked against
    float64 (then the rest, in measured order, if both fail).  A cell where nothing passes keeps no
    entry (the heuristic serves it) and says so.  Returns the cell's table entry."""
    io = work(dtype, cell.n, cell.k, cell.m)
    ranked = [v for _, v in sorted(((t, v) for v, t in cell.times.items() if allowed is None or v[0] in allowed),
                                   key=lambda p: p[0])]
    times = io.time(ranked[:2], reps=15) if ranked else {}
    order = sorted(ranked[:2], key=lambda v: times[v]) + ranked[2:]
    tol = TOLERANCE[torch.bfloat16 if dtype is FP8 else dtype]   # fp8: its bf16 output's rounding
    for variant in order:
        err = io.error(variant)
        if err <= tol:
            cell.final = (variant, 1.0 / times.get(variant, cell.times[variant]))
            return io.entry(variant, cell.final[1])
        print(f"  {variant[0]} {variant[1]} fails the float64 check at {cell.n}x{cell.k} M={cell.m}: {err:.2e}",
              file=sys.stderr)
    print(f"  no candidate passed at N={cell.n} K={cell.k} M={cell.m}: left to the heuristic", file=sys.stderr)
    return None


def tune(shapes: Sequence[Tuple[int, int]], ms: Sequence[int], dtype: torch.dtype = torch.bfloat16,
         minimal: bool = False, tolerance: float = 0.02, build: bool = True, jobs: Optional[int] = None,
         progress: bool = True, on_measured: Optional[Callable[[Sequence[Cell]], None]] = None, op: str = "linear"
         ) -> Tuple[TunedTable, List[Cell]]:
    """``on_measured(cells)`` runs after passes 1-2 and again at the end (the CLI saves the raw
    timings there, so an interrupted or failed pass 3 loses nothing).  ``op`` is one of WORKLOADS;
    fp8 and fp8_fast take dtype torch.float8_e4m3fn and M buckets from 1024 (its decode rows are the heuristic's)."""
    work = WORKLOADS[op]
    bad = [m for m in ms if m not in tuned.M_BUCKETS or not work.candidates(m, dtype)]
    if bad:
        raise ValueError(f"M values {bad} are not buckets of the tuned tables {tuned.M_BUCKETS} that {op} has "
                         "candidates for")
    if build:
        build_many(work.candidate_specs(dtype, ms), jobs=jobs, progress=progress)
    warm_gpu()
    cells = [Cell(n, k, m) for n, k in shapes for m in ms]
    started = time.monotonic()
    for i, cell in enumerate(cells):
        if progress:
            sys.stderr.write(f"\r[{i + 1}/{len(cells)}] {time.monotonic() - started:5.0f}s  "
                             f"N={cell.n} K={cell.k} M={cell.m}          ")
            sys.stderr.flush()
        measure(cell, work, dtype)
        torch.cuda.empty_cache()
    if on_measured:
        on_measured(cells)
    allowed = set(minimal_configs(cells, tolerance)) if minimal else None
    entries = []
    for cell in cells:
        entry = confirm(cell, work, dtype, allowed)
        if entry is not None:
            entries.append(entry)
        torch.cuda.empty_cache()
    if progress:
        sys.stderr.write("\n")
    if on_measured:
        on_measured(cells)
    env = environment.describe()
    meta = {"measured": env["date"], "gpu": env["gpu"], "driver": env.get("driver"), "torch": env["torch"],
            "epilogue": TUNE_EPILOGUE if op == "linear" else op, "baseline": work.baseline_name,
            "minimal": minimal, "tolerance": tolerance, "kernels": _kernel_count(entries)}
    return TunedTable(environment.gpu_slug(), {"op": op, **meta}, tuple(entries)), cells


def merge(old: Optional[TunedTable], new: TunedTable) -> TunedTable:
    """New entries replace old ones of the same (op, dtype, N, K, M); the rest of the old table stays."""
    if old is None:         # a first run: merged into an empty table, so that its meta takes the same shape
        old = TunedTable(new.gpu, {}, ())
    keys = {e.key for e in new.entries}
    kept = tuple(e for e in old.entries if e.key not in keys)
    entries = kept + new.entries
    # The top-level meta describes the last linear run, and the kernel count is the merged table's (what an
    # AOT set builds); another op's last run is described under its own name.
    # "minimal" is true only while every linear run merged in was minimal; "history" keeps one line a run, so a
    # table re-tuned cell by cell still says how each part of it was chosen.
    op = new.meta.get("op", "linear")
    run = {k: v for k, v in new.meta.items() if k != "op"}
    if op == "linear":
        # a table whose linear entries came with no word on it was not chosen minimal
        was_minimal = old.meta.get("minimal", not any(e.op == "linear" for e in old.entries)) is True
        meta = {**old.meta, **run, "cells_in_last_run": len(new.entries),
                "minimal": was_minimal and bool(run.get("minimal"))}
    else:
        meta = {**old.meta, op: {**run, "cells_in_last_run": len(new.entries)}}
    meta["history"] = list(old.meta.get("history", ())) + [_history_line(op, run, new.entries)]
    meta["kernels"] = _kernel_count(entries)
    return TunedTable(new.gpu, meta, entries)


Ratios = Dict[Tuple[int, int, int], float]     # (N, K, M) -> speed-up over the baseline, one sweep run


def changed_entries(current: TunedTable, retuned: TunedTable, op: str = "linear", dtype: str = "bf16"
                    ) -> List[Tuple[Optional[Entry], Entry]]:
    """(current entry or None, re-tuned entry) for each cell of ``op`` / ``dtype`` whose kernel or launch changed."""
    old = {e.key: e for e in current.entries}
    return [(old.get(e.key), e) for e in retuned.entries if e.op == op and e.dtype == dtype
            and (e.key not in old or (old[e.key].config, old[e.key].launch) != (e.config, e.launch))]


def confirmed_entries(current: TunedTable, retuned: TunedTable, before: Sequence[Ratios], after: Sequence[Ratios],
                      margin: float = 0.01, op: str = "linear", dtype: str = "bf16") -> Tuple[Entry, ...]:
    """The re-tuned entries of ``op`` / ``dtype`` that sweeps confirm.  The tuner picks on short timings, and a cell's
    winner can lose to its old entry once both run as a sweep runs them; so a re-tuned cell replaces the current one only
    where it changed and every sweep run with the re-tuned table (``after``) beat every run with the current table
    (``before``) by more than ``margin``, the cells swept in both."""
    kept = []
    for _, e in changed_entries(current, retuned, op, dtype):
        cell = (e.n, e.k, e.m)
        if not all(cell in run for run in (*before, *after)) or not before or not after:
            continue
        if min(run[cell] for run in after) > (1 + margin) * max(run[cell] for run in before):
            kept.append(e)
    return tuple(kept)


def _history_line(op: str, run: dict, entries) -> str:
    """One run as the table's history records it: when, which op, how many cells, whether minimal."""
    shapes = ", ".join(f"{n}x{k}" for n, k in sorted({(e.n, e.k) for e in entries}))
    ms = ", ".join(map(str, sorted({e.m for e in entries})))
    cells = f"{len(entries)} cells (N x K {shapes}; M {ms})" if entries else "no cells"
    return f"{run.get('measured', '?')}: {op}, {cells}, minimal {bool(run.get('minimal'))}"


def _kernel_count(entries) -> int:
    """Distinct kernels the entries name, per op (at each op's tuned epilogue): what an AOT set builds."""
    return len({(e.op, e.config, e.promotion) for e in entries})


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
    from ..gated import api as gated_api
    from ..quant import fp8 as fp8_api
    gated_api._selection.clear()
    fp8_api._selection.clear()
    return path


def write_measurements(cells: Sequence[Cell], path: Path) -> None:
    """Every variant's measured time over the op's baseline, for a later look at what the tuner saw."""
    raw = [{"n": c.n, "k": c.k, "m": c.m, "final": [c.final[0][0], str(c.final[0][1]), c.final[1]] if c.final else None,
            "ours_over_baseline": {f"{v[0]} {v[1]}": round(t, 4) for v, t in sorted(c.times.items(), key=lambda p: p[1])}}
           for c in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1))
