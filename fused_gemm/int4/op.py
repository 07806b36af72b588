"""Int4Op: one compiled W4A16 or W8A16 GEMM (an int4-family kernel), with the one validation path of
int4_linear, int4_gated_linear and fp8_weight_linear (the weight's tensors are checked by its
format: formats.py).

Every argument is checked before the launch (TypeError/ValueError naming it); the launch does no
sync and no allocation beyond the output (and a stream-K kernel's workspace, from the caching
allocator on the caller's stream, as GemmOp's), so it can be captured in a CUDA graph.
"""
from __future__ import annotations

from typing import Dict, Optional

import torch

from .. import checks
from ..checks import INT32_LIMIT
from ..generator import DEFAULT_LAUNCH, LaunchOptions
from ..generator.int4 import PROBLEM, Int4Spec
from ..kernel_op import DEVICES, TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary
from .formats import weight_format

Tensor = torch.Tensor
# The order Int4Op packs its fields in; tests/test_int4.py checks it against the ABI table.
PACK_ORDER = ("m", "n", "k", "a", "lda", "w", "scales", "zeros", "group_size", "c", "ldc", "d", "ldd", "bias",
              "alpha", "beta", "splits", "swizzle", "raster", "decomposition", "reduction", "pdl", "device",
              "reserved", "workspace", "workspace_bytes", "stream")
_grad_enabled = torch.is_grad_enabled


