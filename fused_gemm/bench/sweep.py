"""`fused-gemm sweep`: ops x shape presets x M, each row timed against its baselines in the same run.

Rows go to a CSV as they finish, so an interrupted sweep resumes where it stopped (rows already in
the CSV are skipped).  The environment and the ceilings measured at the start (copy bandwidth,
torch.mm peak) go to a JSON beside it.  Decode (M <= GRAPH_MAX_M) and every problem of at most
GRAPH_MAX_FLOP (a kernel of tens of microseconds) is timed inside CUDA graphs: that is how decode
runs, and back-to-back eager launches of a short kernel time the host's dispatch (an H100 machine's
host took ~25 us per torch.mm call, more than the kernel at M = 128-256 on 4096-wide weights);
larger problems as back-to-back eager calls.

M is the tokens of a GEMM-family row.  For attention it is the sequence length (16384 // M sequences:
16k tokens a call) and for decode attention the cache length (one new token for each of the
epilogue column's b<B> sequences, always in CUDA graphs, with the K + V bytes' floor at every M);
their N and K are the q and k/v widths of the preset's heads (catalog.py).

Every row is timed at steady clocks (after a warm-up: what a serving GPU runs at).  With ``cold``
seconds, prefill rows are also timed on a cold GPU: after that long idle, within the first second of
load, where clocks boost and power has headroom (what a benchmark that starts from idle sees), ours
and the baselines interleaved as in the steady sample; the columns cold_us and cold_speedup hold it.
"""
from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import torch

from . import environment
from .models import M_VALUES
from .catalog import OPS
from .ops import TOLERANCE, Case
from .timing import copy_bandwidth, paired_ratios, time_samples, warm_gpu

GRAPH_MAX_M = 64
GRAPH_MAX_FLOP = 2 * 512 * 4096 * 4096   # ~25 us at an H100's ~700 TF/s
DECODE_MAX_M = 16          # rows that also report the HBM floor ratio
KEY = ("op", "epilogue", "dtype", "N", "K", "M")
# Baselines an op may have: torch.mm (bf16, on the unquantised weight for fp8/int4), eager PyTorch, cuBLASLt's
# fused epilogue, torch.compile, torch._scaled_mm (fp8), torch._weight_int4pack_mm (int4), SDPA (attention: its fastest
# backend in the run; decode attention: its default dispatch).
BASELINES = ("mm", "eager", "cublaslt", "compile", "scaled_mm", "tinygemm", "sdpa")
COLUMNS = KEY + ("preset", "layer", "geometry", "kernel", "timing", "ours_us") + \
    tuple(f"{b}_us" for b in BASELINES) + tuple(f"speedup_vs_{b}" for b in BASELINES) + \
    ("tflops", "gbps", "pct_of_ceiling", "floor_us", "floor_ratio", "rel_err", "ok", "cold_us", "cold_speedup")


def geometry_name(op: str, preset: str) -> str:
    """The heads an attention-shaped op's row was timed with ('h32_kv8_d128'; '' for the GEMM ops): with
    KEY, what makes a row (a shape two presets share with other heads is another row)."""
    g = OPS[op].geometry(preset)
    return f"h{g['heads']}_kv{g['kv_heads']}_d{g['head_dim']}" if g else ""


def timed_in_graph(m: int, flop: float) -> bool:
    """Whether a row (and a tuner cell) is timed inside a CUDA graph rather than eagerly."""
    return m <= GRAPH_MAX_M or flop <= GRAPH_MAX_FLOP


def _case_in_graph(case: Case, m: int) -> bool:
    return timed_in_graph(m, case.flop) if case.graph is None else case.graph


# the baseline an op is judged against (else torch.mm)
PRIMARY = {"fp8": "scaled_mm", "int4": "tinygemm", "attention": "sdpa", "decode_attention": "sdpa"}


def primary_baseline(row: dict) -> str:
    """The baseline column a row is judged against: torch.mm, or the op's own (when it ran)."""
    name = PRIMARY.get(row["op"], "mm")
    return name if row.get(f"speedup_vs_{name}") not in ("", None) else "mm"


