"""Correctness of int4 decode kernel variants built by perf/build_variants.py (no epilogue): M up to the
kernel's tokens, weights narrower than a CTA and with a partial last row group, group sizes that end
inside a register stage, K splits forced over a cluster; outputs NaN-filled first, float64 reference
of the dequantised weight.

    python perf/check_int4_variants.py DIR
"""
import sys
from pathlib import Path

import torch

import fused_gemm
from build_variants import load_builds
from fused_gemm.bench.ops import rel_error
from fused_gemm.generator import LaunchOptions
from fused_gemm.int4.op import Int4Op

# (N, K, group): 4112 rows end in a partial row group; K = 4160 has 65 groups of 64 (odd); 96 rows are
# narrower than most CTAs (the one-block kernel)
SHAPES = [(4096, 4096, 128), (4112, 4160, 64), (96, 1024, 1024), (28672, 4096, 128), (4096, 14336, 128),
          (1040, 8192, 256)]
MS = (1, 7, 9, 16)
SPLITS = (0, 2, 4, 8)


def main():
    torch.manual_seed(0)
    ops = {name: Int4Op(spec, lib) for name, (spec, lib) in load_builds(Path(sys.argv[1])).items()}
    worst = {}
    for n, k, group in SHAPES:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        for name, op in ops.items():
            symmetric = op.spec.weight == "s4"
            wq = fused_gemm.quantize_int4(w, group, symmetric)
            ref_w = wq.dequantize(torch.float64)
            for m in MS:
                if m > op.spec.config.tokens:
                    continue
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                ref = x.double() @ ref_w.t()
                for splits in SPLITS:
                    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                    op.run(x, wq.packed, wq.scales, wq.zeros, group, None, None, out,
                           LaunchOptions(pdl=True, splits=max(splits, 1)))
                    err = float("inf") if out.isnan().any() else rel_error(out, ref)
                    key = (name, n, k, group)
                    worst[key] = max(worst.get(key, 0.0), err)
    bad = 0
    for (name, n, k, group), err in sorted(worst.items()):
        ok = err < 1e-2
        bad += not ok
        print(f"{name:<12} {n:>6}x{k:<6} g{group:<5} worst rel err {err:.2e}  {'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
