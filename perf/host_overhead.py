"""Where the host time of one launch goes (decode is often CPU-bound; CUDA graphs hide this).

    python perf/host_overhead.py
Times, per call, on a tiny problem so that the GPU never is the bottleneck: a no-op ctypes call,
the packed C launch alone, GemmOp (validation + launch), fused_gemm.linear (+ kernel choice), and
torch.mm / torch.empty for scale.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import fused_gemm  # noqa: E402
from fused_gemm.runtime import _raw_stream  # noqa: E402


def per_call_us(fn, n: int = 5000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main() -> int:
    x = torch.randn(1, 256, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(256, 256, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(256, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(1, 256, dtype=torch.bfloat16, device="cuda")
    op, launch = fused_gemm.api._select(x, b, "gelu_tanh", None, None, None, out, 1)
    lib = op.library
    fields = (1, 256, 256, x.data_ptr(), 256, w.data_ptr(), 256, 0, 256, out.data_ptr(), 256, b.data_ptr(), 0, 0,
              1.0, 1.0, *launch.abi, 0, 0, 0, 0, _raw_stream(0))
    rows = [
        ("ctypes no-op call (fg_abi_version)", per_call_us(lib._lib.fg_abi_version)),
        ("pack FgProblem only", per_call_us(lambda: lib._pack(fields))),
        ("C launch: pack + fg_run", per_call_us(lambda: lib.run(*fields))),
        ("GemmOp(x, w, b, out=out)", per_call_us(lambda: op(x, w, b, out=out, launch=launch))),
        ("GemmOp(x, w, b) (allocates out)", per_call_us(lambda: op(x, w, b, launch=launch))),
        ("fused_gemm.linear(x, w, b, 'gelu_tanh')", per_call_us(lambda: fused_gemm.linear(x, w, b, "gelu_tanh"))),
        ("torch.mm(x, w.t())", per_call_us(lambda: torch.mm(x, w.t()))),
        ("F.linear(x, w, b)", per_call_us(lambda: torch.nn.functional.linear(x, w, b))),
        ("torch.empty(1, 256)", per_call_us(lambda: torch.empty(1, 256, dtype=torch.bfloat16, device="cuda"))),
    ]
    print(f"host microseconds per call on {torch.cuda.get_device_name()} (min of 3 x 5000 calls)")
    for name, us in rows:
        print(f"  {name:<42}{us:7.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
