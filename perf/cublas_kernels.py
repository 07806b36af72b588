"""Which cuBLAS kernel torch.mm runs per shape (tile, cluster, split-K / stream-K in its name), and its
time: the reference design points for our tuning space.

    python perf/cublas_kernels.py [--shapes MxNxK,...]
"""
from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

DEFAULT = [(m, n, k) for n, k in ((6144, 4096), (4096, 4096), (14336, 4096), (1280, 8192), (4608, 3584))
           for m in (1, 16, 128, 256, 512, 1024)]


def kernels(m, n, k, dtype=torch.bfloat16):
    x = torch.randn(m, k, dtype=dtype, device="cuda")
    w = torch.randn(n, k, dtype=dtype, device="cuda")
    for _ in range(3):
        torch.mm(x, w.t())
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            torch.mm(x, w.t())
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            rows.setdefault(e.name, []).append(e.device_time)
    return {name: sum(t) / len(t) for name, t in rows.items()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", help="MxNxK,...")
    args = ap.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] if args.shapes else DEFAULT
    print(f"device: {torch.cuda.get_device_name()}")
    for m, n, k in shapes:
        for name, us in kernels(m, n, k).items():
            print(f"{m}x{n}x{k:<8} {us:8.1f}us  {name[:160]}")


if __name__ == "__main__":
    main()
