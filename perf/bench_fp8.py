"""W8A8 fp8 bars: fused_gemm.fp8_linear against torch._scaled_mm with the same scales, and the fused
per-token quantiser against its eager torch equivalent.

    python perf/bench_fp8.py [--json results.json] [--accum precise|fast|both] [--only prefill|decode|quant] [--randn] [--graph]

GEMM rows: Llama-3-8B's N x K (QKV 6144x4096, O 4096x4096, gate+up 28672x4096, down 4096x14336),
e4m3 operands with per-token activation scales and per-channel weight scales, bf16 out, no bias:
ours = fp8_linear(x, w, x_scale [M], w_scale [N]); theirs = torch._scaled_mm(x, w.t(),
scale_a=[M, 1], scale_b=[1, N], out_dtype=bf16), both with the same accumulation mode
(use_fast_accum False = fp32 promotion, True = the tensor cores' own).  Timed interleaved in one
run on rotated inputs larger than the L2, after a GPU warm-up.
  prefill, M in {1024, 4096, 16384}: TFLOP/s ours / theirs (median of per-repetition ratios), bar >= 1.0.
  decode, M in {1, 16}: time ours / theirs inside one CUDA graph and as back-to-back eager calls;
    bar at M = 1: <= 1.1 (both); M = 16 is informational.
Quant rows (K = 4096 and 14336): quantize_fp8(x) against amax / scale / clamp / cast in eager torch
(speedup, informational), checked to give the same scales and codes within one e4m3 step.  Every GEMM row also checks ours
against float64 of the dequantised operands and against _scaled_mm.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

import fused_gemm
from fused_gemm.bench.ops import spread_e4m3
from fused_gemm.bench.timing import compare, paired_ratios, require_gpu, rotation_count, time_samples, warm_gpu

FP8 = torch.float8_e4m3fn
SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]    # (N, K), Llama-3-8B
PREFILL_M = (1024, 4096, 16384)
DECODE_M = (1, 16)
QUANT = [(m, k) for k in (4096, 14336) for m in (1, 16, 4096, 16384)]
PREFILL_BAR, DECODE_BAR = 1.0, 1.1


def randn_e4m3(*shape):
    """randn's e4m3 codes: few, small values (--randn: how much the data moves the ratios)."""
    return torch.randn(*shape, device="cuda").to(FP8)


def make_sets(m, n, k, operands=spread_e4m3):
    """Rotated (x, w, x_scale [M], w_scale [N]) sets of ``operands``' e4m3 values (spread over the format's range)."""
    per_set = m * k + n * k + 4 * (m + n) + 2 * 2 * m * n     # operands, scales, two bf16 outputs
    sets = []
    for _ in range(rotation_count(per_set)):
        x, w = operands(m, k), operands(n, k)
        xs = (torch.rand(m, device="cuda") + 0.5) / (64 * k ** 0.5)
        ws = (torch.rand(n, device="cuda") + 0.5) / 64
        sets.append((x, w, xs, ws, xs[:, None].contiguous(), ws[None, :].contiguous()))
    return sets


def variants(sets, fast: bool):
    ours = [(lambda s=s: fused_gemm.fp8_linear(s[0], s[1], s[2], s[3], use_fast_accum=fast)) for s in sets]
    theirs = [(lambda s=s: torch._scaled_mm(s[0], s[1].t(), scale_a=s[4], scale_b=s[5], out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)) for s in sets]
    return {"scaled_mm": theirs, "ours": ours}


def errors(s, fast: bool) -> dict:
    """Relative errors on the first 256 rows: ours vs float64 of the dequantised operands, and vs _scaled_mm."""
    x, w, xs, ws, xs2, ws2 = s
    rows = min(x.shape[0], 256)
    ref = (x[:rows].double() * xs[:rows, None].double()) @ (w.double() * ws[:, None].double()).T
    ours = fused_gemm.fp8_linear(x, w, xs, ws, use_fast_accum=fast)[:rows].double()
    theirs = torch._scaled_mm(x, w.t(), scale_a=xs2, scale_b=ws2, out_dtype=torch.bfloat16,
                              use_fast_accum=fast)[:rows].double()
    return {"rel_err": float((ours - ref).norm() / ref.norm()),
            "scaled_mm_rel_err": float((theirs - ref).norm() / ref.norm()),
            "vs_scaled_mm": float((ours - theirs).norm() / theirs.norm())}


