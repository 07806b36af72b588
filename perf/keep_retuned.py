"""Merges a re-tuned table's linear cells into the current table where sweeps confirm them:

    python perf/keep_retuned.py --current generator/gemm/tuned/h200.json --retuned h200_tuned.json \\
        --before before1.csv before2.csv --after after1.csv after2.csv [--margin 0.01] [--note TEXT] [--out PATH]

`fused-gemm tune --out FILE` writes the re-tuned table; `fused-gemm sweep` the CSVs, each run over the same cells with
the current table (--before) and with the re-tuned one (--after), interleaved run by run.  A cell takes its re-tuned
entry only where it changed and every after-run beat every before-run by more than the margin
(tune.confirmed_entries); the rest keep their entries.  The merged table (default: over --current) gets a history line
for the run, with the note.  Prints each changed cell's ratios and whether it was kept.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from fused_gemm.bench.tune import changed_entries, confirmed_entries, merge
from fused_gemm.generator.gemm.tuned import TunedTable

SWEEP_DTYPES = {"bfloat16": "bf16", "float16": "fp16"}
RUN_KEYS = ("measured", "gpu", "driver", "torch", "epilogue", "baseline", "minimal", "tolerance")


def sweep_ratios(path: str, dtype: str):
    """(N, K, M) -> speedup_vs_mm of a `fused-gemm sweep` CSV's linear rows in ``dtype`` that passed their float64
    check; a cell twice in one file (two epilogues) is refused, as its ratio would be ambiguous."""
    ratios = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["op"] != "linear" or SWEEP_DTYPES.get(r["dtype"]) != dtype or r["ok"] != "True" \
                    or not r["speedup_vs_mm"]:
                continue
            cell = (int(r["N"]), int(r["K"]), int(r["M"]))
            if cell in ratios:
                raise SystemExit(f"{path}: N={cell[0]} K={cell[1]} M={cell[2]} appears twice (one epilogue a file)")
            ratios[cell] = float(r["speedup_vs_mm"])
    return ratios


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--current", required=True)
    ap.add_argument("--retuned", required=True)
    ap.add_argument("--before", nargs="+", required=True)
    ap.add_argument("--after", nargs="+", required=True)
    ap.add_argument("--margin", type=float, default=0.01)
    ap.add_argument("--dtype", default="bf16", choices=tuple(SWEEP_DTYPES.values()))
    ap.add_argument("--note", default="", help="appended to the run's history line")
    ap.add_argument("--out", help="default: over --current")
    args = ap.parse_args(argv)
    current = TunedTable.from_json(Path(args.current).read_text())
    retuned = TunedTable.from_json(Path(args.retuned).read_text())
    if current.gpu != retuned.gpu:
        raise SystemExit(f"--current is {current.gpu}'s table, --retuned {retuned.gpu}'s")
    before = [sweep_ratios(p, args.dtype) for p in args.before]
    after = [sweep_ratios(p, args.dtype) for p in args.after]
    kept = confirmed_entries(current, retuned, before, after, args.margin, dtype=args.dtype)
    for was, e in changed_entries(current, retuned, dtype=args.dtype):
        cell = (e.n, e.k, e.m)
        ratios = " ".join(f"{run.get(cell, float('nan')):.3f}" for run in before) + " -> " + \
            " ".join(f"{run.get(cell, float('nan')):.3f}" for run in after)
        print(f"{e.n:>6}x{e.k:<6} M={e.m:<6} {ratios}  {'kept' if e in kept else '    '}  "
              f"{was.config.name + ' ' + was.launch.label if was else '(none)'} -> {e.config.name} {e.launch.label}")
    if not kept:
        print(f"no cell kept; {args.out or args.current} left as it was")
        return 0
    run = {k: retuned.meta[k] for k in RUN_KEYS if k in retuned.meta}     # the tuner's run (its file holds the rest)
    run["op"] = "linear"
    merged = merge(current, TunedTable(current.gpu, run, kept))
    if args.note:
        merged.meta["history"][-1] += f" ({args.note})"
    out = Path(args.out or args.current)
    out.write_text(merged.to_json())
    print(f"{len(kept)} cells kept -> {out} ({merged.meta['kernels']} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
