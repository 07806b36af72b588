"""W8A16 bars: fused_gemm.fp8_weight_linear (e4m3 weights, per-channel fp32 scales, bf16 x) against
the fp8 weight's HBM floor and bf16 torch.mm on the dequantised weight (what the fp8 weight replaces).

    python perf/bench_fp8_weight.py [--json results.json] [--only decode|prefill] [--sweep]

Shapes: Llama-3-8B's N x K = 4096x4096 (O), 28672x4096 (gate+up), 4096x14336 (down); bf16 x.
  decode, M in {1, 16}, times inside one CUDA graph (rotated weight sets larger than the L2):
    floor   = (e4m3 weight bytes + scale bytes) / device copy bandwidth (copy_bandwidth(): read+write)
    bar 1:  ours / floor <= 1.5
    bar 2:  ours faster than bf16 torch.mm, which reads twice the weight bytes (speedup >= 1.2)
  prefill, M = 4096 (eager, back to back): TFLOP/s ours / bf16 torch.mm (paired ratios), bar >= 0.8.
Every row also checks ours against float64 of the dequantised weight (first 256 rows).
The kernels come from preset 'fp8-weight-bench' (the int4 table's rows, not yet tuned for e4m3);
--sweep also times the alternative configs of generator/int4/heuristics.py SWEEP_CONFIGS (preset
'fp8-weight-sweep'; informational: which config each row of the table should take for e4m3).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

import fused_gemm
from fused_gemm.bench.timing import compare, copy_bandwidth, paired_ratios, rotation_count, time_samples, warm_gpu
from fused_gemm.generator import Int4Spec, LaunchOptions
from fused_gemm.generator.int4.heuristics import SWEEP_CONFIGS

SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336)]     # (N, K), Llama-3-8B
DECODE_M = (1, 16)
PREFILL_M = (4096,)
FLOOR_BAR = 1.5
MM_SPEEDUP_BAR = 1.2
PREFILL_MM_BAR = 0.8


def make_sets(m, n, k, mm_everywhere: bool):
    """Rotated (x, Fp8Weight, bf16 dequantised weight or None) sets; weights quantised from N(0, 1/K).
    Decode gives every set a bf16 copy for torch.mm (so it streams its weights from HBM as ours
    does); prefill, compute-bound, the first two."""
    per_set = n * k + 4 * n + 2 * m * k + 2 * m * n + (2 * n * k if mm_everywhere else 0)
    sets = []
    for i in range(rotation_count(per_set)):
        w = fused_gemm.quantize_fp8_weight(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        sets.append((x, w, w.dequantize(torch.bfloat16) if mm_everywhere or i < 2 else None))
    return sets


def rel_err(x, w) -> float:
    rows = min(x.shape[0], 256)
    ref = x[:rows].double() @ w.dequantize(torch.float64).T
    got = fused_gemm.fp8_weight_linear(x[:rows].contiguous(), w).double()
    return float((got - ref).norm() / ref.norm())


def variants(sets, sweep: bool):
    with_mm = [s for s in sets if s[2] is not None]
    v = {"ours": [(lambda s=s: fused_gemm.fp8_weight_linear(s[0], s[1])) for s in sets],
         "mm": [(lambda s=s, w=with_mm[i % len(with_mm)][2]: torch.mm(s[0], w.t())) for i, s in enumerate(sets)]}
    for cfg in SWEEP_CONFIGS if sweep else ():   # the alternatives, their ops called directly
        op = fused_gemm.compile(Int4Spec("bf16", "e4m3", config=cfg))
        launch = LaunchOptions(pdl=cfg.scheduler == "persistent")
        v[cfg.name] = [(lambda s=s, op=op, launch=launch: op.run(s[0], s[1].weight, s[1].scale, None, s[1].K, None,
                                                                None, None, launch)) for s in sets]
    return v


def decode_row(m, n, k, bandwidth, sweep: bool):
    sets = make_sets(m, n, k, mm_everywhere=True)
    t = compare(variants(sets, sweep), graph=True, min_calls=64, reps=15)
    floor = (n * k + 4 * n) / bandwidth
    ratio, speedup = t["ours"] / floor, t["mm"] / t["ours"]
    row = {"kind": "decode", "M": m, "N": n, "K": k, "ours_us": t["ours"] * 1e6, "floor_us": floor * 1e6,
           "floor_ratio": ratio, "mm_us": t["mm"] * 1e6, "speedup": speedup, "rel_err": rel_err(sets[0][0], sets[0][1]),
           "ok": ratio <= FLOOR_BAR and speedup >= MM_SPEEDUP_BAR}
    if sweep:
        row["sweep_us"] = {cfg.name: t[cfg.name] * 1e6 for cfg in SWEEP_CONFIGS}
    return row


def prefill_row(m, n, k, sweep: bool):
    sets = make_sets(m, n, k, mm_everywhere=False)
    samples = time_samples(variants(sets, sweep), min_calls=10, reps=21)
    t = {name: statistics.median(ts) for name, ts in samples.items()}
    flop = 2 * m * n * k
    mm_ratio = paired_ratios(samples, "ours")["mm"]                        # mm's time / ours
    row = {"kind": "prefill", "M": m, "N": n, "K": k, "ours_tflops": flop / t["ours"] / 1e12,
           "mm_tflops": flop / t["mm"] / 1e12, "tflops_ratio": mm_ratio, "ours_us": t["ours"] * 1e6,
           "rel_err": rel_err(sets[0][0], sets[0][1]), "ok": mm_ratio >= PREFILL_MM_BAR}
    if sweep:
        row["sweep_us"] = {cfg.name: t[cfg.name] * 1e6 for cfg in SWEEP_CONFIGS}
    return row


def table(rows, bandwidth) -> str:
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, W8A16 bf16 x e4m3 (per-channel "
             f"fp32 scales), copy bandwidth {bandwidth / 1e9:.0f} GB/s; baseline bf16 torch.mm on the dequantised weight"]
    verdict = (lambda r: "PASS" if r["ok"] else "FAIL")
    dec = [r for r in rows if r["kind"] == "decode"]
    if dec:
        lines += ["", f"{'decode MxNxK (CUDA graph)':<26}{'floor':>9}{'ours':>10}{'/floor':>8}{'bar':>6}{'bf16 mm':>10}"
                      f"{'speedup':>9}{'bar':>6}{'rel err':>10}  verdict"]
        lines += [f"{r['M']}x{r['N']}x{r['K']:<16}{r['floor_us']:>7.1f}us{r['ours_us']:>8.1f}us{r['floor_ratio']:>8.2f}"
                  f"{FLOOR_BAR:>6.2f}{r['mm_us']:>8.1f}us{r['speedup']:>8.2f}x{MM_SPEEDUP_BAR:>6.1f}"
                  f"{r['rel_err']:>10.1e}  {verdict(r)}" for r in dec]
    pre = [r for r in rows if r["kind"] == "prefill"]
    if pre:
        lines += ["", f"{'prefill MxNxK (eager)':<26}{'bf16 mm':>12}{'ours':>12}{'ratio':>8}{'bar':>6}{'rel err':>10}"
                      "  verdict"]
        lines += [f"{r['M']}x{r['N']}x{r['K']:<16}{r['mm_tflops']:>7.0f} TF/s{r['ours_tflops']:>7.0f} TF/s"
                  f"{r['tflops_ratio']:>8.3f}{PREFILL_MM_BAR:>6.2f}{r['rel_err']:>10.1e}  {verdict(r)}" for r in pre]
    swept = [r for r in rows if "sweep_us" in r]
    if swept:
        names = list(swept[0]["sweep_us"])
        lines += ["", "sweep (us; decode in a CUDA graph, prefill eager; 'table' = the kernel fp8_weight_linear picks):",
                  f"{'MxNxK':<20}{'table':>8}" + "".join(f"{'#' + str(i):>9}" for i in range(len(names)))]
        lines += [f"{r['M']}x{r['N']}x{r['K']:<10}{r['ours_us']:>8.1f}" +
                  "".join(f"{r['sweep_us'][nm]:>9.1f}" for nm in names) for r in swept]
        lines += [f"  #{i}: {nm}" for i, nm in enumerate(names)]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here as JSON")
    ap.add_argument("--only", choices=("decode", "prefill"), help="run one section")
    ap.add_argument("--sweep", action="store_true", help="also time SWEEP_CONFIGS (preset 'fp8-weight-sweep')")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("bench_fp8_weight needs a CUDA GPU (sm_90a)")
    torch.manual_seed(0)
    fused_gemm.warmup("fp8-weight-bench", *(["fp8-weight-sweep"] if args.sweep else []))   # build and load first
    warm_gpu()
    bandwidth = copy_bandwidth()
    rows = []
    with torch.no_grad():
        if args.only in (None, "decode"):
            rows += [decode_row(m, n, k, bandwidth, args.sweep) for m in DECODE_M for n, k in SHAPES]
        if args.only in (None, "prefill"):
            rows += [prefill_row(m, n, k, args.sweep) for m in PREFILL_M for n, k in SHAPES]
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "bandwidth": bandwidth,
                                               "rows": rows}, indent=1))
    print(table(rows, bandwidth))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
