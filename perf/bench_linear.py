"""The issue's bars: fused linear(bias, gelu_tanh) against cuBLAS torch.mm and eager PyTorch.

    python perf/bench_linear.py [--json results.json] [--quick]

Prefill rows (M=N=K=4096 and Llama-3-8B MLP 4096x14336x4096): TFLOP/s of our fused kernel over
plain torch.mm (bar >= 0.95) and eager F.gelu(F.linear(x, w, b)) time over ours (bar >= 1.10).
Decode rows (M in {1, 16}): our fused kernel's time over torch.mm's, inside one CUDA graph
(bar <= 1.15) and as back-to-back eager calls (bar <= 1.2).  Every row times its baselines in the
same run on rotated inputs larger than the L2; each row also checks our output against float64.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import fused_gemm  # noqa: E402
from fused_gemm.gemm.linear import select  # noqa: E402
from fused_gemm.bench.timing import compare, paired_ratios, require_gpu, rotation_count, time_samples, warm_gpu

PREFILL = [(4096, 4096, 4096), (4096, 14336, 4096)]
DECODE = [(m, n, 4096) for m in (1, 16) for n in (4096, 14336)]


def make_sets(m, n, k, dtype, device="cuda"):
    per_set = (m * k + n * k + n) * 2 + m * n * 2
    sets = []
    for _ in range(rotation_count(per_set)):
        x = torch.randn(m, k, dtype=dtype, device=device)
        w = torch.randn(n, k, dtype=dtype, device=device) / k ** 0.5
        b = torch.randn(n, dtype=dtype, device=device)
        sets.append((x, w, b))
    return sets


def rel_error(m, n, k, dtype) -> float:
    x = torch.randn(m, k, dtype=dtype, device="cuda")
    w = torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5
    b = torch.randn(n, dtype=dtype, device="cuda")
    ref = F.gelu(F.linear(x.double(), w.double(), b.double()), approximate="tanh")
    got = fused_gemm.linear(x, w, b, "gelu_tanh").double()
    return float((got - ref).norm() / ref.norm())


def ours(s):
    return lambda: fused_gemm.linear(s[0], s[1], s[2], "gelu_tanh")


def cublas(s):
    return lambda: torch.mm(s[0], s[1].t())


def eager(s):
    return lambda: F.gelu(F.linear(s[0], s[1], s[2]), approximate="tanh")


def prefill_row(m, n, k, dtype):
    sets = make_sets(m, n, k, dtype)
    samples = time_samples({name: [f(s) for s in sets] for name, f in (("mm", cublas), ("eager", eager), ("ours", ours))},
                           min_calls=10, reps=31)
    t_mm, t_eager, t_ours = (statistics.median(samples[name]) for name in ("mm", "eager", "ours"))
    over_ours = paired_ratios(samples, "ours")    # per repetition: drift between repetitions cancels
    flop = 2 * m * n * k
    return {
        "kind": "prefill", "M": m, "N": n, "K": k,
        "mm_tflops": flop / t_mm / 1e12, "ours_tflops": flop / t_ours / 1e12,
        "eager_us": t_eager * 1e6, "ours_us": t_ours * 1e6, "mm_us": t_mm * 1e6,
        "tflops_ratio": over_ours["mm"], "speedup_vs_eager": over_ours["eager"],
        "ok": over_ours["mm"] >= 0.95 and over_ours["eager"] >= 1.10,
        "rel_err": rel_error(m, n, k, dtype),
    }


def decode_row(m, n, k, dtype):
    sets = make_sets(m, n, k, dtype)
    variants = {name: [f(s) for s in sets] for name, f in (("mm", cublas), ("ours", ours), ("eager", eager))}
    g = compare(variants, graph=True, min_calls=64, reps=15)
    e = compare({k: v for k, v in variants.items() if k != "eager"}, graph=False, min_calls=200, reps=9)
    g_mm, g_ours, g_eager, e_mm, e_ours = g["mm"], g["ours"], g["eager"], e["mm"], e["ours"]
    return {
        "kind": "decode", "M": m, "N": n, "K": k,
        "graph_mm_us": g_mm * 1e6, "graph_ours_us": g_ours * 1e6, "graph_eager_us": g_eager * 1e6,
        "eager_mm_us": e_mm * 1e6, "eager_ours_us": e_ours * 1e6,
        "graph_ratio": g_ours / g_mm, "eager_ratio": e_ours / e_mm,
        "weight_GBps": n * k * 2 / g_ours / 1e9,
        "ok": g_ours / g_mm <= 1.15 and e_ours / e_mm <= 1.2,
        "rel_err": rel_error(m, n, k, dtype),
    }


def host_overhead_row():
    """Host microseconds per call on a tiny problem (GPU time well under the launch cost)."""
    import time
    x = torch.randn(1, 256, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(256, 256, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(256, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(1, 256, dtype=torch.bfloat16, device="cuda")
    op, launch = select(x, b, "gelu_tanh", None, None, None, out.dtype, 1, 256, 256)

    def host_us(fn, n=2000):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        torch.cuda.synchronize()
        return dt / n * 1e6
    return {"kind": "host", "mm_us": host_us(lambda: torch.mm(x, w.t())),
            "linear_us": host_us(lambda: fused_gemm.linear(x, w, b, "gelu_tanh", out=out)),
            "op_us": host_us(lambda: op(x, w, b, out=out, launch=launch)),
            "op_eager_us": host_us(lambda: op.run(x, w, b, None, None, None, 1.0, 1.0, None, out, launch)),
            "torch_op_us": host_us(lambda: torch.ops.fused_gemm.linear_out(x, w, b, "gelu_tanh", None, 1.0, 1.0,
                                                                           None, None, out)),
            "eager_us": host_us(lambda: F.gelu(F.linear(x, w, b), approximate="tanh"))}


def _verdict(r) -> str:
    return "PASS" if r["ok"] else "FAIL"


SECTIONS = [  # (kind, header, row formatter)
    ("prefill",
     f"{'prefill MxNxK':<18}{'torch.mm':>12}{'eager':>10}{'fused':>12}{'TFLOP/s ratio':>15}{'vs eager':>10}"
     f"{'rel err':>10}  bar: ratio >= 0.95, vs eager >= 1.10",
     lambda r: f"{r['M']}x{r['N']}x{r['K']:<8}{r['mm_tflops']:>7.0f} TF/s{r['eager_us']:>8.0f}us"
               f"{r['ours_tflops']:>7.0f} TF/s{r['tflops_ratio']:>14.3f}x{r['speedup_vs_eager']:>9.2f}x"
               f"{r['rel_err']:>10.1e}  {_verdict(r)}"),
    ("decode",
     f"{'decode MxNxK':<18}{'graph mm':>10}{'fused':>9}{'ratio':>8}{'eager mm':>10}{'fused':>9}{'ratio':>8}"
     f"{'GB/s':>7}{'rel err':>10}  bar: graph <= 1.15, eager <= 1.2",
     lambda r: f"{r['M']}x{r['N']}x{r['K']:<8}{r['graph_mm_us']:>8.1f}us{r['graph_ours_us']:>7.1f}us"
               f"{r['graph_ratio']:>8.3f}{r['eager_mm_us']:>8.1f}us{r['eager_ours_us']:>7.1f}us"
               f"{r['eager_ratio']:>8.3f}{r['weight_GBps']:>7.0f}{r['rel_err']:>10.1e}  {_verdict(r)}"),
    ("host", "host time per call, 1x256x256 (CPU-bound: what each call costs the launching thread)",
     lambda r: f"torch.mm {r['mm_us']:.1f}us, eager F.gelu(F.linear) {r['eager_us']:.1f}us, "
               f"fused_gemm.linear {r['linear_us']:.1f}us, compiled op {r['op_us']:.1f}us, "
               f"through torch.ops {r['torch_op_us']:.1f}us"),
]


def table(rows) -> str:
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, "
             f"fused epilogue bias+gelu_tanh vs plain torch.mm"]
    for kind, header, fmt in SECTIONS:
        lines += ["", header] + [fmt(r) for r in rows if r["kind"] == kind]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here as JSON")
    ap.add_argument("--only", choices=("prefill", "decode"), help="run one half")
    args = ap.parse_args(argv)
    require_gpu("bench_linear")
    rows = []
    if args.only != "decode":
        warm_gpu()
        rows += [prefill_row(m, n, k, torch.bfloat16) for m, n, k in PREFILL]
    if args.only != "prefill":
        rows += [decode_row(m, n, k, torch.bfloat16) for m, n, k in DECODE]
    rows.append(host_overhead_row())
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(table(rows))
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