def prefill_row(m, n, k, fast, operands=spread_e4m3, graph=False):
    sets = make_sets(m, n, k, operands)
    samples = time_samples(variants(sets, fast), graph=graph, min_calls=10, reps=31)
    t_ours, t_theirs = statistics.median(samples["ours"]), statistics.median(samples["scaled_mm"])
    ratio = 1.0 / paired_ratios(samples, "scaled_mm")["ours"]      # TFLOP/s ours / theirs
    flop = 2 * m * n * k
    return {"kind": "prefill", "accum": "fast" if fast else "precise", "M": m, "N": n, "K": k,
            "ours_tflops": flop / t_ours / 1e12, "scaled_mm_tflops": flop / t_theirs / 1e12,
            "ours_us": t_ours * 1e6, "scaled_mm_us": t_theirs * 1e6, "tflops_ratio": ratio, "graph": graph,
            "ok": ratio >= PREFILL_BAR, **errors(sets[0], fast)}


def decode_row(m, n, k, fast, operands=spread_e4m3):
    sets = make_sets(m, n, k, operands)
    v = variants(sets, fast)
    g = compare(v, graph=True, min_calls=64, reps=15)
    e = compare(v, graph=False, min_calls=200, reps=9)
    graph_ratio, eager_ratio = g["ours"] / g["scaled_mm"], e["ours"] / e["scaled_mm"]
    return {"kind": "decode", "accum": "fast" if fast else "precise", "M": m, "N": n, "K": k,
            "graph_ours_us": g["ours"] * 1e6, "graph_scaled_mm_us": g["scaled_mm"] * 1e6,
            "eager_ours_us": e["ours"] * 1e6, "eager_scaled_mm_us": e["scaled_mm"] * 1e6,
            "graph_ratio": graph_ratio, "eager_ratio": eager_ratio, "weight_GBps": n * k / g["ours"] / 1e9,
            "ok": (graph_ratio <= DECODE_BAR and eager_ratio <= DECODE_BAR) if m == 1 else None,
            **errors(sets[0], fast)}


_TINY = torch.finfo(torch.float32).tiny


def eager_quantize(x):
    """What quantize_fp8 does, in eager torch: four or five kernels."""
    scale = (x.abs().amax(dim=-1).float() / 448).clamp_min(_TINY)
    q = (x.float() * scale.reciprocal()[:, None]).clamp(-448, 448).to(FP8)
    return q, scale


def quant_row(m, k):
    per_set = m * k * (2 + 1) + 8 * m
    xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(rotation_count(per_set))]
    fused_gemm.quantize_fp8(xs[0])                         # build and load before timing
    v = {"ours": [(lambda x=x: fused_gemm.quantize_fp8(x)) for x in xs],
         "eager": [(lambda x=x: eager_quantize(x)) for x in xs]}
    graph = m <= 16                                      # decode sizes: device time (eager is host-bound)
    t = compare(v, graph=graph, min_calls=64 if graph else 20, reps=9)
    q, s = fused_gemm.quantize_fp8(xs[0])
    q_ref, s_ref = eager_quantize(xs[0])
    # The eager reference divides by the scale, the kernel multiplies by its reciprocal: a value on a
    # rounding boundary may land one e4m3 step apart.  Scales must agree; codes within one step.
    same = float((q.view(torch.uint8) == q_ref.view(torch.uint8)).float().mean())
    deq, deq_ref = q.float() * s.view(-1, 1), q_ref.float() * s_ref.view(-1, 1)
    step = 2.0 ** -3 * deq_ref.abs() + s_ref.view(-1, 1) * 2.0 ** -9   # one e4m3 step (subnormals: 2^-9)
    ok = bool(torch.allclose(s, s_ref, rtol=1e-6, atol=0) and ((deq - deq_ref).abs() <= step * 1.001).all())
    return {"kind": "quant", "M": m, "K": k, "in_graph": graph, "ours_us": t["ours"] * 1e6,
            "eager_us": t["eager"] * 1e6, "speedup": t["eager"] / t["ours"],
            "GBps": m * k * 3 / t["ours"] / 1e9, "identical": same, "ok": ok}


