"""Where the host time of one launch goes (decode is often CPU-bound; CUDA graphs hide this).

    python perf/host_overhead.py
Times, per call, on tiny problems so that the GPU never is the bottleneck: a no-op ctypes call,
the packed C launch alone, GemmOp (validation + launch), fused_gemm.linear (+ kernel choice), the
same through torch.ops (what a torch.compile'd graph calls), and torch.mm / F.linear for scale.
The "32 weights" rows cycle through 32 distinct weights and outputs, as a decode step over a
model's layers does: each one is a different problem for the C-side Params cache.
"""
from __future__ import annotations

import statistics
import sys
import time

import torch

import fused_gemm
from fused_gemm.gemm.linear import select
from fused_gemm.kernel_op import raw_stream


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


def rotation(calls):
    state = {"i": 0}
    n = len(calls)

    def call():
        i = state["i"]
        state["i"] = (i + 1) % n
        calls[i]()
    return call


def rows():
    d = 256
    x = torch.randn(1, d, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(d, d, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(d, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(1, d, dtype=torch.bfloat16, device="cuda")
    op, launch = select(x, b, "gelu_tanh", None, None, None, torch.bfloat16, 1, *w.shape)
    lib = op.library
    fields = (1, d, d, x.data_ptr(), d, w.data_ptr(), d, 0, d, out.data_ptr(), d, b.data_ptr(), 0, 0,
              1.0, 1.0, *launch.abi, 0, 0, 0, 0, raw_stream(0))
    ws = [torch.randn(d, d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    bs = [torch.randn(d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    outs = [torch.empty(1, d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    mm_outs = [torch.empty(1, d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    yield "ctypes no-op call (fg_abi_version)", per_call_us(lib._lib.fg_abi_version)
    yield "pack FgGemmProblem only", per_call_us(lambda: lib._pack(fields))
    yield "C launch: pack + fg_run", per_call_us(lambda: lib.run(*fields))
    yield "GemmOp(x, w, b, out=out)", per_call_us(lambda: op(x, w, b, out=out, launch=launch))
    yield "GemmOp(x, w, b) (allocates out)", per_call_us(lambda: op(x, w, b, launch=launch))
    yield "fused_gemm.linear(x, w, b, 'gelu_tanh')", per_call_us(lambda: fused_gemm.linear(x, w, b, "gelu_tanh"))
    yield "torch.ops.fused_gemm.linear (dispatcher)", per_call_us(
        lambda: torch.ops.fused_gemm.linear(x, w, b, "gelu_tanh", None, 1.0, 1.0, None, None, None))
    yield "torch.mm(x, w.t())", per_call_us(lambda: torch.mm(x, w.t()))
    yield "F.linear(x, w, b)", per_call_us(lambda: torch.nn.functional.linear(x, w, b))
    yield "torch.empty(1, 256)", per_call_us(lambda: torch.empty(1, d, dtype=torch.bfloat16, device="cuda"))
    yield "32 weights: torch.mm(x, w_i.t(), out=o_i)", per_call_us(
        rotation([lambda i=i: torch.mm(x, ws[i].t(), out=mm_outs[i]) for i in range(32)]))
    yield "32 weights: torch.mm(x, w_i.t())", per_call_us(rotation([lambda i=i: torch.mm(x, ws[i].t())
                                                                    for i in range(32)]))
    yield "32 weights: fused_gemm.linear(x, w_i, b_i, 'gelu_tanh', out=o_i)", per_call_us(
        rotation([lambda i=i: fused_gemm.linear(x, ws[i], bs[i], "gelu_tanh", out=outs[i]) for i in range(32)]))
    yield "32 weights: fused_gemm.linear(x, w_i, b_i, 'gelu_tanh')", per_call_us(
        rotation([lambda i=i: fused_gemm.linear(x, ws[i], bs[i], "gelu_tanh") for i in range(32)]))


def interleaved(variants, rounds: int = 15, calls: int = 2000):
    """Median microseconds per call of each variant, timed in alternating blocks (a host's speed
    drifts within seconds; alternating puts the drift on every variant alike), and the median of the
    per-round ratios to the first variant."""
    for fn in variants.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t) / calls * 1e6)
            torch.cuda.synchronize()
    base = next(iter(samples.values()))
    return {name: (statistics.median(ts), statistics.median(t / b for t, b in zip(ts, base)))
            for name, ts in samples.items()}


def decode_step_rows():
    """32 distinct weights in rotation, like a decode step: torch.mm against fused_gemm.linear."""
    d = 256
    x = torch.randn(1, d, dtype=torch.bfloat16, device="cuda")
    ws = [torch.randn(d, d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    bs = [torch.randn(d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    outs = [torch.empty(1, d, dtype=torch.bfloat16, device="cuda") for _ in range(32)]
    return interleaved({
        "torch.mm(x, w_i.t())": rotation([lambda i=i: torch.mm(x, ws[i].t()) for i in range(32)]),
        "fused_gemm.linear(x, w_i, b_i, 'gelu_tanh')": rotation(
            [lambda i=i: fused_gemm.linear(x, ws[i], bs[i], "gelu_tanh") for i in range(32)]),
        "torch.mm(x, w_i.t(), out=o_i)": rotation([lambda i=i: torch.mm(x, ws[i].t(), out=outs[i])
                                                  for i in range(32)]),
        "fused_gemm.linear(..., out=o_i)": rotation(
            [lambda i=i: fused_gemm.linear(x, ws[i], bs[i], "gelu_tanh", out=outs[i]) for i in range(32)]),
    })


def other_op_rows():
    """The other ops' host paths on tiny problems, beside the torch calls they replace."""
    hq, hkv, d, k = 2, 1, 128, 256
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    w = torch.randn((hq + 2 * hkv) * d, k, dtype=torch.bfloat16, device="cuda")
    packed = fused_gemm.pack_qkv_rope(w, num_heads=hq, num_kv_heads=hkv, head_dim=d)
    cache = fused_gemm.rope_cos_sin_cache(4096, d, device="cuda")
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    yield "qkv_rope(x, packed, check_positions=False) (3 outputs)", per_call_us(
        lambda: fused_gemm.qkv_rope(x, packed, positions=pos, cos_sin_cache=cache, check_positions=False))
    q = torch.randn(1, 16, hq, d, dtype=torch.bfloat16, device="cuda")
    kv = torch.randn(1, 16, hkv, d, dtype=torch.bfloat16, device="cuda")
    yield "attention(q, k, v) (16 queries, the prefill kernel)", per_call_us(lambda: fused_gemm.attention(q, kv, kv))
    yield "attention(q, k, v, causal=True) (16 queries, the decode kernel)", per_call_us(
        lambda: fused_gemm.attention(q, kv, kv, causal=True))
    yield "F.scaled_dot_product_attention (16 queries, enable_gqa)", per_call_us(
        lambda: torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), kv.transpose(1, 2),
                                                                 kv.transpose(1, 2), enable_gqa=True))
    xq, wq = torch.randn(1, k, device="cuda").to(torch.float8_e4m3fn), torch.randn(64, k, device="cuda").to(torch.float8_e4m3fn)
    xs, ws = torch.ones(1, device="cuda"), torch.ones(64, device="cuda")
    yield "fp8_linear(x, w, x_scale, w_scale) (row x column scales)", per_call_us(lambda: fused_gemm.fp8_linear(xq, wq, xs, ws))
    wt, xs2, ws2 = wq.t(), xs[:, None], ws[None, :]      # its layouts, made once (fp8_linear takes the tensors as they are)
    yield "torch._scaled_mm (the same scales, as [M, 1] and [1, N])", per_call_us(
        lambda: torch._scaled_mm(xq, wt, scale_a=xs2, scale_b=ws2, out_dtype=torch.bfloat16))
    lens = torch.full((1,), 16, dtype=torch.int32, device="cuda")
    yield "decode_attention(q, k_cache, v_cache, lens, check_lengths=False)", per_call_us(
        lambda: fused_gemm.decode_attention(q[:, 0], kv, kv, lens, check_lengths=False))


def main() -> int:
    print(f"host microseconds per call on {torch.cuda.get_device_name()} (min of 3 x 5000 calls)")
    for name, us in [*rows(), *other_op_rows()]:
        print(f"  {name:<66}{us:7.2f} us")
    print("32 weights in rotation, interleaved blocks (median of 15 rounds; ratio to torch.mm(x, w_i.t()))")
    for name, (us, ratio) in decode_step_rows().items():
        print(f"  {name:<66}{us:7.2f} us  {ratio:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
