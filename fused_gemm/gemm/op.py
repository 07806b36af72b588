"""GemmOp: one compiled fused GEMM, called on torch tensors.

One validation path: every call runs the same checks, in an order that costs a few attribute
reads when the arguments are fine and raises TypeError/ValueError naming the argument when one is
not, before any launch.  The launch path does no sync and no host work that grows with the data,
so it can be captured in a CUDA graph; stream-K's and split_k_parallel's workspace comes from torch's caching
allocator on the caller's stream (inside a capture, from the graph's own pool, which the graph keeps).
"""
from __future__ import annotations

from typing import Dict, Optional

import torch

from .. import checks
from ..checks import ALIGN_BYTES, INT32_LIMIT
from ..generator import DEFAULT_LAUNCH, GemmSpec, LaunchOptions
from ..generator.gemm.abi import PROBLEM
from ..generator.gemm.spec import SLICE_ALIGN, k_slices_fit
from ..kernel_op import DEVICES, TORCH_ACTIVATIONS, TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary
from ..torch_ops import _dispatch_modes, _is_compiling

# The order GemmOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("m", "n", "k", "a", "lda", "b", "ldb", "c", "ldc", "d", "ldd", "bias", "row_scale", "col_scale",
              "alpha", "beta", "splits", "swizzle", "raster", "decomposition", "reduction", "pdl", "device",
              "reserved", "workspace", "workspace_bytes", "stream")

# split_k_parallel (csrc/fused_gemm/splitk): the reduction owns 4 outputs of a row a thread (kVector)
REDUCE_VECTOR = 4
# The epilogue steps each scale argument serves: a vector, or one value on the GPU (per-tensor).
_SCALE_STEPS = {"row_scale": ("row_scale", "a_scale"), "col_scale": ("col_scale", "b_scale")}
_grad_enabled = torch.is_grad_enabled
_INF = float("inf")
Tensor = torch.Tensor


