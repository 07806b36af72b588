"""Launches one of our kernels a few times on a bar shape, for Nsight Compute to profile.

    ncu --clock-control none -k regex:device_kernel --launch-skip 3 --launch-count 1 \\
        --set full -o rope python3 perf/profile_kernels.py rope --m 4096

The first launches build, load and warm up; the later ones are what a profile should look at.
Kinds: rope (qkv_rope on Llama-3-8B's QKV), gemm (our plain GEMM of the same shape), gated
(gated_linear on Llama-3-8B's MLP), linear (bias+gelu_tanh, --n/--k square by default; --config NAME runs
that tile or decode config instead of linear's choice: the dense decode kernel is
gemv::kernel<DenseDecode<...>>, NCU_KERNEL=DenseDecode), int4
(int4_linear, s4 g128, --n/--k; its decode kernel is gemv::kernel<Int4Decode<...>>: NCU_KERNEL=Int4Decode),
attention (bf16, 16k tokens in B = 16384 / --m sequences of --m, H = 32, head dim --n, --causal), fp8 /
fp8-fast (fp8_linear, row x column scales, precise / fast accumulation, on bench_fp8's spread operands) and
scaled_mm / scaled_mm-fast (torch._scaled_mm on the same: cuBLAS's kernel, NCU_KERNEL=nvjet).
"""
from __future__ import annotations

import argparse
import sys

import torch

import fused_gemm

K, HQ, HKV, D = 4096, 32, 8, 128
QKV_N = (HQ + 2 * HKV) * D


def launcher(kind: str, m: int, n: int, k: int, positions: str = "arange", causal: bool = False,
             config: str | None = None, splits: int = 1):
    if kind == "attention":
        q, kk, v = (torch.randn(16384 // m, m, HQ, n, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        return lambda: fused_gemm.attention(q, kk, v, causal=causal)
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    if kind in ("rope", "gemm"):
        w = torch.randn(QKV_N, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
        if kind == "gemm":
            return lambda: fused_gemm.linear(x, w)
        packed = fused_gemm.pack_qkv_rope(w, num_heads=HQ, num_kv_heads=HKV, head_dim=D)
        cache = fused_gemm.rope_cos_sin_cache(131072, D, base=500000.0, device="cuda")
        pos = {"arange": lambda: torch.arange(m, device="cuda") + 1000,   # one sequence
               "zero": lambda: torch.zeros(m, dtype=torch.int64, device="cuda"),   # one cos/sin row for all
               "random": lambda: torch.randint(0, cache.shape[0], (m,), device="cuda")}[positions]()
        return lambda: fused_gemm.qkv_rope(x, packed, positions=pos, cos_sin_cache=cache, check_positions=False)
    if kind == "gated":
        wg, wu = (torch.randn(14336, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5 for _ in range(2))
        packed = fused_gemm.pack_gate_up(wg, wu)
        return lambda: fused_gemm.gated_linear(x, packed)
    if kind == "linear":
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
        b = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        if config:
            from fused_gemm.generator import GemmSpec
            from fused_gemm.generator.gemm.spec import config_from_name
            op = fused_gemm.compile(GemmSpec("bf16", epilogue="bias+gelu_tanh", config=config_from_name(config)))
            launch = fused_gemm.LaunchOptions(splits=splits, pdl=True)   # as the tuned tables launch it
            return lambda: op(x, w, b, "gelu_tanh", launch=launch)
        return lambda: fused_gemm.linear(x, w, b, "gelu_tanh")
    if kind == "int4":
        w = fused_gemm.quantize_int4(torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5, 128)
        return lambda: fused_gemm.int4_linear(x, w)
    if kind in ("fp8", "fp8-fast", "scaled_mm", "scaled_mm-fast"):   # bench_fp8's operands and layouts
        from fused_gemm.bench.ops import fp8_scaled_operands
        xq, wq, xs, ws = fp8_scaled_operands(m, n, k)
        fast = kind.endswith("-fast")
        if kind.startswith("fp8"):
            return lambda: fused_gemm.fp8_linear(xq, wq, xs.view(-1), ws.view(-1), use_fast_accum=fast)
        wt = wq.t()
        return lambda: torch._scaled_mm(xq, wt, scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16, use_fast_accum=fast)
    raise SystemExit(f"unknown kind {kind!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("rope", "gemm", "gated", "linear", "int4", "attention", "fp8", "fp8-fast",
                                     "scaled_mm", "scaled_mm-fast"))
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=K)
    ap.add_argument("--count", type=int, default=6)
    ap.add_argument("--positions", choices=("arange", "zero", "random"), default="arange",
                    help="rope: the tokens' positions (how many cos/sin rows the epilogue reads, and where)")
    ap.add_argument("--causal", action="store_true", help="attention: the causal mask")
    ap.add_argument("--config", help="linear: a tile or decode config name to run instead of linear's choice")
    ap.add_argument("--splits", type=int, default=1, help="with --config: the launch's K split (1: the kernel's own)")
    args = ap.parse_args(argv)
    if args.config and args.kind != "linear":
        ap.error("--config names a config for the linear kind only")
    with torch.no_grad():
        call = launcher(args.kind, args.m, args.n, args.k, args.positions, args.causal, args.config, args.splits)
        for _ in range(args.count):
            call()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
