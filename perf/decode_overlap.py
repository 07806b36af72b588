"""Several builds of one decode-kernel spec (the GEMM family's, bf16 bias+gelu_tanh t16 by default)
against linear as shipped and torch.mm, in CUDA graphs of back-to-back calls with weights rotated past
the L2: how a kernel change moves the decode floor ratio (issue 9: <= 1.2x weight bytes / copy
bandwidth), most of which at 4096 x 4096 is a fixed ~3 us a call spent at the kernel boundary.

    python perf/decode_overlap.py --variants DIR [--uri URI] [--shapes NxK ...] [--m 1 16]

DIR holds one folder per build, DIR/<name>/lib.so: the cache entry's kernel.cu compiled with the nvcc
line at the top of its build.log, once per edit of the kernel (DecodeOverlap's choices were measured so:
perf/results/decode_overlap.txt).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import fused_gemm
from fused_gemm.bench.timing import copy_bandwidth, paired_ratios, require_gpu, rotation_count, time_samples, warm_gpu
from fused_gemm.generator import LaunchOptions, spec_from_uri
from fused_gemm.generator.registry import family_of
from fused_gemm.jit import _op_class
from fused_gemm.library import KernelLibrary

URI = "gemm_sm90a_a-bf16_b-bf16_d-bf16_bias-bf16_w-nk_decode_t16_w4_b1_ep-bias-gelu_tanh"
SHAPES = ("4096x4096", "6144x4096", "1024x4096", "4096x14336", "14336x4096", "28672x4096")


def load_variants(folder: Path, uri: str):
    spec = spec_from_uri(uri)
    family = family_of(spec)
    return {d.name: _op_class(family)(spec, KernelLibrary(d / "lib.so", family, uri))
            for d in sorted(folder.iterdir()) if (d / "lib.so").is_file()}


def rows_for(n, k, m, ops, bandwidth):
    per_set = n * k * 2 + n * 2 + m * k * 2
    sets = [(torch.randn(m, k, dtype=torch.bfloat16, device="cuda"),
             torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5,
             torch.randn(n, dtype=torch.bfloat16, device="cuda")) for _ in range(rotation_count(per_set))]
    outs = [torch.empty(m, n, dtype=torch.bfloat16, device="cuda") for _ in sets]
    ref = F.gelu(sets[0][0].double() @ sets[0][1].double().T + sets[0][2].double(), approximate="tanh")
    variants = {
        "linear": [lambda s=s, o=o: fused_gemm.linear(*s[:2], s[2], "gelu_tanh", out=o) for s, o in zip(sets, outs)],
        "torch.mm": [lambda s=s: torch.mm(s[0], s[1].t()) for s in sets],
    }
    launch = LaunchOptions(pdl=True)
    errors = {}
    for name, op in ops.items():
        got = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        op(*sets[0][:2], sets[0][2], "gelu_tanh", out=got, launch=launch)
        errors[name] = float((got.double() - ref).norm() / ref.norm())
        variants[name] = [lambda s=s, o=o, op=op: op(*s[:2], s[2], "gelu_tanh", out=o, launch=launch)
                          for s, o in zip(sets, outs)]
    samples = time_samples(variants, graph=True, reps=15, min_calls=64)
    over = paired_ratios(samples, "linear")
    floor = n * k * 2 / bandwidth
    out = []
    for name, ts in samples.items():
        t = statistics.median(ts)
        out.append((n, k, m, name, t * 1e6, t / floor, 1 / over[name], errors.get(name, float("nan"))))
    del sets, outs
    torch.cuda.empty_cache()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", required=True, type=Path)
    ap.add_argument("--uri", default=URI)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    ap.add_argument("--m", type=int, nargs="*", default=[1, 16])
    args = ap.parse_args(argv)
    require_gpu("decode_overlap")
    ops = load_variants(args.variants, args.uri)
    bandwidth = copy_bandwidth()
    warm_gpu()
    rows = []
    with torch.no_grad():
        for shape in args.shapes:
            n, k = (int(v) for v in shape.split("x"))
            for m in args.m:
                rows += rows_for(n, k, m, ops, bandwidth)
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s, CUDA graphs, steady clocks; "
          "vs linear: time ratio per repetition (>1: faster than linear as shipped)")
    print(f"{'N x K':>12}{'M':>4}  {'variant':<10}{'us':>8}{'/floor':>8}{'vs linear':>10}{'rel err':>9}")
    for n, k, m, name, us, fl, vs, err in rows:
        print(f"{n:>6}x{k:<6}{m:>4}  {name:<10}{us:>8.2f}{fl:>8.3f}{vs:>9.3f}x{err:>9.1e}")
    return 0 if all(r[7] < 1e-2 for r in rows if r[3] in ops) else 1


if __name__ == "__main__":
    sys.exit(main())