class GemmOp(KernelOp):
    """A compiled fused GEMM: ``op(x, weight, bias, activation, residual, *, alpha, beta, row_scale,
    col_scale, out_dtype, out, launch)`` returns D (the same arguments, in the same order, as
    ``fused_gemm.linear``; ``activation``, if given, must be the spec's).

    x: [..., K] activations; weight: [N, K] (spec.b_layout 'nk', nn.Linear) or [K, N] ('kn');
    bias/col_scale: [N]; row_scale: [M] (M = x.numel() // K); residual: [..., N] (may be ``out``).
    With a_scale / b_scale in the epilogue, row_scale / col_scale is one fp32 (shape () or (1,)) that
    the kernel reads on the GPU.  fp8 (e4m3) specs take float8_e4m3fn x and weight.
    """

    def __init__(self, spec: GemmSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        ep = spec.epilogue
        self._dtype = TORCH_DTYPES[spec.a_dtype]
        self._w_dtype = TORCH_DTYPES[spec.b_dtype]
        self._out_dtype = TORCH_DTYPES[spec.out_dtype]
        self._res_dtype = TORCH_DTYPES[spec.residual_dtype]
        self._bias_dtype = TORCH_DTYPES[spec.bias_dtype]
        self._a_scale, self._b_scale = ep.a_scale, ep.b_scale
        self._absent = (not ep.bias, not ep.residual, not (ep.row_scale or ep.a_scale),
                        not (ep.col_scale or ep.b_scale))
        self._more_inputs = ep.residual or ep.row_scale or ep.col_scale or ep.a_scale or ep.b_scale
        self._nk = spec.b_layout == "nk"
        self._in_size = self._dtype.itemsize
        self._w_size = self._w_dtype.itemsize
        self._out_size = self._out_dtype.itemsize
        self._res_size = self._res_dtype.itemsize
        self._bias_size = self._bias_dtype.itemsize
        # Kernels with a workspace from the caching allocator: stream-K's tile barriers and partials, split-K's
        # fp32 partials (the library sizes it).
        self._split_k = spec.split_k_parallel
        self._workspace_kernel = self._split_k or (not spec.decode and spec.config.scheduler == "stream_k")
        # The decode kernel reads nothing before griddepcontrol.wait but L2 prefetches: PDL is safe
        # after any kernel, so it is its default (the wgmma kernels take it per call).
        self._decode_tokens = spec.config.tokens if spec.decode else 0
        self._default_launch = LaunchOptions(pdl=True) if spec.decode and spec.pdl else DEFAULT_LAUNCH
        self._ws_sizes: Dict[tuple, int] = {}

    def _check_presence(self, **given) -> None:
        ep = self.spec.epilogue
        for name, value in given.items():
            uses = any(getattr(ep, step) for step in _SCALE_STEPS.get(name, (name,)))
            if uses and value is None:
                raise ValueError(f"{name} is required: this kernel's epilogue is {ep.name!r}")
            if not uses and value is not None:
                raise ValueError(f"{name} was given, but this kernel's epilogue ({ep.name!r}) has no {name} step")

    # -- calls ----------------------------------------------------------------------------------
    def __call__(self, x, weight, bias=None, activation: Optional[str] = None, residual=None, *, alpha=1.0,
                 beta=1.0, row_scale=None, col_scale=None, out_dtype: Optional[torch.dtype] = None,
                 out: Optional[torch.Tensor] = None, launch: Optional[LaunchOptions] = None) -> torch.Tensor:
        if activation is not None and activation != self.spec.epilogue.activation and \
                not (activation == "none" and self.spec.epilogue.activation == "identity"):
            raise ValueError(f"activation {activation!r} does not match this kernel's epilogue "
                             f"{self.spec.epilogue.name!r}")
        if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
            return self.run(x, weight, bias, residual, row_scale, col_scale, alpha, beta, out_dtype, out, launch)
        from .linear import dispatch_gemm   # torch.compile / export / tensor subclasses: one op in the graph
        return dispatch_gemm(self, x, weight, bias, residual, alpha, beta, row_scale, col_scale, out_dtype, out,
                             launch)

    def run(self, x, weight, bias, residual, row_scale, col_scale, alpha, beta, out_dtype, out, launch):
        """Validate, then launch on x's device's current stream.  Returns ``out`` (allocated if None).

        The one validation path of this op.  It runs on every call (a decode step makes hundreds),
        so the common tensors are checked inline, a few attribute reads each; every failing check
        raises right there, naming the argument, before anything is launched.
        """
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        dt = self._dtype
        if x.dtype is not dt:
            raise TypeError(f"x has dtype {x.dtype}, but this kernel takes {dt}")
        dev = x.get_device()
        if dev not in self._ready:
            self._first_use(x, dev)
        xs = x.shape
        ndim = len(xs)
        if not ndim:
            raise ValueError("x must have at least one dim ([..., K])")
        wdt = self._w_dtype
        if not isinstance(weight, Tensor) or weight.dtype is not wdt or weight.get_device() != dev:
            checks.tensor("weight", weight, wdt, dev)
        ws = weight.shape
        if len(ws) != 2:
            raise ValueError(f"weight must be 2-D, got shape {tuple(ws)}")
        K = xs[-1]
        if self._nk:
            N, Kw = ws
        else:
            Kw, N = ws
        if Kw != K:
            raise ValueError(f"weight has shape {tuple(ws)}, which does not match x's K={K} "
                             f"({'[N, K]' if self._nk else '[K, N]'} expected)")
        if ndim == 2:
            M = xs[0]
            out_shape = (M, N)
        else:
            lead = xs[:-1]
            M, out_shape = lead.numel(), (*lead, N)
        if M >= INT32_LIMIT or N >= INT32_LIMIT or K >= INT32_LIMIT:
            checks.dims_fit(M, N, K)
        if (bias is None, residual is None, row_scale is None, col_scale is None) != self._absent:
            self._check_presence(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
        if out_dtype is not None and out_dtype is not self._out_dtype:
            raise TypeError(f"out_dtype {out_dtype} is not this kernel's output dtype {self._out_dtype}")
        if launch is None:
            launch = self._default_launch
        elif type(launch) is not LaunchOptions:
            raise TypeError(f"launch must be a fused_gemm.LaunchOptions, got {type(launch).__name__}")
        if self._decode_tokens:
            self._check_decode(M, launch)
        elif self._split_k:
            self._check_split(N, K, launch)
        if launch.pdl and not self._supports_pdl:
            raise ValueError(f"launch.pdl=True, but {self.spec.uri} was built without grid-dependency control "
                             "(GemmSpec(pdl=False)); launch without PDL or use a pdl=True build")
        if type(alpha) is not float or not -_INF < alpha < _INF:
            alpha = checks.scalar("alpha", alpha)
        if type(beta) is not float or not -_INF < beta < _INF:
            beta = checks.scalar("beta", beta)
        given_out = out is not None
        if given_out:
            if not isinstance(out, Tensor) or out.dtype is not self._out_dtype or out.get_device() != dev:
                checks.tensor("out", out, self._out_dtype, dev)
            if out.shape != out_shape:
                checks.shape("out", out, out_shape)
        else:
            out = self.new_output(out_shape, self._out_dtype, dev)
        if _grad_enabled() and (x.requires_grad or weight.requires_grad or getattr(bias, "requires_grad", False)
                                or self._more_inputs):
            checks.refuse_grad("gemm", x, weight, bias, residual, row_scale, col_scale)
        bias_ptr = row_ptr = col_ptr = 0
        if bias is not None:
            if type(bias) is Tensor and bias.dtype is self._bias_dtype and bias.get_device() == dev and \
                    bias.shape == (N,) and bias.is_contiguous():
                bias_ptr = bias.data_ptr()
            if not bias_ptr or bias_ptr % ALIGN_BYTES:   # the general check: passes, or raises naming it
                bias_ptr = checks.vector("bias", bias, N, self._bias_dtype, dev)
        if residual is not None:
            checks.tensor("residual", residual, self._res_dtype, dev)
            checks.shape("residual", residual, out_shape)
        if row_scale is not None:
            row_ptr = (checks.device_scalar("row_scale", row_scale, dev) if self._a_scale else
                       checks.vector("row_scale", row_scale, M, torch.float32, dev))
        if col_scale is not None:
            col_ptr = (checks.device_scalar("col_scale", col_scale, dev) if self._b_scale else
                       checks.vector("col_scale", col_scale, N, torch.float32, dev))
        if M == 0 or N == 0:
            return out
        if K == 0:   # F.linear's convention: an empty sum is zero, then the epilogue
            return self._empty_sum(out, M, N, bias, residual, alpha, beta)
        # Operand layouts TMA can read: unit last-dim stride, 16-byte aligned rows and base.  A
        # contiguous operand is the common case, settled by one call; anything else gets the general check.
        a_ptr = x.data_ptr()
        if x.is_contiguous() and not (K * self._in_size % ALIGN_BYTES or a_ptr % ALIGN_BYTES):
            lda = K
        else:
            lda, a_ptr = checks.row_major("x", x if ndim == 2 else checks.flat2d("x", x, K), M, K, self._in_size)
        b_rows, b_cols = (N, K) if self._nk else (K, N)
        b_ptr = weight.data_ptr()
        if weight.is_contiguous() and not (b_cols * self._w_size % ALIGN_BYTES or b_ptr % ALIGN_BYTES):
            ldb = b_cols
        else:
            ldb, b_ptr = checks.row_major("weight", weight, b_rows, b_cols, self._w_size)
        if given_out:
            d2 = out if ndim == 2 else checks.flat2d("out", out, N)
            ldd, d_ptr = checks.row_major("out", d2, M, N, self._out_size)
        else:                  # ours: contiguous, and the caching allocator aligns blocks to 512 bytes
            if (N * self._out_size) % ALIGN_BYTES:
                raise ValueError(f"weight gives N = {N}, which must be a multiple of "
                                 f"{ALIGN_BYTES // self._out_size} so that each {self._out_dtype} output "
                                 "row is 16-byte aligned (TMA needs it)")
            ldd, d_ptr = N, out.data_ptr()
        c_ptr = ldc = 0
        if residual is not None:
            c2 = residual if ndim == 2 else checks.flat2d("residual", residual, N)
            ldc, c_ptr = checks.row_major("residual", c2, M, N, self._res_size)
        if given_out:   # byte spans from the row strides: integer arithmetic, no more tensor calls
            d_end = d_ptr + (ldd * (M - 1) + N) * self._out_size
            if (a_ptr < d_end and d_ptr < a_ptr + (lda * (M - 1) + K) * self._in_size) or \
                    (b_ptr < d_end and d_ptr < b_ptr + (ldb * (b_rows - 1) + b_cols) * self._w_size) or \
                    (bias_ptr and bias_ptr < d_end and d_ptr < bias_ptr + N * self._bias_size) or \
                    row_ptr or col_ptr or (c_ptr and (c_ptr != d_ptr or ldc != ldd or self._res_size != self._out_size)):
                self._check_aliasing(M, N, K, a_ptr, lda, b_ptr, ldb, b_rows, b_cols, c_ptr, ldc, d_ptr, ldd,
                                     bias_ptr, row_ptr, col_ptr)
        ws_ptr = ws_bytes = 0
        if self._workspace_kernel:   # kept alive (by this frame) until the launch is on the stream
            workspace = self._workspace((M, N, K, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, d_ptr, ldd, bias_ptr, row_ptr,
                                         col_ptr, alpha, beta), launch, dev)
            if workspace is not None:
                ws_ptr, ws_bytes = workspace.data_ptr(), workspace.numel()
        problem = self._pack(M, N, K, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, d_ptr, ldd, bias_ptr, row_ptr, col_ptr,
                             alpha, beta, *launch.abi, dev, 0, ws_ptr, ws_bytes, raw_stream(dev))
        self.launch(problem, dev, M, N, K)
        return out

    def _check_decode(self, M: int, launch: LaunchOptions) -> None:
        if M > self._decode_tokens:
            raise ValueError(f"x has M = {M} rows (tokens); this decode kernel ({self.spec.uri}) takes 1 to "
                             f"{self._decode_tokens}")
        if launch is not self._default_launch:   # the default needs no check (the decode hot path)
            self.check_decode_launch(launch)

    def _check_split(self, N: int, K: int, launch: LaunchOptions) -> None:
        if launch.splits > 1 and not k_slices_fit(K, launch.splits):
            raise ValueError(f"launch.splits={launch.splits} must cut K = {K} into equal slices of a multiple of "
                             f"{SLICE_ALIGN} elements (16-byte aligned, for TMA); splits=1 picks a count that does")
        if N % REDUCE_VECTOR:
            raise ValueError(f"weight gives N = {N}: a split_k_parallel kernel's reduction needs N a multiple of "
                             f"{REDUCE_VECTOR}")

    def _workspace(self, fields, launch: LaunchOptions, dev: int) -> Optional[torch.Tensor]:
        """Stream-K's or split-K's workspace, from the caching allocator on this stream: stream-ordered and
        capture-safe (inside a capture it comes from the graph's pool, which the graph keeps)."""
        key = (fields[0], fields[1], fields[2], launch, dev)   # the size depends on the SM count
        need = self._ws_sizes.get(key)
        if need is None:
            need = self._ws_sizes[key] = self.library.workspace_size(*fields, *launch.abi, dev, 0, 0, 0, 0)
        return torch.empty(need, dtype=torch.uint8, device=DEVICES[dev]) if need else None

    def _check_aliasing(self, M, N, K, a_ptr, lda, b_ptr, ldb, b_rows, b_cols, c_ptr, ldc, d_ptr, ldd, bias_ptr,
                        row_ptr, col_ptr) -> None:
        out_span = (d_ptr, d_ptr + (ldd * (M - 1) + N) * self._out_size)
        spans = [("x", a_ptr, a_ptr + (lda * (M - 1) + K) * self._in_size),
                 ("weight", b_ptr, b_ptr + (ldb * (b_rows - 1) + b_cols) * self._w_size)]
        if bias_ptr:
            spans.append(("bias", bias_ptr, bias_ptr + N * self._bias_size))
        if row_ptr:
            spans.append(("row_scale", row_ptr, row_ptr + (1 if self._a_scale else M) * 4))
        if col_ptr:
            spans.append(("col_scale", col_ptr, col_ptr + (1 if self._b_scale else N) * 4))
        if c_ptr and (c_ptr != d_ptr or ldc != ldd or self._res_size != self._out_size):   # out=residual: in place
            spans.append(("residual", c_ptr, c_ptr + (ldc * (M - 1) + N) * self._res_size))
        checks.refuse_overlap(spans, out_span)

    def _empty_sum(self, out, M, N, bias, residual, alpha, beta):
        acc = torch.zeros((M, N), dtype=torch.float32, device=out.device)
        if bias is not None:
            acc += bias.float()
        acc = TORCH_ACTIVATIONS[self.spec.epilogue.activation](acc)
        if residual is not None:
            acc += beta * residual.reshape(M, N).float()
        out.copy_(acc.view(out.shape))
        return out
