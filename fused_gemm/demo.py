"""`fused-gemm demo`: the main job in one command.

On an sm_90 GPU: build (or reuse) the fused linear(bias, gelu_tanh) kernel, check it against a
float64 reference, and time it against cuBLAS torch.mm and eager PyTorch.  Without one: generate
and compile the kernel, and say what running it needs.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from .generator import build
from .generator.gemm.presets import linear_specs


def _time(fn, iters: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def run_demo(m: int = 4096, n: int = 14336, k: int = 4096) -> int:
    gpu = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    if not gpu:
        specs = linear_specs("bf16", "bias+gelu_tanh")
        print(f"no sm_90 GPU here: generating and compiling the {len(specs)} kernels of "
              f"linear(bias, gelu_tanh) (bf16), one per M bucket")
        for spec in specs:
            t = time.monotonic()
            res = build(spec)
            state = "cached" if res.cached else f"compiled in {time.monotonic() - t:.0f}s"
            print(f"  {spec.uri}: {state}\n    -> {res.library}")
            for p in res.problems:
                print(f"    WARNING: {p}")
        print("running them needs an NVIDIA Hopper GPU (H100/H200, sm_90) with a CUDA 12.4+ driver and a "
              "CUDA build of torch; copy the cache folder above to reuse these builds there")
        return 0

    import fused_gemm
    dev = torch.cuda.get_device_name()
    print(f"{dev}: fused linear(x, w, b, 'gelu_tanh'), bf16, M={m} N={n} K={k}")
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
    b = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    t = time.monotonic()
    y = fused_gemm.linear(x, w, b, "gelu_tanh")
    torch.cuda.synchronize()
    print(f"  first call (build or load from cache): {time.monotonic() - t:.1f}s")
    ref = F.gelu(F.linear(x.double(), w.double(), b.double()), approximate="tanh")
    err = ((y.double() - ref).norm() / ref.norm()).item()
    ok = err < 1e-2 and not torch.isnan(y).any()
    print(f"  check vs float64: relative error {err:.2e} ({'OK' if ok else 'FAIL'}, bf16 bar 1e-2)")
    t_ours = _time(lambda: fused_gemm.linear(x, w, b, "gelu_tanh"))
    t_mm = _time(lambda: torch.mm(x, w.t()))
    t_eager = _time(lambda: F.gelu(F.linear(x, w, b), approximate="tanh"))
    tf = 2 * m * n * k / 1e12
    print(f"  fused        {t_ours * 1e6:9.1f} us  {tf / t_ours:6.0f} TFLOP/s")
    print(f"  torch.mm     {t_mm * 1e6:9.1f} us  {tf / t_mm:6.0f} TFLOP/s  (no epilogue)")
    print(f"  eager torch  {t_eager * 1e6:9.1f} us  (F.gelu(F.linear(x, w, b)))")
    print(f"  fused vs torch.mm: {t_mm / t_ours:.2f}x the throughput; vs eager: {t_eager / t_ours:.2f}x faster")
    return 0 if ok else 1
