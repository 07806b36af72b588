"""W4A16 bars: fused_gemm.int4_linear (int4 weights, group-wise bf16 scales, g = 128, symmetric)
against torch._weight_int4pack_mm (tinygemm, same shapes and group size), the int4 HBM floor and
bf16 torch.mm.

    python perf/bench_int4.py [--json results.json] [--only decode|prefill] [--sweep]

Shapes: Llama-3-8B's N x K = 4096x4096 (O), 28672x4096 (gate+up), 4096x14336 (down); bf16 x.
  decode, M in {1, 16}, times inside one CUDA graph (rotated weight sets larger than the L2):
    floor   = (int4 weight bytes + scale bytes) / device copy bandwidth (copy_bandwidth(): read+write)
    bar 1:  ours / floor <= 1.25 at 28672x4096 and 4096x14336, <= 1.5 at 4096x4096
    bar 2:  ours faster than _weight_int4pack_mm (speedup >= 1.0 at M = 1, >= 1.5 at M = 16)
  prefill, M = 4096 (eager, back to back): TFLOP/s ours / bf16 torch.mm on the dequantised weight
    (paired ratios), bar >= 0.8; and faster than _weight_int4pack_mm (bar >= 1.0).
Every row also checks ours against float64 of the dequantised weight (first 256 rows).
--sweep: every row also timed with the alternative tile configs of
generator/int4/heuristics.py sweep_configs("s4"): SWEEP_CONFIGS and the decode shapes (preset 'int4-sweep'; informational: which config the
M <= 16 row of the table should take).  The table's kernels come from preset 'int4-bench'.
"""
from __future__ import annotations

import statistics
import sys

import torch

import fused_gemm
from fused_gemm.bench.baselines import INNER_K_TILES, tinygemm_available, tinygemm_weight
from fused_gemm.bench.environment import write_rows
from fused_gemm.bench.timing import compare, copy_bandwidth, paired_ratios, rotation_count, time_samples, warm_gpu
from fused_gemm.bench.weight_only import rel_err, start_run, sweep_table, sweep_us, sweep_variants

SHAPES = [(4096, 4096), (28672, 4096), (4096, 14336)]     # (N, K), Llama-3-8B
DECODE_M = (1, 16)
PREFILL_M = (4096,)
GROUP = 128
FLOOR_BAR = {(4096, 4096): 1.5}                           # other shapes: 1.25
FLOOR_BAR_DEFAULT = 1.25
SPEEDUP_BAR = {1: 1.0, 16: 1.5}
PREFILL_MM_BAR, PREFILL_TINYGEMM_BAR = 0.8, 1.0


def make_sets(m, n, k, baseline: bool):
    """Rotated (x, Int4Weight, tinygemm packing) sets; the weights are quantised from N(0, 1/K)."""
    per_set = n * k // 2 + n * (k // GROUP) * 2 + 2 * m * k + 2 * 2 * m * n
    w0 = fused_gemm.quantize_int4(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5, GROUP)
    sets = []
    for i in range(rotation_count(per_set)):
        w = w0 if i == 0 else fused_gemm.Int4Weight(w0.packed.clone(), w0.scales.clone(), None, GROUP, n, k)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        sets.append((x, w, tinygemm_weight(w) if baseline else None))
    return sets


def variants(sets, baseline: bool, sweep: bool):
    v = {"ours": [(lambda s=s: fused_gemm.int4_linear(s[0], s[1])) for s in sets]}
    if baseline:
        v["tinygemm"] = [(lambda s=s: torch._weight_int4pack_mm(s[0], s[2][0], GROUP, s[2][1])) for s in sets]
    if sweep:
        v.update(sweep_variants(sets, "s4", lambda w: (w.packed, w.scales, GROUP)))
    return v


