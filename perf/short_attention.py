"""Prefill attention of short sequences (S <= 16 queries and keys, B = 16384 // S, bf16, H = 32 / 8,
D = 128, causal): fused_gemm.attention (which runs them on the decode kernel: its bottom-right causal
mask over T = S new tokens is attention's causal mask at Sq = Sk), the prefill kernel that served
them before, and SDPA's backends, interleaved in one run.

    python perf/short_attention.py [--s 1 2 4 8 16]
"""
from __future__ import annotations

import argparse
import sys

import torch

import fused_gemm
from fused_gemm.attention.api import select
from fused_gemm.bench.attention_ops import BACKENDS, TOKENS, flops, rel_error_attention, sdpa, usable
from fused_gemm.bench.timing import paired_ratios, require_gpu, time_samples, warm_gpu

HQ, HKV, D = 32, 8, 128


def row(s: int, causal: bool = True):
    b = max(1, TOKENS // s)
    q = torch.randn(b, s, HQ, D, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.randn(b, s, HKV, D, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    prefill = select(q, causal, s)
    variants = {"prefill": [lambda: prefill.run(q, k, v, None, None, None, None, None, False)],
                "ours": [lambda: fused_gemm.attention(q, k, v, causal=causal)]}
    for name, backend in BACKENDS.items():
        call = sdpa(backend, q, k, v, causal, gqa=True)
        if usable(call):
            variants[name] = [call]
    samples = time_samples(variants, graph=True, reps=9, min_calls=8)
    over = paired_ratios(samples, "ours")
    med = {n: sorted(t)[len(t) // 2] * 1e6 for n, t in samples.items()}
    best = min((n for n in variants if n in BACKENDS), key=lambda n: med[n])
    err_o = rel_error_attention(fused_gemm.attention(q, k, v, causal=causal), q, k, v, causal)
    err_p = rel_error_attention(prefill.run(q, k, v, None, None, None, None, None, False)[0], q, k, v, causal)
    tflops = flops(b, HQ, s, s, D, causal) / med["ours"] / 1e6
    print(f"S={s:<3} B={b:<6} ours {med['ours']:8.1f}us  prefill kernel {med['prefill']:9.1f}us  {best} "
          f"{med[best]:8.1f}us  speed: ours / prefill {over['prefill']:6.2f}x  ours / {best} {over[best]:5.2f}x  "
          f"prefill / {best} {over[best] / over['prefill']:5.2f}x  ours {tflops:6.1f} TF/s"
          f"  err ours {err_o:.1e} prefill {err_p:.1e}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--s", type=int, nargs="*", default=[1, 2, 4, 8, 16])
    args = ap.parse_args(argv)
    require_gpu("short_attention")
    warm_gpu()
    print(f"{torch.cuda.get_device_name()}: B*S = {TOKENS}, Hq {HQ} Hkv {HKV} D {D} bf16 causal, CUDA graphs, "
          "steady clocks")
    with torch.no_grad():
        for s in args.s:
            row(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
