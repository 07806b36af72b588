"""The `fused-gemm sweep`, `tune` and `plot` commands (they time on the GPU, so they live with the runtime).

Importing this module imports no torch: the generator's commands (codegen, build, info) share the
parser and must run on a machine without it."""
from __future__ import annotations

from pathlib import Path
from typing import List

from ..generator.gemm.tuned import FP8_OPS, OPS
from .models import M_VALUES, PRESETS, SWEEP_OPS

_DEFAULT_TUNE_PRESETS = ("llama3-8b", "square-8192")
_DEFAULT_TUNE_PRESETS_OF = {"gated": ("llama3-8b",), "qkv_rope": ("llama3-8b",)}   # model presets: MLP / QKV


def _ints(text: str) -> List[int]:
    return [int(v) for v in text.split(",") if v]


def _dtype(name: str):
    import torch
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def _results_dir(arg) -> Path:
    from .environment import gpu_slug
    return Path(arg) if arg else Path("perf") / "results" / gpu_slug()


def cmd_sweep(args) -> int:
    from .sweep import summary, sweep
    epilogues = dict(item.split("=", 1) for item in args.epilogue or [])
    csv_path = sweep(args.op or ["linear"], args.preset or ["llama3-8b"], _results_dir(args.out),
                     ms=_ints(args.m) if args.m else M_VALUES, dtype=_dtype(args.dtype), epilogues=epilogues,
                     with_compile=args.compile, name=args.name, progress=not args.quiet, cold=args.cold)
    print(summary(csv_path))
    if not args.no_plots:
        _plots(csv_path)
    print(f"rows: {csv_path}")
    return 0


def _plots(csv_path: Path) -> None:
    from .plots import plot
    try:
        for p in plot(csv_path):
            print(f"plot: {p}")
    except RuntimeError as exc:   # no matplotlib on this machine: the CSV is the result; plot it elsewhere
        print(f"no plots: {exc}; later: fused-gemm plot {csv_path}")


def cmd_plot(args) -> int:
    _plots(Path(args.csv))
    return 0


def tune_shapes(op: str, presets) -> List[tuple]:
    """(N, K) per weight the op tunes: every linear weight of the presets, (gated) each model's packed
    gate/up weight [2I, K] (custom:NxK presets name it directly), or (qkv_rope) each model's QKV weight."""
    from .models import MODELS, layers, model, unique_shapes
    if op == "qkv_rope":
        return list(dict.fromkeys(model(p, "qkv_rope").layers()[0][1:] for p in presets))
    if op != "gated":
        return [(n, k) for _, n, k in unique_shapes(presets)]
    shapes = []
    for p in presets:
        if p in MODELS:
            i, h = MODELS[p].mlp()
            shapes.append((2 * i, h))
        else:
            shapes += [(n, k) for _, n, k in layers(p)]
    return list(dict.fromkeys(shapes))


def cmd_tune(args) -> int:
    from .tune import TORCH_DTYPES, WORKLOADS, tune, write, write_measurements
    work = WORKLOADS[args.op]
    fp8 = args.op in FP8_OPS
    if fp8 and args.dtype != "bf16":
        raise SystemExit(f"--op {args.op} tunes e4m3 operands; --dtype is for linear and gated")
    dtype = TORCH_DTYPES["e4m3" if fp8 else args.dtype]
    default_ms = [m for m in M_VALUES if work.candidates(m, dtype)]
    shapes = tune_shapes(args.op, args.preset or _DEFAULT_TUNE_PRESETS_OF.get(args.op, _DEFAULT_TUNE_PRESETS))
    stem = args.dtype if args.op == "linear" else f"{args.op}_{work.table_dtype(dtype)}"
    raw = _results_dir(args.results) / f"tune_{stem}.measurements.json"
    table, cells = tune(shapes, _ints(args.m) if args.m else default_ms, dtype, minimal=args.minimal,
                        tolerance=args.tolerance, build=not args.no_build, jobs=args.jobs, progress=not args.quiet,
                        on_measured=lambda cells: write_measurements(cells, raw), op=args.op)
    path = write(table, args.out)
    for c in cells:
        if c.final is None:
            print(f"N={c.n:<6} K={c.k:<6} M={c.m:<6} no entry (no candidate passed): the heuristic serves it")
            continue
        (name, launch), speedup = c.final
        print(f"N={c.n:<6} K={c.k:<6} M={c.m:<6} {speedup:6.3f}x {work.baseline_name}  {name} {launch}")
    print(f"{args.op}: {len(cells)} cells, {table.meta['kernels']} kernels -> {path}")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("sweep", help="time ops x shape presets x M against torch baselines (GPU); CSV, JSON, plots")
    p.add_argument("--op", action="append", choices=SWEEP_OPS, help="repeatable; default linear")
    p.add_argument("--preset", action="append", help=f"repeatable; {', '.join(PRESETS)} or custom:NxK,...")
    p.add_argument("--m", help=f"comma-separated M values (default {','.join(map(str, M_VALUES))})")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    p.add_argument("--epilogue", action="append", metavar="OP=EPILOGUE", help="e.g. linear=bias+silu+residual")
    p.add_argument("--compile", action="store_true", help="also time torch.compile(max-autotune-no-cudagraphs) "
                   "of the eager code (minutes of autotuning per shape)")
    p.add_argument("--out", help="results folder (default perf/results/<gpu>)")
    p.add_argument("--name", default="sweep", help="file stem of the CSV/JSON/PNGs; rows in it are not re-timed")
    p.add_argument("--cold", type=float, default=0.0, metavar="SECONDS",
                   help="also time prefill rows (M > 64) on a cold GPU: after SECONDS idle, within the first second "
                        "of load (columns cold_us, cold_speedup); every row is timed at steady clocks either way")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("plot", help="PNG plots of a sweep CSV (matplotlib)")
    p.add_argument("csv")
    p.set_defaults(func=cmd_plot)
    p = sub.add_parser("tune", help="time candidate kernels per shape and M; write the GPU's tuned table (GPU)")
    p.add_argument("--op", default="linear", choices=OPS,
                   help="linear (bias+gelu_tanh vs torch.mm), gated (SwiGLU on the packed [2I, K] weight vs "
                        "torch.mm on it), fp8 (row x column scales, fp32 promotion, vs torch._scaled_mm), "
                        "fp8_fast (the same with fast accumulation, vs _scaled_mm's) or "
                        "qkv_rope (a model preset's QKV projection with NeoX RoPE vs torch.mm on its weight)")
    p.add_argument("--preset", action="append", help=f"repeatable; default {', '.join(_DEFAULT_TUNE_PRESETS)} "
                                                         "(gated, qkv_rope: llama3-8b)")
    p.add_argument("--m", help=f"comma-separated M buckets, a subset of {','.join(map(str, M_VALUES))} (default: "
                               "every one the op has candidates for; fp8, fp8_fast from 1024)")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"), help="16-bit ops' dtype")
    p.add_argument("--minimal", action="store_true", help="fewest kernels within --tolerance of the best per shape")
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--out", help="table file (default: the package's table for this GPU; entries are merged)")
    p.add_argument("--results", help="folder for the raw measurements (default perf/results/<gpu>)")
    p.add_argument("--no-build", action="store_true", help="do not build missing candidates first")
    p.add_argument("-j", "--jobs", type=int)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_tune)
