"""Correctness of fp8 (row x column scale) kernel variants built by perf/build_variants.py: odd M, N with
a partial last tile, outputs NaN-filled first, float64 reference.

    python perf/check_fp8_variants.py DIR
"""
import sys
from pathlib import Path

import torch

from build_variants import load_builds
from fused_gemm.bench.ops import rel_error
from fused_gemm.gemm.op import GemmOp

SHAPES = [(1, 4096, 4096), (7, 4104, 4096), (129, 6144, 4096), (1000, 4104, 512), (4095, 4096, 4096),
          (4096, 6144, 4096), (3000, 1032, 14336)]


def main():
    torch.manual_seed(0)
    ops = {n: GemmOp(*b) for n, b in load_builds(Path(sys.argv[1])).items()}
    worst = {}
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        xs = torch.rand(m, device="cuda") + 0.5
        ws = torch.rand(n, device="cuda") + 0.5
        ref = (x.double() @ w.double().t()) * xs.double()[:, None] * ws.double()[None, :]
        for name, op in ops.items():
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            op(x, w, row_scale=xs, col_scale=ws, out=out)
            torch.cuda.synchronize()
            nan = int(out.isnan().sum())
            err = rel_error(out, ref)   # NaN where an element was left unwritten
            worst[name] = max(worst.get(name, 0), err if nan == 0 else float("inf"))
            print(f"{name:<12} {m}x{n}x{k}: rel err {err:.2e}, unwritten {nan}")
    for name, err in worst.items():
        print(f"{name}: worst {err:.2e} -> {'PASS' if err < 1e-2 else 'FAIL'}")


if __name__ == "__main__":
    main()