class Int4Op(KernelOp):
    """``op(x, packed, scales, zeros, group_size, bias=None, residual=None, *, out=None, launch=None)``:
    act(x @ dequant(W)^T + bias) + residual for an ``Int4Weight``'s tensors (fused_gemm.int4_linear
    picks the op and passes them).  x [..., K]; packed uint8 [N, K/2]; scales (and zeros, for 'u4'
    specs) [K/group_size, N] in x's dtype; bias [N]; residual [..., N] (may be ``out``).  An 'e4m3'
    spec takes an ``Fp8Weight``'s tensors (fused_gemm.fp8_weight_linear): packed float8_e4m3fn
    [N, K], scales float32 [N], zeros None, group_size K.  A gated spec (int4_gated_linear) takes a
    quantize_int4(pack_gate_up(...)) weight's N = 2I rows and writes act(gate + b_gate) * (up + b_up):
    out and residual are [..., N/2], bias [N] = cat(b_gate, b_up)."""

    def __init__(self, spec: Int4Spec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._out_dtype = TORCH_DTYPES[spec.out_dtype]
        self._res_dtype = TORCH_DTYPES[spec.residual_dtype]
        self._bias_dtype = TORCH_DTYPES[spec.bias_dtype]
        self._format = weight_format(spec, self._dtype)
        self._stream_k = not spec.decode and spec.config.scheduler == "stream_k"
        # The decode kernel reads nothing before griddepcontrol.wait but L2 prefetches: PDL is safe
        # after any kernel, so it is its default (the wgmma kernels take it per call).
        self._default_launch = LaunchOptions(pdl=True) if spec.decode and spec.pdl else DEFAULT_LAUNCH
        self._ws_sizes: Dict[tuple, int] = {}
        self._rows_per_output = 2 if spec.gated else 1   # a gated weight's 2I rows give I outputs
        self._op_name = "int4_gated_linear" if spec.gated else self._format.op_name

    def __call__(self, x, packed, scales, zeros, group_size, bias=None, residual=None, *, out=None, launch=None):
        return self.run(x, packed, scales, zeros, group_size, bias, residual, out, launch)

    def run(self, x, packed, scales, zeros, group_size, bias, residual, out, launch: Optional[LaunchOptions] = None):
        spec = self.spec
        if not isinstance(x, Tensor) or x.dtype is not self._dtype:
            checks.tensor("x", x, self._dtype, None)
        dev = x.get_device()
        if dev not in self._ready:
            self._first_use(x, dev)
        xs = x.shape
        if not xs:
            raise ValueError("x must have at least one dim ([..., K])")
        K = xs[-1]
        lead = xs[:-1]
        M = xs[0] if len(xs) == 2 else lead.numel()
        N = self._format.check(packed, scales, zeros, group_size, K, dev)
        N_out = N // self._rows_per_output
        if M >= INT32_LIMIT or N >= INT32_LIMIT or K >= INT32_LIMIT:
            checks.dims_fit(M, N, K)
        ep = spec.epilogue
        if (bias is None) == ep.bias:
            raise ValueError(f"bias {'is required' if ep.bias else 'was given'}: this kernel's epilogue is {ep.name!r}")
        if (residual is None) == ep.residual:
            raise ValueError(f"residual {'is required' if ep.residual else 'was given'}: this kernel's epilogue is "
                             f"{ep.name!r}")
        if launch is None:
            launch = self._default_launch
        else:
            launch = self.checked_launch(launch)
            if spec.decode:
                self.check_decode_launch(launch, power_of_two=spec.gated)   # gated: each rank whole 16-row blocks
            elif spec.gated and launch != LaunchOptions(pdl=launch.pdl):
                raise ValueError(f"launch {launch}: {spec.uri} takes only launch.pdl (a gated kernel runs its "
                                 "scheduler's defaults)")
        out_shape = (M, N_out) if len(xs) == 2 else (*lead, N_out)
        given_out = out is not None
        if given_out:
            checks.tensor("out", out, self._out_dtype, dev)
            checks.shape("out", out, out_shape)
        else:
            out = self.new_output(out_shape, self._out_dtype, dev)
        if _grad_enabled():
            checks.refuse_grad(self._op_name, x, scales, zeros, bias, residual)
        bias_ptr = 0
        if bias is not None:
            bias_ptr = checks.vector("bias", bias, N, self._bias_dtype, dev)
        if residual is not None:
            checks.tensor("residual", residual, self._res_dtype, dev)
            checks.shape("residual", residual, out_shape)
        if M == 0:
            return out
        lda, a_ptr = checks.matrix("x", x, M, K, self._dtype.itemsize)
        d2 = out if out.dim() == 2 else checks.flat2d("out", out, N_out)
        ldd, d_ptr = checks.row_major("out", d2, M, N_out, self._out_dtype.itemsize)
        c_ptr = ldc = 0
        if residual is not None:
            c2 = residual if residual.dim() == 2 else checks.flat2d("residual", residual, N_out)
            ldc, c_ptr = checks.row_major("residual", c2, M, N_out, self._res_dtype.itemsize)
        w_ptr, s_ptr = packed.data_ptr(), scales.data_ptr()
        z_ptr = zeros.data_ptr() if zeros is not None else 0
        if given_out:
            out_size = self._out_dtype.itemsize
            spans = [("x", a_ptr, a_ptr + (lda * (M - 1) + K) * self._dtype.itemsize),
                     *self._format.spans(packed, scales, zeros, group_size, N, K)]
            if bias_ptr:
                spans.append(("bias", bias_ptr, bias_ptr + N * self._bias_dtype.itemsize))
            if c_ptr and (c_ptr != d_ptr or ldc != ldd or self._res_dtype is not self._out_dtype):
                spans.append(("residual", c_ptr, c_ptr + (ldc * (M - 1) + N_out) * self._res_dtype.itemsize))
            checks.refuse_overlap(spans, (d_ptr, d_ptr + (ldd * (M - 1) + N_out) * out_size))
        fields = (M, N, K, a_ptr, lda, w_ptr, s_ptr, z_ptr, group_size, c_ptr, ldc, d_ptr, ldd, bias_ptr, 1.0, 1.0)
        ws_ptr = ws_bytes = 0
        if self._stream_k:   # kept alive (by this frame) until the launch is on the stream
            key = (M, N, K, launch, dev)
            need = self._ws_sizes.get(key)
            if need is None:
                need = self._ws_sizes[key] = self.library.workspace_size(*fields, *launch.abi, dev, 0, 0, 0, 0)
            if need:
                workspace = torch.empty(need, dtype=torch.uint8, device=DEVICES[dev])
                ws_ptr, ws_bytes = workspace.data_ptr(), need
        problem = self._pack(*fields, *launch.abi, dev, 0, ws_ptr, ws_bytes, raw_stream(dev))
        self.launch(problem, dev, M, N, K)
        return out
