"""How close can any kernel get to issue 9's decode floor (weight bytes / copy bandwidth) at a
model's weight sizes?  Times, inside CUDA graphs with the weights rotated past L2, reads of the same
bytes by kernels that do nothing else, next to linear (M = 1, bias + gelu_tanh) and torch.mm:

  * sum:   ``w.sum((0, 1), dtype=float32)`` over the weight (PyTorch's reduction: reads it once);
  * copy:  half the weight's bytes copied to a buffer (copy_ of bytes / 2: reads + writes = the
           weight's bytes, the floor's own yardstick at this size).

If a pure read of 32 MB already takes more than 1.2x the floor, the launch, ramp and drain of one
kernel of that size cost more than the bar allows, whatever the GEMM does.

    python perf/decode_read_floor.py [--preset llama3-8b]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch

import fused_gemm
from fused_gemm.bench.models import layers
from fused_gemm.bench.timing import copy_bandwidth, require_gpu, rotation_count, time_samples, warm_gpu


def shape_row(n: int, k: int, bandwidth: float) -> dict:
    nbytes = n * k * 2
    sets = []
    for _ in range(rotation_count(nbytes)):
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
        sets.append((torch.randn(1, k, dtype=torch.bfloat16, device="cuda"), w,
                     torch.randn(n, dtype=torch.bfloat16, device="cuda"),
                     torch.empty(1, n, dtype=torch.bfloat16, device="cuda"),
                     torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")))
    sums = [torch.empty((), dtype=torch.float32, device="cuda") for _ in sets]
    variants = {
        "linear": [lambda s=s: fused_gemm.linear(s[0], s[1], s[2], "gelu_tanh", out=s[3]) for s in sets],
        "torch.mm": [lambda s=s: torch.mm(s[0], s[1].t()) for s in sets],
        "sum": [lambda s=s, o=o: torch.sum(s[1], dim=(0, 1), dtype=torch.float32, out=o) for s, o in zip(sets, sums)],
        "copy": [lambda s=s: s[4].copy_(s[1].view(torch.uint8).view(-1)[: nbytes // 2]) for s in sets],
    }
    samples = time_samples(variants, graph=True, reps=11, min_calls=64)
    floor = nbytes / bandwidth
    row = {"N": n, "K": k, "floor_us": floor * 1e6}
    for name, ts in samples.items():
        row[name] = statistics.median(ts) / floor
    del sets
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="llama3-8b")
    args = ap.parse_args(argv)
    require_gpu("decode_read_floor")
    bandwidth = copy_bandwidth()
    warm_gpu()
    shapes = dict.fromkeys((n, k) for _, n, k in layers(args.preset))
    with torch.no_grad():
        rows = [shape_row(n, k, bandwidth) for n, k in shapes]
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s; CUDA graphs, steady clocks; "
          "time / floor (weight bytes / copy bandwidth)")
    print(f"{'N x K':>13}{'floor us':>10}{'linear':>9}{'torch.mm':>10}{'sum':>8}{'copy':>8}")
    for r in rows:
        print(f"{r['N']:>6}x{r['K']:<6}{r['floor_us']:>10.2f}{r['linear']:>9.3f}{r['torch.mm']:>10.3f}"
              f"{r['sum']:>8.3f}{r['copy']:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
