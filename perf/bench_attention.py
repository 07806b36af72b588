"""The prefill attention bars: fused_gemm.attention against PyTorch SDPA's best backend, same run.

    python perf/bench_attention.py [--json results.json] [--quick] [--pairwise] [--backend sm80]

B * S = 16k tokens, H = 32, D in {128, 64}, S in {1k, 4k, 16k}, causal and not, bf16 and fp16 (bar:
TFLOP/s >= 1.0x the best of SDPA's flash, memory-efficient and cuDNN backends).  Plus GQA rows
(Llama-3-8B, 32/8 heads; SDPA with enable_gqa, informational).  q/k/v are [B, S, H, D]
(flash-attn's layout); SDPA gets the same memory as [B, H, S, D] views.  Back-to-back eager calls,
interleaved, steady clocks; every row checks our output against float64 on a slice.  --pairwise also
times ours against the best backend alone (no lighter backend between them; informational, the bar
stays on the first ratio).  --backend sm80 times example 41's kernels (FUSED_GEMM_ATTENTION_BACKEND),
judged on correctness only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

import fused_gemm
from fused_gemm.bench.attention_ops import BACKENDS, TOKENS, flops, rel_error_attention, sdpa, usable
from fused_gemm.bench.timing import paired_ratios, require_gpu, time_samples, warm_gpu

HEADS = 32


def row(dtype, d, s, causal, hkv=HEADS, pairwise=False):
    b = TOKENS // s
    q = torch.randn(b, s, HEADS, d, dtype=dtype, device="cuda")
    k = torch.randn(b, s, hkv, d, dtype=dtype, device="cuda")
    v = torch.randn(b, s, hkv, d, dtype=dtype, device="cuda")
    variants = {"ours": [lambda: fused_gemm.attention(q, k, v, causal=causal)]}
    for name, backend in BACKENDS.items():
        call = sdpa(backend, q, k, v, causal, gqa=hkv != HEADS)
        if usable(call):
            variants[name] = [call]
    calls = max(2, 16384 // s)
    samples = time_samples(variants, reps=9, min_calls=calls)
    over_ours = paired_ratios(samples, "ours")
    sdpa_names = [n for n in variants if n != "ours"]
    best = min(sdpa_names, key=lambda n: over_ours[n])
    fl = flops(b, HEADS, s, s, d, causal)
    t_ours = sorted(samples["ours"])[len(samples["ours"]) // 2]
    r = {"dtype": str(dtype).split(".")[-1], "D": d, "S": s, "B": b, "Hkv": hkv, "causal": causal,
         "ours_tflops": fl / t_ours / 1e12, "best_sdpa": best, "ratio": over_ours[best],
         **{f"{n}_tflops": fl / (t_ours * over_ours[n]) / 1e12 for n in sdpa_names},
         "rel_err": rel_error_attention(fused_gemm.attention(q, k, v, causal=causal), q, k, v, causal)}
    if pairwise:   # ours and the best backend alone, interleaved: no lighter kernel between them
        pair = time_samples({"ours": variants["ours"], best: variants[best]}, reps=9, min_calls=calls)
        r["pair_ratio"] = paired_ratios(pair, "ours")[best]
    r["ok"] = r["ratio"] >= 1.0 and r["rel_err"] < 1e-2
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="bf16, D=128 only")
    ap.add_argument("--pairwise", action="store_true",
                    help="also time ours against the best backend alone (no lighter backend interleaved)")
    ap.add_argument("--backend", choices=("auto", "sm90a", "sm80"), default="auto",
                    help="force fused_gemm.attention's kernels (FUSED_GEMM_ATTENTION_BACKEND)")
    args = ap.parse_args(argv)
    os.environ["FUSED_GEMM_ATTENTION_BACKEND"] = args.backend
    require_gpu("bench_attention")
    warm_gpu()
    rows = []
    with torch.no_grad():
        for dtype in ((torch.bfloat16,) if args.quick else (torch.bfloat16, torch.float16)):
            for d in ((128,) if args.quick else (128, 64)):
                for s in (1024, 4096, 16384):
                    for causal in (False, True):
                        rows.append(row(dtype, d, s, causal, pairwise=args.pairwise))
                        print(rows[-1], flush=True)
        gqa = [row(torch.bfloat16, 128, s, causal, hkv=8) for s in (4096,) for causal in (False, True)]
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "backend": args.backend,
                                               "rows": rows, "gqa": gqa}, indent=1))
    print(f"\ndevice: {torch.cuda.get_device_name()}, torch {torch.__version__}, backend {args.backend}; "
          f"B*S = {TOKENS} tokens, H = {HEADS}; "
          "steady-state clocks; TFLOP/s (causal counts the unmasked half)")
    print(f"{'dtype':>9}{'D':>5}{'S':>7}{'causal':>8}{'ours':>8}{'flash':>8}{'effic.':>8}{'cudnn':>8}"
          f"{'vs best':>9}{'rel err':>9}  bar: >= 1.0x the best SDPA backend")
    for r in rows + gqa:
        tag = "" if r["Hkv"] == HEADS else f"  (GQA {HEADS}/{r['Hkv']}, SDPA enable_gqa)"
        print(f"{r['dtype']:>9}{r['D']:>5}{r['S']:>7}{str(r['causal']):>8}{r['ours_tflops']:>8.0f}"
              f"{r.get('flash_tflops', float('nan')):>8.0f}{r.get('efficient_tflops', float('nan')):>8.0f}"
              f"{r.get('cudnn_tflops', float('nan')):>8.0f}{r['ratio']:>8.3f}x{r['rel_err']:>9.1e}  "
              f"{'PASS' if r['ok'] else 'FAIL'}{tag}"
              + (f"  alone with {r['best_sdpa']}: {r['pair_ratio']:.3f}x" if "pair_ratio" in r else ""))
    if args.backend == "sm80":   # example 41 is xformers' kernel, SDPA's "efficient" one: rows are informational
        return 0 if all(r["rel_err"] < 1e-2 for r in rows) else 1
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
