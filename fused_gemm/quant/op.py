"""QuantOp: one compiled per-token fp8 quantiser, with the one validation path of the quantize op.
x [..., K] bf16/fp16 (K a multiple of 16) -> (q [..., K] float8_e4m3fn, scale fp32 [...]), with
x ~= q * scale[..., None].  No sync and no allocation beyond the two outputs (none when both are
given): CUDA-graph capturable."""
from __future__ import annotations

import torch

from .. import checks
from ..checks import INT32_LIMIT
from ..generator.quant import PROBLEM, QuantSpec
from ..kernel_op import TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary

Tensor = torch.Tensor
# The order QuantOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("x", "ldx", "q", "ldq", "scale", "rows", "cols", "device", "reserved", "stream")
CHUNK = 16     # elements per vector the kernel moves (32 bytes of x in, 16 of q out)


class QuantOp(KernelOp):
    """``op(x, out=None, scale_out=None)`` -> (q, scale): q = e4m3(x / scale), scale = row absmax / 448."""

    def __init__(self, spec: QuantSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._size = self._dtype.itemsize
        self._q_dtype = TORCH_DTYPES[spec.out_dtype]

    def __call__(self, x, *, out=None, scale_out=None):
        return self.run(x, out, scale_out)

    def run(self, x, out=None, scale_out=None):
        if not isinstance(x, Tensor) or x.dtype is not self._dtype:
            checks.tensor("x", x, self._dtype, None)
        dev = x.get_device()
        if dev not in self._ready:
            self._first_use(x, dev)
        xs = x.shape
        if not xs:
            raise ValueError("x must have at least one dim ([..., K])")
        K, lead = xs[-1], xs[:-1]
        M = lead.numel()
        if K % CHUNK:
            raise ValueError(f"x has K = {K}, which must be a multiple of {CHUNK} (fp8 GEMM operand rows are read "
                             "16 bytes at a time)")
        if M >= INT32_LIMIT or K >= INT32_LIMIT:
            raise ValueError(f"x of shape {tuple(xs)}: rows and K must stay below 2**31")
        if x.requires_grad and torch.is_grad_enabled():
            checks.refuse_grad("quantize_fp8", x)
        if out is None:   # (KernelOp's output templates are keyed by shape alone: q's dtype is this op's)
            out = self.new_output(xs, self._q_dtype, dev)
        else:
            checks.tensor("out", out, self._q_dtype, dev)
            checks.shape("out", out, xs)
        if scale_out is None:
            scale_out = torch.empty(lead, dtype=torch.float32, device=x.device)
        else:
            checks.tensor("scale_out", scale_out, torch.float32, dev)
            checks.shape("scale_out", scale_out, lead)
            if M > 1 and not scale_out.is_contiguous():
                raise ValueError("scale_out must be contiguous")
        if M == 0:
            return out, scale_out
        ldx, x_ptr = checks.matrix("x", x, M, K, self._size)
        ldq, q_ptr = checks.matrix("out", out, M, K, 1)
        s_ptr = scale_out.data_ptr()
        if s_ptr % 4:
            raise ValueError("scale_out data pointer is not 4-byte aligned")
        x_span = ("x", x_ptr, x_ptr + (ldx * (M - 1) + K) * self._size)
        q_span = (q_ptr, q_ptr + ldq * (M - 1) + K)
        checks.refuse_overlap([x_span], q_span)
        hit = checks.overlapping([x_span, ("out", *q_span)], (s_ptr, s_ptr + 4 * M))
        if hit is not None:
            raise ValueError(f"scale_out overlaps {hit}: the kernel would read or write it twice")
        problem = self._pack(x_ptr, ldx, q_ptr, ldq, s_ptr, M, K, dev, 0, raw_stream(dev))
        self.launch(problem, dev, M, K, 0)
        return out, scale_out
