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
The kernels come from preset 'fp8-weight-bench' (fp8_weight_linear's table: the dense decode kernel by the
weight's shape at M <= 16, FP8_DECODE_BY_SHAPE, timed on an H200; the mixed-input rows above);
--sweep also times the alternative configs of generator/int4/heuristics.py sweep_configs('e4m3') (preset
'fp8-weight-sweep'; informational: which config each row of the table should take).
"""
from __future__ import annotations

import statistics
import sys

import torch

import fused_gemm
from fused_gemm.bench.environment import write_rows
from fused_gemm.bench.timing import compare, copy_bandwidth, paired_ratios, rotation_count, time_samples, warm_gpu
from fused_gemm.bench.weight_only import rel_err, start_run, sweep_table, sweep_us, sweep_variants

SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336)]     # (N, K), Llama-3-8B
DECODE_M = (1, 16)
PREFILL_M = (4096,)
FLOOR_BAR = 1.5
MM_SPEEDUP_BAR = 1.2
PREFILL_MM_BAR = 0.8
TOLERANCE = 1e-2      # bf16 relative error against float64 on the dequantised weight


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


def variants(sets, sweep: bool):
    with_mm = [s for s in sets if s[2] is not None]
    v = {"ours": [(lambda s=s: fused_gemm.fp8_weight_linear(s[0], s[1])) for s in sets],
         "mm": [(lambda s=s, w=with_mm[i % len(with_mm)][2]: torch.mm(s[0], w.t())) for i, s in enumerate(sets)]}
    if sweep:   # per channel: the group is all of K
        v.update(sweep_variants(sets, "e4m3", lambda w: (w.weight, w.scale, w.K)))
    return v


def decode_row(m, n, k, bandwidth, sweep: bool):
    sets = make_sets(m, n, k, mm_everywhere=True)
    t = compare(variants(sets, sweep), graph=True, min_calls=64, reps=15)
    floor = (n * k + 4 * n) / bandwidth
    ratio, speedup = t["ours"] / floor, t["mm"] / t["ours"]
    err = rel_err(fused_gemm.fp8_weight_linear, sets[0][0], sets[0][1])
    row = {"kind": "decode", "M": m, "N": n, "K": k, "ours_us": t["ours"] * 1e6, "floor_us": floor * 1e6,
           "floor_ratio": ratio, "mm_us": t["mm"] * 1e6, "speedup": speedup, "rel_err": err,
           "ok": ratio <= FLOOR_BAR and speedup >= MM_SPEEDUP_BAR and err < TOLERANCE}
    if sweep:
        row["sweep_us"] = sweep_us(t, "e4m3")
    return row


def prefill_row(m, n, k, sweep: bool):
    sets = make_sets(m, n, k, mm_everywhere=False)
    samples = time_samples(variants(sets, sweep), min_calls=10, reps=21)
    t = {name: statistics.median(ts) for name, ts in samples.items()}
    flop = 2 * m * n * k
    mm_ratio = paired_ratios(samples, "ours")["mm"]                        # mm's time / ours
    err = rel_err(fused_gemm.fp8_weight_linear, sets[0][0], sets[0][1])
    row = {"kind": "prefill", "M": m, "N": n, "K": k, "ours_tflops": flop / t["ours"] / 1e12,
           "mm_tflops": flop / t["mm"] / 1e12, "tflops_ratio": mm_ratio, "ours_us": t["ours"] * 1e6,
           "rel_err": err, "ok": mm_ratio >= PREFILL_MM_BAR and err < TOLERANCE}
    if sweep:
        row["sweep_us"] = sweep_us(t, "e4m3")
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
    lines += sweep_table(rows, "fp8_weight_linear")
    return "\n".join(lines)


def main(argv=None):
    args = start_run("bench_fp8_weight", __doc__, "also time SWEEP_CONFIGS (preset 'fp8-weight-sweep')",
                     "fp8-weight-bench", "fp8-weight-sweep", argv)
    warm_gpu()
    bandwidth = copy_bandwidth()
    rows = []
    with torch.no_grad():
        if args.only in (None, "decode"):
            rows += [decode_row(m, n, k, bandwidth, args.sweep) for m in DECODE_M for n, k in SHAPES]
        if args.only in (None, "prefill"):
            rows += [prefill_row(m, n, k, args.sweep) for m in PREFILL_M for n, k in SHAPES]
    write_rows(args.json, rows, bandwidth=bandwidth)
    print(table(rows, bandwidth))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