@dataclass
class Ceilings:
    copy_gbps: float
    mm_tflops: float

    @classmethod
    def measure(cls, dtype=torch.bfloat16) -> "Ceilings":
        a = torch.randn(8192, 8192, dtype=dtype, device="cuda")
        b = torch.randn(8192, 8192, dtype=dtype, device="cuda")
        t = statistics.median(time_samples({"mm": [lambda: torch.mm(a, b)]}, reps=9, min_calls=10)["mm"])
        return cls(copy_bandwidth() / 1e9, 2 * 8192 ** 3 / t / 1e12)


def _fmt(v):
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return "" if v is None else str(v)


def time_case(case: Case, m: int, reps: Optional[int] = None) -> Dict[str, float]:
    """Median seconds per call of ours and each baseline, interleaved, and per-repetition ratios."""
    graph = _case_in_graph(case, m)
    variants = {"ours": case.ours, **case.baselines}
    big = case.flop > 2e11
    samples = time_samples(variants, graph=graph, reps=reps or (7 if big else 11),
                           min_calls=32 if graph else (6 if big else 20))
    medians = {name: statistics.median(ts) for name, ts in samples.items()}
    ratios = paired_ratios(samples, "ours")   # baseline time / ours, per repetition
    return {"graph": graph, **{f"{k}_s": v for k, v in medians.items()}, **{f"over_{k}": v for k, v in ratios.items()}}


def time_cold(case: Case, m: int, idle_s: float) -> Dict[str, float]:
    """Ours and the baselines after ``idle_s`` seconds of an idle GPU, within about its first second of
    load (a few calls each, interleaved); then a warm-up back to steady clocks."""
    variants = {"ours": case.ours, **case.baselines}
    for calls in variants.values():   # builds, workspaces, lazy loads: not on the cold clock
        calls[0]()
    torch.cuda.synchronize()
    time.sleep(idle_s)
    samples = time_samples(variants, graph=_case_in_graph(case, m), reps=3,   # as the steady sample
                           min_calls=2 if case.flop > 2e11 else 8)
    ratios = paired_ratios(samples, "ours")
    warm_gpu(1.5)
    return {"ours_s": statistics.median(samples["ours"]), **{f"over_{k}": v for k, v in ratios.items()}}


def run_row(op_name: str, epilogue: str, dtype: torch.dtype, preset: str, layer: str, n: int, k: int, m: int,
            ceilings: Ceilings, with_compile: bool, cold: float = 0.0) -> dict:
    sweep_op = OPS[op_name]
    case = sweep_op.make(n, k, m, dtype, epilogue, with_compile, **sweep_op.geometry(preset))
    cold_t = time_cold(case, m, cold) if cold and m > GRAPH_MAX_M and not case.floor_every_m else None   # prefill rows
    t = time_case(case, m)
    kernel = case.kernel
    for column, names in case.extra.get("best_of", {}).items():   # e.g. SDPA: its fastest backend here
        ran = [b for b in names if f"{b}_s" in t]
        if ran:
            best = min(ran, key=lambda b: t[f"{b}_s"])
            t[f"{column}_s"], t[f"over_{column}"] = t[f"{best}_s"], t[f"over_{best}"]
            if cold_t is not None and f"over_{best}" in cold_t:
                cold_t[f"over_{column}"] = cold_t[f"over_{best}"]
            kernel += f" ({column}: {best})"
    ours = t["ours_s"]
    row = {"op": op_name, "epilogue": epilogue, "dtype": str(dtype).replace("torch.", ""), "N": n, "K": k, "M": m,
           "preset": preset, "layer": layer, "geometry": geometry_name(op_name, preset), "kernel": kernel,
           "timing": "graph" if t["graph"] else "eager",
           "ours_us": ours * 1e6}
    for name in BASELINES:
        row[f"{name}_us"] = t[f"{name}_s"] * 1e6 if f"{name}_s" in t else float("nan")
        row[f"speedup_vs_{name}"] = t.get(f"over_{name}", float("nan"))
    row["tflops"] = case.flop / ours / 1e12
    row["gbps"] = case.min_bytes / ours / 1e9
    row["pct_of_ceiling"] = 100 * max(row["tflops"] / ceilings.mm_tflops, row["gbps"] / ceilings.copy_gbps)
    floor = case.weight_bytes / (ceilings.copy_gbps * 1e9)
    with_floor = floor > 0 and (m <= DECODE_MAX_M or case.floor_every_m)
    row["floor_us"] = floor * 1e6 if with_floor else float("nan")
    row["floor_ratio"] = ours / floor if with_floor else float("nan")
    row["rel_err"] = case.check()
    row["ok"] = bool(row["rel_err"] <= TOLERANCE[dtype] * (2 if op_name in ("fp8", "int4") else 1))
    if cold_t is not None:
        row["cold_us"] = cold_t["ours_s"] * 1e6
        row["cold_speedup"] = cold_t.get(f"over_{primary_baseline(row)}", float("nan"))
    del case
    return row