def _verdict(r) -> str:
    return "-" if r["ok"] is None else ("PASS" if r["ok"] else "FAIL")


SECTIONS = [  # (kind, header, row formatter)
    ("prefill",
     f"{'prefill MxNxK':<20}{'accum':>8}{'_scaled_mm':>14}{'ours':>12}{'ratio':>8}{'rel err':>10}{'sm err':>9}"
     f"{'vs sm':>9}  bar: TFLOP/s ratio >= {PREFILL_BAR}",
     lambda r: f"{r['M']}x{r['N']}x{r['K']:<8}{r['accum']:>8}{r['scaled_mm_tflops']:>9.0f} TF/s"
               f"{r['ours_tflops']:>7.0f} TF/s{r['tflops_ratio']:>8.3f}{r['rel_err']:>10.1e}"
               f"{r['scaled_mm_rel_err']:>9.1e}{r['vs_scaled_mm']:>9.1e}  {_verdict(r)}"),
    ("decode",
     f"{'decode MxNxK':<20}{'accum':>8}{'graph sm':>10}{'ours':>9}{'ratio':>8}{'eager sm':>10}{'ours':>9}"
     f"{'ratio':>8}{'GB/s':>7}{'rel err':>10}  bar (M = 1): both ratios <= {DECODE_BAR}",
     lambda r: f"{r['M']}x{r['N']}x{r['K']:<8}{r['accum']:>8}{r['graph_scaled_mm_us']:>8.1f}us"
               f"{r['graph_ours_us']:>7.1f}us{r['graph_ratio']:>8.3f}{r['eager_scaled_mm_us']:>8.1f}us"
               f"{r['eager_ours_us']:>7.1f}us{r['eager_ratio']:>8.3f}{r['weight_GBps']:>7.0f}"
               f"{r['rel_err']:>10.1e}  {_verdict(r)}"),
    ("quant",
     f"{'quantize_fp8 MxK':<20}{'eager torch':>12}{'ours':>10}{'speedup':>9}{'GB/s':>7}  (M <= 16: in a CUDA graph)"
     "  check: same scales, codes within one e4m3 step (identical fraction shown)",
     lambda r: f"{r['M']}x{r['K']:<14}{r['eager_us']:>10.1f}us{r['ours_us']:>8.1f}us{r['speedup']:>8.2f}x"
               f"{r['GBps']:>7.0f}  {r['identical']:.4f} same  {_verdict(r)}"),
]


def table(rows) -> str:
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, e4m3 x e4m3 -> bf16, "
             "per-token x per-channel scales, fp8_linear vs torch._scaled_mm"]
    for kind, header, fmt in SECTIONS:
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            lines += ["", header] + [fmt(r) for r in mine]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here as JSON")
    ap.add_argument("--accum", choices=("precise", "fast", "both"), default="both",
                    help="accumulation mode of both sides (use_fast_accum False / True)")
    ap.add_argument("--only", choices=("prefill", "decode", "quant"), help="run one section")
    ap.add_argument("--randn", action="store_true", help="operands of randn's small e4m3 codes, not spread ones")
    ap.add_argument("--graph", action="store_true", help="prefill rows inside CUDA graphs too (neither side's host "
                    "launch path in the time; eager by default, as a prefill step runs)")
    args = ap.parse_args(argv)
    require_gpu("bench_fp8")
    operands = randn_e4m3 if args.randn else spread_e4m3
    modes = {"precise": (False,), "fast": (True,), "both": (False, True)}[args.accum]
    fused_gemm.warmup("fp8-bench")                       # build (if missing) and load every kernel first
    warm_gpu()
    rows = []
    for fast in modes:
        if args.only in (None, "prefill"):
            rows += [prefill_row(m, n, k, fast, operands, args.graph) for m in PREFILL_M for n, k in SHAPES]
        if args.only in (None, "decode"):
            rows += [decode_row(m, n, k, fast, operands) for m in DECODE_M for n, k in SHAPES]
    if args.only in (None, "quant"):
        rows += [quant_row(m, k) for m, k in QUANT]
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(table(rows))
    return 0 if all(r["ok"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
