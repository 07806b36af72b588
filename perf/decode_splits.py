"""decode_attention on one long sequence (and a few) at forced key splits, against SDPA, in CUDA graphs.

    python perf/decode_splits.py [--splits 16 32 64 128] [--batch 1 2 4] [--length 32768]

Informational: whether generator/decode/heuristics.py's split count (one wave of CTAs filled to
WAVE_FILL) is the fastest where few (batch x kv head) groups must share the GPU; 0 is its own choice.
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from fused_gemm.bench.timing import copy_bandwidth, require_gpu, time_samples, warm_gpu
from fused_gemm.decode.api import select
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.decode.heuristics import splits as heuristic_splits

HQ, HKV, D = 32, 8, 128


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, nargs="+", default=[0, 16, 32, 48, 64],
                    help="key ranges a sequence, 2 to 64 (LaunchOptions.splits); 0 = the heuristic's count")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--length", type=int, default=32768)
    args = ap.parse_args(argv)
    if any(s == 1 or not 0 <= s <= 64 for s in args.splits):
        ap.error("--splits takes 0 (the heuristic) or 2 to 64: a launch's splits 1 leaves the choice to the heuristic")
    require_gpu("decode_splits")
    warm_gpu()
    bandwidth = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s; decode Hq={HQ} Hkv={HKV} D={D} "
          f"bf16, S={args.length}, CUDA graphs; us (x SDPA's speed), split 0 = the heuristic's")
    for b in args.batch:
        q = torch.randn(b, HQ, D, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(b, args.length, HKV, D, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        seqlens = torch.full((b,), args.length, dtype=torch.int32, device="cuda")
        kt, vt = k.transpose(1, 2), v.transpose(1, 2)

        op = select(q)

        def ours(s):   # s = 0: the heuristic's split count (a launch's splits 1 leaves the choice to it)
            launch = LaunchOptions(splits=max(s, 1))
            return op(q, k, v, seqlens, check_lengths=False, launch=launch)[0]

        variants = {s: [lambda s=s: ours(s)] for s in args.splits}
        variants["sdpa"] = [lambda: F.scaled_dot_product_attention(q[:, :, None], kt, vt, enable_gqa=True)]
        samples = time_samples(variants, graph=True, reps=15, min_calls=20)
        t = {name: sorted(ts)[len(ts) // 2] for name, ts in samples.items()}
        ref = ours(0).double()
        errs = {s: float((ours(s).double() - ref).norm() / ref.norm()) for s in args.splits}
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        print(f"B={b}: SDPA {t['sdpa'] * 1e6:.1f} us, heuristic split {heuristic_splits(b * HKV, args.length, D, sms)}")
        for s in args.splits:
            print(f"  split {s:>4}: {t[s] * 1e6:8.1f} us  {t['sdpa'] / t[s]:.3f}x SDPA  "
                  f"{2 * b * args.length * HKV * D * 2 / t[s] / bandwidth:.0%} of copy bw  diff {errs[s]:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
