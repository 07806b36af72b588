"""What the weight-only bars share: perf/bench_int4.py (int4_linear, W4A16) and perf/bench_fp8_weight.py
(fp8_weight_linear, W8A16).  Both ops run the int4 family's kernels, so both check their output
against the dequantised weight alike and time the same alternative tile configs, sweep_configs of
generator/int4/heuristics.py, next to the kernel the table picks.

A rotated set is a tuple whose first two items are x and the weight (an Int4Weight or an Fp8Weight).
"""
from __future__ import annotations

import argparse
from typing import Callable, Dict, List, Optional, Sequence

import torch

from .. import jit
from ..generator import Int4Spec, LaunchOptions
from ..generator.int4.heuristics import sweep_configs
from ..generator.int4.spec import DecodeConfig
from .timing import require_gpu

CHECKED_ROWS = 256     # rel_err checks at most this many rows of x


def start_run(script: str, doc: str, sweep_help: str, preset: str, sweep_preset: str,
              argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """A bar script's start: its command line (``doc``, its docstring, is the --help), an exit without a
    GPU, seed 0, then the kernels of ``preset`` (and with --sweep ``sweep_preset``) built if missing and
    loaded, so that no build or load lands inside a timing."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here as JSON")
    ap.add_argument("--only", choices=("decode", "prefill"), help="run one section")
    ap.add_argument("--sweep", action="store_true", help=sweep_help)
    args = ap.parse_args(argv)
    require_gpu(script)
    jit.warmup(preset, *([sweep_preset] if args.sweep else []))
    return args


def rel_err(linear: Callable, x: torch.Tensor, w) -> float:
    """Relative error of ``linear(x, w)`` against float64 of w's dequantised weight (first CHECKED_ROWS rows)."""
    rows = min(x.shape[0], CHECKED_ROWS)
    ref = x[:rows].double() @ w.dequantize(torch.float64).T
    got = linear(x[:rows].contiguous(), w).double()
    return float((got - ref).norm() / ref.norm())


def sweep_variants(sets, weight: str, operands: Callable) -> Dict[str, List[Callable[[], object]]]:
    """Calls of each sweep_configs(weight) kernel for weight kind ``weight`` ('s4', 'e4m3') on the same
    sets, keyed by config name (decode shapes only where x's M fits them).  Their ops run directly,
    not through the table, which would pick its own config; ``operands(w)`` gives the op's (weight
    tensor, scales, group size) for a set's weight."""
    v = {}
    m = sets[0][0].shape[0]
    for cfg in sweep_configs(weight):
        if isinstance(cfg, DecodeConfig) and m > cfg.tokens:
            continue
        op = jit.compile(Int4Spec("bf16", weight, config=cfg))
        launch = None if isinstance(cfg, DecodeConfig) else LaunchOptions(pdl=cfg.scheduler == "persistent")
        calls = []
        for s in sets:
            w, scales, group_size = operands(s[1])
            calls.append(lambda x=s[0], w=w, scales=scales, group_size=group_size, op=op, launch=launch:
                         op.run(x, w, scales, None, group_size, None, None, None, launch))  # no zeros, epilogue, out
        v[cfg.name] = calls
    return v


def sweep_us(t: Dict[str, float], weight: str) -> Dict[str, float]:
    """A row's sweep times in microseconds, from the seconds per call that ``t`` maps names to (the
    configs that ran: decode shapes skip rows past their tokens)."""
    return {cfg.name: t[cfg.name] * 1e6 for cfg in sweep_configs(weight) if cfg.name in t}


def sweep_table(rows, op_name: str) -> List[str]:
    """The table's lines for the rows that carry ``sweep_us`` (none if no row does): each row's time with
    the kernel ``op_name`` picks, then each swept kernel's, numbered, with a key below."""
    swept = [r for r in rows if "sweep_us" in r]
    if not swept:
        return []
    names = list(dict.fromkeys(name for r in swept for name in r["sweep_us"]))
    lines = ["", f"sweep (us; decode in a CUDA graph, prefill eager; 'table' = the kernel {op_name} picks):",
             f"{'MxNxK':<20}{'table':>8}" + "".join(f"{'#' + str(i):>9}" for i in range(len(names)))]
    lines += [f"{r['M']}x{r['N']}x{r['K']:<10}{r['ours_us']:>8.1f}" +
              "".join(f"{r['sweep_us'][nm]:>9.1f}" if nm in r["sweep_us"] else f"{'-':>9}" for nm in names)
              for r in swept]
    lines += [f"  #{i}: {nm}" for i, nm in enumerate(names)]
    return lines