def _done(path: Path) -> set:
    """The rows a CSV holds: KEY and the geometry (a file written before that column reads '' there, so its
    attention-shaped rows are timed again on resume)."""
    if not path.is_file():
        return set()
    with path.open() as f:
        return {tuple(r[c] for c in KEY) + (r.get("geometry") or "",) for r in csv.DictReader(f)}


def _progress(i: int, total: int, started: float, label: str) -> None:
    elapsed = time.monotonic() - started
    eta = elapsed / max(i, 1) * (total - i)
    bar = "#" * int(30 * i / max(total, 1))
    sys.stderr.write(f"\r[{bar:<30}] {i}/{total} {elapsed:5.0f}s eta {eta:4.0f}s  {label:<50}")
    sys.stderr.flush()


def plan(ops: Sequence[str], presets: Sequence[str], ms: Iterable[int], epilogues: Dict[str, str]) -> List[tuple]:
    """Every row to time once: (op, epilogue, preset, layer, N, K, M); a shape two presets share is
    timed once, under the first."""
    rows, seen = [], set()
    for op in ops:
        for preset in presets:
            geometry = tuple(sorted(OPS[op].geometry(preset).items()))
            for layer, n, k in OPS[op].layers(preset):
                for m in ms:
                    key = (op, epilogues[op], n, k, m, geometry)
                    if key not in seen:
                        seen.add(key)
                        rows.append((op, epilogues[op], preset, layer, n, k, m))
    return rows


def sweep(ops: Sequence[str], presets: Sequence[str], out_dir: Path, ms: Sequence[int] = M_VALUES,
          dtype: torch.dtype = torch.bfloat16, epilogues: Optional[Dict[str, str]] = None,
          with_compile: bool = False, name: str = "sweep", progress: bool = True, cold: float = 0.0) -> Path:
    """Times every planned row not already in ``out_dir/<name>.csv``; returns the CSV path.  ``cold``:
    seconds of idle before each prefill row's cold sample (0: steady clocks only)."""
    epilogues = {op: (epilogues or {}).get(op) or OPS[op].default_epilogue for op in ops}
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, env_path = out_dir / f"{name}.csv", out_dir / f"{name}.json"
    todo = plan(ops, presets, ms, epilogues)
    dname = str(dtype).replace("torch.", "")
    done = _done(csv_path)
    todo = [r for r in todo if (r[0], r[1], dname, str(r[4]), str(r[5]), str(r[6]), geometry_name(r[0], r[2]))
            not in done]
    warm_gpu()
    ceilings = Ceilings.measure(dtype)
    env = environment.describe()
    env.update({"ceilings": {"copy_GBps": ceilings.copy_gbps, "mm_TFLOPs": ceilings.mm_tflops},
                "ops": list(ops), "presets": list(presets), "M": list(ms), "dtype": dname,
                "epilogues": epilogues, "baselines_compiled": with_compile, "cold_idle_s": cold})
    runs = json.loads(env_path.read_text()).get("runs", []) if env_path.is_file() else []
    env["runs"] = runs + [{"started": env["date"], "rows": len(todo)}]
    env_path.write_text(json.dumps(env, indent=1))
    new_file = not csv_path.is_file()
    columns = COLUMNS
    if not new_file:   # resuming: the file's own columns (one written before a column was added lacks it)
        with csv_path.open() as f:
            columns = tuple(next(csv.reader(f), COLUMNS))
        if cold and "cold_us" not in columns:
            sys.stderr.write(f"warning: {csv_path} predates the cold columns: its new rows keep no cold timings "
                             "(sweep into a new --name to get them)\n")
    started = time.monotonic()
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new_file:
            writer.writeheader()
        for i, (op, ep, preset, layer, n, k, m) in enumerate(todo):
            if progress:
                _progress(i, len(todo), started, f"{op} {preset}/{layer} M={m}")
            row = run_row(op, ep, dtype, preset, layer, n, k, m, ceilings, with_compile, cold)
            writer.writerow({c: _fmt(row.get(c)) for c in columns})
            f.flush()
            torch.cuda.empty_cache()
    if progress:
        _progress(len(todo), len(todo), started, "done")
        sys.stderr.write("\n")
    return csv_path


