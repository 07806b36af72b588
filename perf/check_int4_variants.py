"""Correctness of int4 decode kernel variants built by perf/build_variants.py (bf16 activations, s4 or u4,
no epilogue, not gated; other builds in DIR are skipped and named): every M up to the kernel's tokens
class (1, 7, 8, 9, 16), weights with a partial last row group, an odd group count and a per-channel
group, the launcher's K split and forced splits of 2, 4 and 8 (a cluster); outputs NaN-filled first,
against a float64 product with the dequantised weight, normwise and elementwise.

    python perf/check_int4_variants.py DIR
"""
import sys
from pathlib import Path

import torch

import fused_gemm
from build_variants import load_builds
from fused_gemm.bench.ops import rel_error
from fused_gemm.generator import LaunchOptions
from fused_gemm.generator.int4.spec import DecodeConfig
from fused_gemm.int4.op import Int4Op

# (N, K, group): 4112 rows end in a partial row group for every CTA shape; K = 4160 has 65 groups of 64 (odd);
# 96 x 1024 is per channel (group = K), and narrower than an 8-block CTA (the launcher's one-block kernel)
SHAPES = [(4096, 4096, 128), (4112, 4160, 64), (96, 1024, 1024), (28672, 4096, 128), (4096, 14336, 128),
          (1040, 8192, 256)]
MS = (1, 7, 8, 9, 16)
SPLITS = (0, 2, 4, 8)        # 0: the launcher's own choice
NORM_TOL, MAX_TOL = 1e-2, 3e-2


def checkable(spec) -> bool:
    """What this check knows how to call: a bf16 int4 decode kernel without an epilogue."""
    return (isinstance(spec.config, DecodeConfig) and spec.dtype == "bf16" and spec.weight in ("s4", "u4")
            and not spec.gated and spec.epilogue == type(spec.epilogue)())


def errors(out: torch.Tensor, ref: torch.Tensor):
    """(normwise, elementwise) error; inf where an output is not finite (unwritten NaN, or garbage)."""
    if not torch.isfinite(out).all():
        return float("inf"), float("inf")
    return rel_error(out, ref), float((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def main():
    torch.manual_seed(0)
    ops = {}
    for name, (spec, lib) in load_builds(Path(sys.argv[1])).items():
        if checkable(spec):
            ops[name] = Int4Op(spec, lib)
        else:
            print(f"{name}: skipped ({spec.uri}: not a bf16 int4 decode kernel without an epilogue)")
    worst = {}   # (name, N, K, group) -> (normwise, elementwise, M, splits) of the worst call
    for n, k, group in SHAPES:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        quantized = {}   # weight kind -> (Int4Weight, its float64 dequantisation), shared by the builds of that kind
        for name, op in ops.items():
            kind = op.spec.weight
            if kind not in quantized:
                wq = fused_gemm.quantize_int4(w, group, kind == "s4")
                quantized[kind] = (wq, wq.dequantize(torch.float64))
            wq, ref_w = quantized[kind]
            for m in MS:
                if m > op.spec.config.tokens:
                    continue
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                ref = x.double() @ ref_w.t()
                for splits in SPLITS:
                    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                    op.run(x, wq.packed, wq.scales, wq.zeros, group, None, None, out,
                           LaunchOptions(pdl=op.spec.pdl, splits=max(splits, 1)))
                    norm, elem = errors(out, ref)
                    key = (name, n, k, group)
                    if key not in worst or (norm, elem) > worst[key][:2]:
                        worst[key] = (norm, elem, m, splits)
    bad = 0
    for (name, n, k, group), (norm, elem, m, splits) in sorted(worst.items()):
        ok = norm < NORM_TOL and elem < MAX_TOL
        bad += not ok
        print(f"{name:<12} {n:>6}x{k:<6} g{group:<5} worst: rel err {norm:.2e}, max err / max |ref| {elem:.2e} "
              f"(M = {m}, splits {splits or 'auto'})  {'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
