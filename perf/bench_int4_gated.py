"""SwiGLU on int4 weights: fused_gemm.int4_gated_linear against the same int4 GEMM unfused
(int4_linear on the packed [2I, K] weight, then torch's silu(gate) * up) and against the bf16
gated GEMM (fused_gemm.gated_linear on the unquantised packed weight).  Informational: the issue's
int4 bars are int4_linear's (perf/bench_int4.py); this shows what fusing the gate saves.

    python perf/bench_int4_gated.py [--json results.json]

Llama-3-8B's MLP (K = 4096, I = 14336), bf16 x, s4 g = 128; M in {1, 16} inside one CUDA graph
(rotated weight sets larger than the L2), M = 4096 eager.  Every row checks ours against float64
of the dequantised weights.
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

import fused_gemm
from fused_gemm import jit
from fused_gemm.bench.environment import write_rows
from fused_gemm.bench.timing import compare, require_gpu, rotation_count, warm_gpu

K, INTER, GROUP = 4096, 14336, 128
M_VALUES = (1, 16, 4096)


def make_sets(m):
    per_set = 2 * INTER * K // 2 + 2 * INTER * (K // GROUP) * 2 + 2 * m * K
    wg, wu = (torch.randn(INTER, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5 for _ in range(2))
    packed = fused_gemm.pack_gate_up(wg, wu)
    w0 = fused_gemm.quantize_int4(packed, GROUP)
    sets = []
    for i in range(rotation_count(per_set)):
        w = w0 if i == 0 else fused_gemm.Int4Weight(w0.packed.clone(), w0.scales.clone(), None, GROUP, 2 * INTER, K)
        sets.append((torch.randn(m, K, device="cuda", dtype=torch.bfloat16), w))
    return sets, packed


def unfused(x, w):
    y = fused_gemm.int4_linear(x, w).view(x.shape[0], -1, 2, 8)   # pack_gate_up's order: 8 gate, then 8 up columns
    return (F.silu(y[:, :, 0]) * y[:, :, 1]).reshape(x.shape[0], -1)


def row(m):
    sets, bf16_packed = make_sets(m)
    variants = {
        "ours": [(lambda s=s: fused_gemm.int4_gated_linear(s[0], s[1])) for s in sets],
        "unfused": [(lambda s=s: unfused(s[0], s[1])) for s in sets],
        "bf16_gated": [(lambda s=s: fused_gemm.gated_linear(s[0], bf16_packed)) for s in sets],
    }
    graph = m <= 16
    t = compare(variants, graph=graph, min_calls=32 if graph else 4, reps=11)
    x, w = sets[0]
    gate, up = fused_gemm.unpack_gate_up(w.dequantize(torch.float64))
    ref = F.silu(x.double() @ gate.T) * (x.double() @ up.T)
    got = fused_gemm.int4_gated_linear(x, w).double()
    err = float((got - ref).norm() / ref.norm())
    return {"M": m, "graph": graph, "ours_us": t["ours"] * 1e6, "unfused_us": t["unfused"] * 1e6,
            "bf16_gated_us": t["bf16_gated"] * 1e6, "vs_unfused": t["unfused"] / t["ours"],
            "vs_bf16_gated": t["bf16_gated"] / t["ours"], "rel_err": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here as JSON")
    args = ap.parse_args(argv)
    require_gpu("bench_int4_gated")
    jit.warmup("int4-gated-bench", "int4-bench", "gated-bench")
    warm_gpu()
    with torch.no_grad():
        rows = [row(m) for m in M_VALUES]
    write_rows(args.json, rows)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; SwiGLU K={K} I={INTER}, bf16 x, "
          f"s4 g={GROUP}; M <= 16 in a CUDA graph, larger eager; steady-state clocks")
    print(f"{'M':>6}{'int4 gated':>12}{'unfused':>10}{'bf16 gated':>12}{'vs unfused':>12}{'vs bf16':>9}{'rel err':>10}")
    for r in rows:
        print(f"{r['M']:>6}{r['ours_us']:>10.1f}us{r['unfused_us']:>8.1f}us{r['bf16_gated_us']:>10.1f}us"
              f"{r['vs_unfused']:>11.2f}x{r['vs_bf16_gated']:>8.2f}x{r['rel_err']:>10.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
