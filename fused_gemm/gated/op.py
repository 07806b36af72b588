"""GatedOp: one compiled gated GEMM (SwiGLU/GeGLU), called on torch tensors.

    out[..., I] = act(alpha * x W_g^T + b_g) * (alpha * x W_u^T + b_u) + beta * residual

with the weight packed by ``pack_gate_up`` ([2I, K], 16-row blocks of 8 gate rows then their 8 up
rows).  One validation path, before any launch; the launch is graph-capturable, like GemmOp's.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import checks
from ..generator import LaunchOptions
from ..generator.gated import PROBLEM, GatedSpec
from ..kernel_op import TORCH_ACTIVATIONS, TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary

Tensor = torch.Tensor
PAIR_BLOCK = 8     # gate rows per packed block (then as many up rows): see csrc/fused_gemm/gated
# The order GatedOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("m", "n", "k", "a", "lda", "b", "ldb", "c", "ldc", "d", "ldd", "bias_gate", "bias_up", "alpha",
              "beta", "swizzle", "raster", "pdl", "device", "workspace", "workspace_bytes", "stream")


def pack_gate_up(w_gate: Tensor, w_up: Tensor) -> Tensor:
    """The [2I, K] weight gated kernels read, from nn.Linear weights w_gate and w_up ([I, K] each):
    blocks of 8 gate rows, each followed by the same 8 rows of w_up.  Pack once, at load time."""
    for name, w in (("w_gate", w_gate), ("w_up", w_up)):
        if not isinstance(w, Tensor) or w.dim() != 2:
            raise ValueError(f"{name} must be a 2-D [I, K] tensor, got "
                             f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}")
    if w_gate.shape != w_up.shape or w_gate.dtype != w_up.dtype or w_gate.device != w_up.device:
        raise ValueError(f"w_gate {tuple(w_gate.shape)} {w_gate.dtype} on {w_gate.device} and w_up "
                         f"{tuple(w_up.shape)} {w_up.dtype} on {w_up.device} must match")
    i, k = w_gate.shape
    if i % PAIR_BLOCK:
        raise ValueError(f"I = {i} (rows of w_gate) must be a multiple of {PAIR_BLOCK}")
    blocks = (w_gate.reshape(i // PAIR_BLOCK, PAIR_BLOCK, k), w_up.reshape(i // PAIR_BLOCK, PAIR_BLOCK, k))
    return torch.stack(blocks, dim=1).reshape(2 * i, k)


def unpack_gate_up(packed: Tensor):
    """(w_gate, w_up) back from a ``pack_gate_up`` weight (copies: the rows are interleaved)."""
    if not isinstance(packed, Tensor) or packed.dim() != 2 or packed.shape[0] % (2 * PAIR_BLOCK):
        raise ValueError("packed must be a [2I, K] tensor from pack_gate_up (2I a multiple of 16)")
    rows, k = packed.shape
    blocks = packed.reshape(rows // (2 * PAIR_BLOCK), 2, PAIR_BLOCK, k)
    return blocks[:, 0].reshape(rows // 2, k), blocks[:, 1].reshape(rows // 2, k)


class GatedOp(KernelOp):
    """A compiled gated GEMM: ``op(x, weight, bias_gate, bias_up, residual, *, alpha, beta, out_dtype,
    out, launch)`` with ``weight`` from ``pack_gate_up``.  x: [..., K]; out/residual: [..., I]."""

    def __init__(self, spec: GatedSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._out_dtype = TORCH_DTYPES[spec.out_dtype]
        self._bias_dtype = TORCH_DTYPES[spec.bias_dtype]
        self._res_dtype = TORCH_DTYPES[spec.residual_dtype]
        self._size = self._dtype.itemsize
        self._out_size = self._out_dtype.itemsize
        self._res_size = self._res_dtype.itemsize
        self._bias_size = self._bias_dtype.itemsize

    def __call__(self, x, weight, bias_gate=None, bias_up=None, residual=None, *, alpha=1.0, beta=1.0,
                 out_dtype: Optional[torch.dtype] = None, out: Optional[Tensor] = None,
                 launch: Optional[LaunchOptions] = None) -> Tensor:
        return self.run(x, weight, bias_gate, bias_up, residual, alpha, beta, out_dtype, out, launch)

    def run(self, x, weight, bias_gate, bias_up, residual, alpha, beta, out_dtype, out, launch):
        """Validate, then launch on x's device's current stream.  Returns ``out`` (allocated if None)."""
        checks.tensor("x", x, self._dtype, None)
        dev = x.get_device()
        if dev not in self._ready:
            self._first_use(x, dev)
        if x.dim() == 0:
            raise ValueError("x must have at least one dim ([..., K])")
        checks.tensor("weight", weight, self._dtype, dev)
        if weight.dim() != 2 or weight.shape[0] % (2 * PAIR_BLOCK):
            raise ValueError(f"weight has shape {tuple(weight.shape)}: expected the [2I, K] weight of "
                             "fused_gemm.pack_gate_up (2I a multiple of 16)")
        K = x.shape[-1]
        packed_rows, Kw = weight.shape
        if Kw != K:
            raise ValueError(f"weight has shape {tuple(weight.shape)}, which does not match x's K={K}")
        N = packed_rows // 2
        lead = x.shape[:-1]
        M = lead.numel()
        out_shape = (*lead, N)
        checks.dims_fit(M, packed_rows, K)
        spec = self.spec
        if residual is not None and not spec.residual:
            raise ValueError("residual was given, but this kernel has no residual step")
        if residual is None and spec.residual:
            raise ValueError("residual is required: this kernel was built with a residual add")
        if (bias_gate is not None or bias_up is not None) and not spec.bias:
            raise ValueError("bias_gate/bias_up were given, but this kernel was built without bias")
        if out_dtype is not None and out_dtype is not self._out_dtype:
            raise TypeError(f"out_dtype {out_dtype} is not this kernel's output dtype {self._out_dtype}")
        launch = self.checked_launch(launch)
        alpha = checks.scalar("alpha", alpha)
        beta = checks.scalar("beta", beta)
        checks.refuse_grad("gated_linear", x, weight, bias_gate, bias_up, residual)
        bg_ptr = 0 if bias_gate is None else checks.vector("bias_gate", bias_gate, N, self._bias_dtype, dev)
        bu_ptr = 0 if bias_up is None else checks.vector("bias_up", bias_up, N, self._bias_dtype, dev)
        if residual is not None:
            checks.tensor("residual", residual, self._res_dtype, dev)
            checks.shape("residual", residual, out_shape)
        if out is None:
            out = self.new_output(out_shape, self._out_dtype, dev)
            given_out = False
        else:
            checks.tensor("out", out, self._out_dtype, dev)
            checks.shape("out", out, out_shape)
            given_out = True
        if M == 0 or N == 0:
            return out
        if K == 0:
            return self._empty_sum(out, M, N, bias_gate, bias_up, residual, beta)
        lda, a_ptr = checks.matrix("x", x, M, K, self._size)
        ldb, b_ptr = checks.matrix("weight", weight, packed_rows, K, self._size)
        ldd, d_ptr = checks.matrix("out", out, M, N, self._out_size)
        ldc, c_ptr = (0, 0) if residual is None else checks.matrix("residual", residual, M, N, self._res_size)
        if given_out:
            spans = [("x", a_ptr, a_ptr + (lda * (M - 1) + K) * self._size),
                     ("weight", b_ptr, b_ptr + (ldb * (packed_rows - 1) + K) * self._size)]
            spans += [(name, p, p + N * self._bias_size) for name, p in (("bias_gate", bg_ptr), ("bias_up", bu_ptr))
                      if p]
            if c_ptr and (c_ptr != d_ptr or ldc != ldd or self._res_size != self._out_size):
                spans.append(("residual", c_ptr, c_ptr + (ldc * (M - 1) + N) * self._res_size))
            checks.refuse_overlap(spans, (d_ptr, d_ptr + (ldd * (M - 1) + N) * self._out_size))
        _, swizzle, raster, _, _, pdl = launch.abi
        problem = self._pack(M, N, K, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, d_ptr, ldd, bg_ptr, bu_ptr, alpha, beta,
                             swizzle, raster, pdl, dev, 0, 0, raw_stream(dev))
        self.launch(problem, dev, M, N, K)
        return out

    def _empty_sum(self, out, M, N, bias_gate, bias_up, residual, beta):
        """K == 0: the products are empty sums (zero), then the epilogue, as F.linear would give."""
        gate = torch.zeros(N, dtype=torch.float32, device=out.device)
        up = torch.zeros(N, dtype=torch.float32, device=out.device)
        if bias_gate is not None:
            gate += bias_gate.float()
        if bias_up is not None:
            up += bias_up.float()
        acc = (TORCH_ACTIVATIONS[self.spec.activation](gate) * up).expand(M, N)
        if residual is not None:
            acc = acc + beta * residual.reshape(M, N).float()
        out.copy_(acc.reshape(out.shape))
        return out
