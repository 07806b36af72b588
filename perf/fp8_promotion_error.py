"""Error of the fp8 (W8A8) GEMM at each fp32 promotion interval against float64 and against
torch._scaled_mm (fast accumulation off and on), at Llama-3-8B's longest K.

    python perf/fp8_promotion_error.py [--promotion 4 8 16] [--m 4096]

Informational: whether promoting less often than CUTLASS's every 4 wgmmas (128 of K) keeps the
error of _scaled_mm's default (fast accumulation off) or drifts toward fast accumulation's.
"""
from __future__ import annotations

import argparse
import sys

import torch

import fused_gemm
from fused_gemm.generator import Epilogue, GemmSpec
from fused_gemm.generator.gemm.heuristics import FP8_RULES

SHAPES = [(4096, 14336), (28672, 4096)]   # (N, K): down (the longest K) and gate_up
CONFIG = FP8_RULES[False][-1].config      # the table's precise prefill kernel


def rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--promotion", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--m", type=int, default=4096)
    args = ap.parse_args(argv)
    print(f"{torch.cuda.get_device_name()}: fp8 e4m3 GEMM, per-token x per-channel scales, bf16 out, M = {args.m}; "
          "relative error norms")
    print(f"{'N x K':>12} {'kernel':<22}{'vs float64':>12}{'vs sm precise':>15}{'vs sm fast':>12}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n, k in SHAPES:
        x = torch.randn(args.m, k, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        xs = torch.rand(args.m, 1, device="cuda", generator=gen) + 0.5
        ws = torch.rand(1, n, device="cuda", generator=gen) + 0.5
        ref = (x.double() @ w.double().t()) * xs.double() * ws.double()
        sm = {fast: torch._scaled_mm(x, w.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16, use_fast_accum=fast)
              for fast in (False, True)}
        rows = [(f"_scaled_mm {'fast' if fast else 'precise'}", out) for fast, out in sm.items()]
        for p in args.promotion:
            op = fused_gemm.compile(GemmSpec("e4m3", "e4m3", out_dtype="bf16",
                                             epilogue=Epilogue(row_scale=True, col_scale=True), config=CONFIG,
                                             promotion=p))
            rows.append((f"ours, promotion {p}", op(x, w, row_scale=xs.view(-1), col_scale=ws.view(-1))))
        for name, out in rows:
            print(f"{n:>6}x{k:<6} {name:<22}{rel(out, ref):>12.2e}{rel(out, sm[False]):>15.2e}{rel(out, sm[True]):>12.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
