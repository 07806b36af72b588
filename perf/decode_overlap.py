"""Several builds of one decode-kernel spec (the GEMM family's, bf16 bias+gelu_tanh t16 by default)
against linear as shipped and torch.mm, in CUDA graphs of back-to-back calls with weights rotated past
the L2: how a kernel change moves the decode floor ratio (issue 9: <= 1.2x weight bytes / copy
bandwidth), most of which at 4096 x 4096 is a fixed ~3 us a call spent at the kernel boundary.

    python perf/decode_overlap.py --variants DIR [--uri URI] [--shapes NxK ...] [--m 1 16]
    python perf/decode_overlap.py --variants DIR --uri decode_sm90a_bf16_d128_s3 [--shapes BxS ...]

With a decode-attention URI the builds run fused_gemm.decode_attention's problem (Hq 32, Hkv 8, the
shapes B x cache length) against the op as shipped and SDPA, on one input set (rotated past L2 only
where B x S makes the caches larger than it, as at 32 x 1024 and up).

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


BASELINES = ("linear", "torch.mm", "shipped", "sdpa")


def load_variants(folder: Path, uri: str):
    spec = spec_from_uri(uri)
    if not uri.startswith("decode_") and (spec.epilogue.name != "bias+gelu_tanh" or spec.a_dtype != "bf16"):
        sys.exit(f"{uri}: the GEMM rows call bf16 bias+gelu_tanh kernels (linear's tuned epilogue)")
    family = family_of(spec)
    ops = {d.name: _op_class(family)(spec, KernelLibrary(d / "lib.so", family, uri))
           for d in sorted(folder.iterdir()) if (d / "lib.so").is_file()}
    if not ops:
        sys.exit(f"no builds in {folder} (DIR/<name>/lib.so)")
    if set(ops) & set(BASELINES):
        sys.exit(f"build folders may not be named {BASELINES}")
    return ops


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


def attention_rows(b, length, ops, bandwidth):
    hq, hkv, d = 32, 8, ops[next(iter(ops))].spec.head_dim
    q = torch.randn(b, hq, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, length, hkv, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, length, hkv, d, dtype=torch.bfloat16, device="cuda")
    seqlens = torch.full((b,), length, dtype=torch.int32, device="cuda")
    kt, vt = k.transpose(1, 2), v.transpose(1, 2)
    ref = F.scaled_dot_product_attention(q[:, :, None].double(), kt.double(), vt.double(), enable_gqa=True)[:, :, 0]
    variants = {
        "shipped": [lambda: fused_gemm.decode_attention(q, k, v, seqlens, check_lengths=False)],
        "sdpa": [lambda: F.scaled_dot_product_attention(q[:, :, None], kt, vt, enable_gqa=True)],
    }
    errors = {}
    for name, op in ops.items():
        o = op(q, k, v, seqlens)
        o = o[0] if isinstance(o, tuple) else o   # the raw op gives (o, lse)
        errors[name] = float((o.double() - ref).norm() / ref.norm())
        variants[name] = [lambda op=op: op(q, k, v, seqlens, check_lengths=False)]
    samples = time_samples(variants, graph=True, reps=15, min_calls=20)
    over = paired_ratios(samples, "sdpa")
    floor = 2 * b * length * hkv * d * 2 / bandwidth
    return [(b, length, 0, name, statistics.median(ts) * 1e6, statistics.median(ts) / floor, 1 / over[name],
             errors.get(name, float("nan"))) for name, ts in samples.items()]


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
    attention = args.uri.startswith("decode_")
    with torch.no_grad():
        for shape in (args.shapes if args.shapes != list(SHAPES) or not attention else ["32x1024", "32x8192"]):
            n, k = (int(v) for v in shape.split("x"))
            if attention:
                rows += attention_rows(n, k, ops, bandwidth)
                continue
            for m in args.m:
                rows += rows_for(n, k, m, ops, bandwidth)
    base = "SDPA (columns: B x S, the K+V bytes' floor)" if attention else "linear as shipped"
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1e9:.0f} GB/s, CUDA graphs, steady clocks; "
          f"vs: speed against {base}, ratio per repetition")
    print(f"{'N x K':>12}{'M':>4}  {'variant':<10}{'us':>8}{'/floor':>8}{'vs':>10}{'rel err':>9}")
    for n, k, m, name, us, fl, vs, err in rows:
        print(f"{n:>6}x{k:<6}{m:>4}  {name:<10}{us:>8.2f}{fl:>8.3f}{vs:>9.3f}x{err:>9.1e}")
    return 0 if all(r[7] < 1e-2 for r in rows if r[3] in ops) else 1


if __name__ == "__main__":
    sys.exit(main())
