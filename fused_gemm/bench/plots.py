"""PNG plots of a sweep's CSV (matplotlib, `pip install fused-gemm[plot]`): speed-up over torch.mm
against M per op and preset (steady clocks; dotted, where the sweep timed them, on a cold GPU), and a
roofline of every row against the ceilings measured on the GPU."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List

from .models import SWEEP_OPS
from .sweep import primary_baseline, read_rows


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("plots need matplotlib: pip install 'fused-gemm[plot]' (or matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _num(v: str) -> float:
    return float(v) if v not in ("", None) else float("nan")


def speedup_plot(rows: List[dict], title: str, path: Path) -> Path:
    plt = _pyplot()
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        groups.setdefault((r["op"], r["preset"]), []).append(r)
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.2), squeeze=False)
    for ax, ((op, preset), rs) in zip(axes[0], sorted(groups.items())):
        by_layer: Dict[str, List[dict]] = {}
        for r in rs:
            by_layer.setdefault(f"{r['layer']} {r['N']}x{r['K']}", []).append(r)
        for label, lr in sorted(by_layer.items()):
            lr.sort(key=lambda r: int(r["M"]))
            line, = ax.plot([int(r["M"]) for r in lr], [_num(r[f"speedup_vs_{primary_baseline(r)}"]) for r in lr],
                            marker="o", ms=3, label=label)
            cold = [r for r in lr if not math.isnan(_num(r.get("cold_speedup")))]
            if cold:   # the same ratio on a cold GPU (first second after idle): hollow markers, dotted
                ax.plot([int(r["M"]) for r in cold], [_num(r["cold_speedup"]) for r in cold], ls=":", marker="o", ms=3,
                        mfc="none", color=line.get_color(), label=f"{label}, cold")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.95, color="r", lw=0.8, ls="--", label="0.95 bar")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel(f"speed-up over {primary_baseline(rs[0])} ({rs[0]['epilogue']})")
        ax.set_title(f"{op}, {preset}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def roofline_plot(rows: List[dict], ceilings: dict, title: str, path: Path) -> Path:
    plt = _pyplot()
    bw, peak = ceilings["copy_GBps"], ceilings["mm_TFLOPs"]
    fig, ax = plt.subplots(figsize=(7, 5))
    ai = [2.0 ** e for e in range(-1, 13)]
    ax.plot(ai, [min(peak, a * bw / 1e3) for a in ai], color="k", lw=1,
            label=f"roofline: {bw:.0f} GB/s copy, {peak:.0f} TFLOP/s torch.mm 8192^3")
    markers = dict(zip(SWEEP_OPS, "osv^DP*X"))
    for op, marker in markers.items():
        rs = [r for r in rows if r["op"] == op]
        if not rs:
            continue
        x = [_num(r["tflops"]) * 1e3 / _num(r["gbps"]) for r in rs]   # FLOP per byte
        ax.scatter(x, [_num(r["tflops"]) for r in rs], marker=marker, s=14, label=f"{op} (ours)")
        base = [_num(r[f"speedup_vs_{primary_baseline(r)}"]) for r in rs]
        ax.scatter(x, [_num(r["tflops"]) / b if b > 0 else math.nan for r, b in zip(rs, base)], marker=marker, s=14,
                   facecolors="none", edgecolors="gray", label=f"{op}: {primary_baseline(rs[0])}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / minimum HBM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(csv_path: Path) -> List[Path]:
    """Writes <name>_speedup.png and <name>_roofline.png beside the CSV."""
    csv_path = Path(csv_path)
    rows = read_rows(csv_path)
    env = json.loads(csv_path.with_suffix(".json").read_text())
    title = f"{env['gpu']}, torch {env['torch']}, {env.get('dtype', '')}"
    stem = csv_path.with_suffix("")
    return [speedup_plot(rows, title, Path(f"{stem}_speedup.png")),
            roofline_plot(rows, env["ceilings"], title, Path(f"{stem}_roofline.png"))]