def decode_row(m, n, k, bandwidth, baseline: bool, sweep: bool):
    sets = make_sets(m, n, k, baseline)
    v = variants(sets, baseline, sweep)
    t = compare(v, graph=True, min_calls=64, reps=15)
    floor = (n * k // 2 + n * (k // GROUP) * 2) / bandwidth
    ratio = t["ours"] / floor
    bar = FLOOR_BAR.get((n, k), FLOOR_BAR_DEFAULT)
    speedup = t["tinygemm"] / t["ours"] if baseline else None
    ok = ratio <= bar and (speedup is None or speedup >= SPEEDUP_BAR[m])
    err = rel_err(fused_gemm.int4_linear, sets[0][0], sets[0][1])
    row = {"kind": "decode", "M": m, "N": n, "K": k, "ours_us": t["ours"] * 1e6, "floor_us": floor * 1e6,
           "floor_ratio": ratio, "floor_bar": bar, "tinygemm_us": t.get("tinygemm", float("nan")) * 1e6,
           "speedup": speedup, "speedup_bar": SPEEDUP_BAR[m], "rel_err": err, "ok": ok}
    if sweep:
        row["sweep_us"] = sweep_us(t, "s4")
    return row


def prefill_row(m, n, k, baseline: bool, sweep: bool):
    sets = make_sets(m, n, k, baseline)
    v = variants(sets, baseline, sweep)
    wd = [s[1].dequantize(torch.bfloat16) for s in sets[:2]]              # bf16 weights for torch.mm
    v["mm"] = [(lambda s=s, w=wd[i % 2]: torch.mm(s[0], w.t())) for i, s in enumerate(sets)]
    samples = time_samples(v, min_calls=10, reps=21)
    flop = 2 * m * n * k
    t = {name: statistics.median(ts) for name, ts in samples.items()}
    ratios = paired_ratios(samples, "ours")                                # their time / ours
    mm_ratio = ratios["mm"]
    speedup = ratios["tinygemm"] if baseline else None
    ok = mm_ratio >= PREFILL_MM_BAR and (speedup is None or speedup >= PREFILL_TINYGEMM_BAR)
    err = rel_err(fused_gemm.int4_linear, sets[0][0], sets[0][1])
    return {"kind": "prefill", "M": m, "N": n, "K": k, "ours_tflops": flop / t["ours"] / 1e12,
            "mm_tflops": flop / t["mm"] / 1e12, "tflops_ratio": mm_ratio, "ours_us": t["ours"] * 1e6,
            "tinygemm_us": t.get("tinygemm", float("nan")) * 1e6, "speedup": speedup,
            "rel_err": err, "ok": ok, **({"sweep_us": sweep_us(t, "s4")} if sweep else {})}


def _verdict(r) -> str:
    return "PASS" if r["ok"] else "FAIL"


def _x(v) -> str:
    return "     n/a" if v is None else f"{v:>7.2f}x"


def table(rows, bandwidth, baseline_note) -> str:
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, W4A16 bf16 x int4 (s4, g = {GROUP}), "
             f"copy bandwidth {bandwidth / 1e9:.0f} GB/s; baseline torch._weight_int4pack_mm "
             f"(inner_k_tiles {INNER_K_TILES}){baseline_note}"]
    dec = [r for r in rows if r["kind"] == "decode"]
    if dec:
        lines += ["", f"{'decode MxNxK (CUDA graph)':<26}{'floor':>9}{'ours':>10}{'/floor':>8}{'bar':>6}{'tinygemm':>10}"
                      f"{'speedup':>9}{'bar':>6}{'rel err':>10}  verdict"]
        for r in dec:
            lines.append(f"{r['M']}x{r['N']}x{r['K']:<16}{r['floor_us']:>7.1f}us{r['ours_us']:>8.1f}us"
                         f"{r['floor_ratio']:>8.2f}{r['floor_bar']:>6.2f}{r['tinygemm_us']:>8.1f}us{_x(r['speedup'])}"
                         f"{r['speedup_bar']:>6.1f}{r['rel_err']:>10.1e}  {_verdict(r)}")
    pre = [r for r in rows if r["kind"] == "prefill"]
    if pre:
        lines += ["", f"{'prefill MxNxK (eager)':<26}{'bf16 mm':>12}{'ours':>12}{'ratio':>8}{'bar':>6}{'tinygemm':>11}"
                      f"{'speedup':>9}{'bar':>6}{'rel err':>10}  verdict"]
        for r in pre:
            lines.append(f"{r['M']}x{r['N']}x{r['K']:<16}{r['mm_tflops']:>7.0f} TF/s{r['ours_tflops']:>7.0f} TF/s"
                         f"{r['tflops_ratio']:>8.3f}{PREFILL_MM_BAR:>6.2f}{r['tinygemm_us']:>9.0f}us{_x(r['speedup'])}"
                         f"{PREFILL_TINYGEMM_BAR:>6.1f}{r['rel_err']:>10.1e}  {_verdict(r)}")
    lines += sweep_table(rows, "int4_linear")
    return "\n".join(lines)


def main(argv=None):
    args = start_run("bench_int4", __doc__, "also time sweep_configs('s4') at the decode rows", "int4-bench", "int4-sweep",
                     argv)
    missing = tinygemm_available(GROUP)
    baseline = not missing
    note = "" if baseline else f" UNAVAILABLE here ({missing}): speedup bars not judged"
    if missing:
        print(f"warning: torch._weight_int4pack_mm baseline unavailable: {missing}", file=sys.stderr)
    warm_gpu()
    bandwidth = copy_bandwidth()
    rows = []
    with torch.no_grad():
        if args.only in (None, "decode"):
            rows += [decode_row(m, n, k, bandwidth, baseline, args.sweep) for m in DECODE_M for n, k in SHAPES]
        if args.only in (None, "prefill"):
            rows += [prefill_row(m, n, k, baseline, args.sweep) for m in PREFILL_M for n, k in SHAPES]
    write_rows(args.json, rows, bandwidth=bandwidth, baseline=baseline or missing)
    print(table(rows, bandwidth, note))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