def read_rows(csv_path: Path) -> List[dict]:
    with Path(csv_path).open() as f:
        return list(csv.DictReader(f))


def summary(csv_path: Path, bar: float = 0.95, floor_bar: float = 1.2) -> str:
    """A short table: per row ours against its primary baseline (torch.mm; torch._scaled_mm for fp8,
    tinygemm for int4, SDPA for the attention ops), eager and cuBLASLt, and the verdicts of the issue's bars."""
    rows = read_rows(csv_path)
    lines = [f"{'op':<17}{'layer':<26}{'M':>6}{'N':>7}{'K':>7}{'ours us':>10}{'vs base':>8}{'base':>10}{'vs eager':>9}"
             f"{'vs lt':>7}{'TF/s':>6}{'%ceil':>6}{'floor x':>8}{'cold x':>7}{'err':>9}  kernel",
             "(vs base: steady clocks; cold x: the same ratio on a cold GPU, first second after idle, where timed)"]
    speedups = {}
    for r in rows:
        base = primary_baseline(r)
        f = {k: float(r[k]) if r.get(k) not in ("", None) else float("nan") for k in
             ("ours_us", f"speedup_vs_{base}", "speedup_vs_eager", "speedup_vs_cublaslt", "tflops",
              "pct_of_ceiling", "floor_ratio", "cold_speedup", "rel_err")}
        speed = f[f"speedup_vs_{base}"]
        speedups.setdefault((r["op"], base), []).append(speed)
        flags = []
        if speed < bar:
            flags.append(f"<{base} bar")
        if f["speedup_vs_eager"] <= 1.0:
            flags.append("<=eager")
        if f["floor_ratio"] > floor_bar:
            flags.append(">floor bar")
        if r["ok"] != "True":
            flags.append("ERROR")
        lines.append(f"{r['op']:<17}{(r['preset'] + '/' + r['layer'])[:25]:<26}{r['M']:>6}{r['N']:>7}{r['K']:>7}"
                     f"{f['ours_us']:>10.1f}{speed:>8.3f}{base:>10}{f['speedup_vs_eager']:>9.2f}"
                     f"{f['speedup_vs_cublaslt']:>7.2f}{f['tflops']:>6.0f}{f['pct_of_ceiling']:>6.0f}"
                     f"{f['floor_ratio']:>8.2f}{f['cold_speedup']:>7.3f}{f['rel_err']:>9.1e}  {r['kernel']} "
                     f"{' '.join(flags)}")
    for (op, base), s in speedups.items():
        s = [v for v in s if v == v and v > 0]
        if s:
            geo = math.exp(sum(math.log(v) for v in s) / len(s))
            lines.append(f"{op}: geometric mean speed-up vs {base} {geo:.3f} over {len(s)} rows, min {min(s):.3f}")
    return "\n".join(lines)
