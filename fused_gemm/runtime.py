"""GemmOp: one compiled kernel, called on torch tensors.

Every argument is checked before launch (type, dtype, device, shape, strides, the 16-byte
alignment TMA needs, the GPU's arch) and a bad one raises TypeError/ValueError naming it.  The
launch path does no sync, no cudaMalloc and no host work that grows with the data, so it can be
captured in a CUDA graph; what does not depend on the call (library, arch check, workspace) is
looked up once and cached.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import torch

from .generator import GemmSpec
from .library import PROBLEM, STATUS_NAMES, KernelLibrary

_PACK = PROBLEM.pack_into

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ARCH_CAPABILITY = {"sm90a": (9, 0)}
_ALIGN_BYTES = 16  # TMA: base addresses and row strides are multiples of 16 bytes

try:  # the raw-stream getter skips building a torch.cuda.Stream object on every call
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older/newer torch
    def _raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream


_RASTER = {"heuristic": 0, "along_m": 1, "along_n": 2}
_DECOMPOSITION = {"heuristic": 0, "data_parallel": 1, "split_k": 2, "stream_k": 3}
_REDUCTION = {"deterministic": 0, "nondeterministic": 1}


@dataclass(frozen=True)
class LaunchOptions:
    """Runtime knobs of the tile scheduler: no recompile, chosen per shape by the heuristics.

    splits/decomposition/reduction apply to stream-K kernels; swizzle/raster to all.  pdl launches
    with programmatic dependent launch, so the kernel's prologue overlaps the previous kernel.
    Deterministic reduction (the default) keeps split-K results bit-identical run to run.
    """
    splits: int = 1
    swizzle: int = 1
    raster: str = "heuristic"
    decomposition: str = "heuristic"
    reduction: str = "deterministic"
    pdl: bool = False
    abi: Tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.splits, int) or not 1 <= self.splits <= 64:
            raise ValueError(f"launch.splits must be an int in [1, 64], got {self.splits!r}")
        if self.swizzle not in (1, 2, 4, 8):
            raise ValueError(f"launch.swizzle must be 1, 2, 4 or 8, got {self.swizzle!r}")
        for name, table in (("raster", _RASTER), ("decomposition", _DECOMPOSITION), ("reduction", _REDUCTION)):
            if getattr(self, name) not in table:
                raise ValueError(f"launch.{name} must be one of {list(table)}, got {getattr(self, name)!r}")
        object.__setattr__(self, "abi", (self.splits, self.swizzle, _RASTER[self.raster],
                                         _DECOMPOSITION[self.decomposition], _REDUCTION[self.reduction],
                                         int(bool(self.pdl))))


DEFAULT_LAUNCH = LaunchOptions()


try:  # skips torch.cuda.current_device()'s lazy-init check on every call
    _current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover
    _current_device = torch.cuda.current_device


class FusedGemmError(RuntimeError):
    """The kernel refused the problem or its launch failed (after Python-side validation)."""


def _tensor(name: str, t, dtype: torch.dtype, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype}, but this kernel takes {dtype}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, but x is on {device}")


def _aligned(name: str, t: torch.Tensor) -> None:
    if t.data_ptr() % _ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {_ALIGN_BYTES}-byte aligned (TMA needs it); "
                         f"pass a fresh or .contiguous() tensor")


def _row_major(name: str, t: torch.Tensor, rows: int, cols: int) -> int:
    """Checks a [rows, cols] view with unit column stride; returns its row stride in elements."""
    if tuple(t.shape) != (rows, cols):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {(rows, cols)}")
    if cols > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dim (stride {t.stride()}); call .contiguous()")
    ld = t.stride(0) if rows > 1 else cols
    if (ld * t.element_size()) % _ALIGN_BYTES:
        raise ValueError(f"{name} row stride {ld} elements is not a multiple of {_ALIGN_BYTES} bytes "
                         f"(TMA needs it): the last dim must be a multiple of {_ALIGN_BYTES // t.element_size()}")
    if rows > 1 and ld < cols:
        raise ValueError(f"{name} rows overlap (row stride {ld} < {cols})")
    return ld


def _flat2d(name: str, t: torch.Tensor, cols: int) -> torch.Tensor:
    if t.dim() == 2:
        return t
    if t.dim() == 0 or t.shape[-1] != cols:
        raise ValueError(f"{name} has shape {tuple(t.shape)}; its last dim must be {cols}")
    try:
        return t.view(-1, cols)
    except RuntimeError:
        raise ValueError(f"{name} with shape {tuple(t.shape)} and strides {t.stride()} cannot be "
                         f"flattened to [-1, {cols}] without a copy; call .contiguous()") from None


def _output_matrix(name: str, t, dtype: torch.dtype, device: torch.device, lead, rows: int, cols: int):
    """An [..., cols] output-shaped tensor (out, residual): its [rows, cols] view and row stride."""
    _tensor(name, t, dtype, device)
    if tuple(t.shape) != (*lead, cols):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {(*lead, cols)}")
    t2 = _flat2d(name, t, cols)
    ld = _row_major(name, t2, rows, cols)
    _aligned(name, t2)
    return t2, ld


def _vector(name: str, t, length: int, dtype: torch.dtype, device: torch.device) -> int:
    _tensor(name, t, dtype, device)
    if tuple(t.shape) != (length,):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected ({length},)")
    if length > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous")
    _aligned(name, t)
    return t.data_ptr()


class _Workspace:
    """One growable scratch buffer per device, shared by every op (stream-K partials, locks)."""
    buffers: Dict[int, torch.Tensor] = {}

    @classmethod
    def get(cls, device: torch.device, nbytes: int) -> Tuple[int, int]:
        buf = cls.buffers.get(device.index)
        if buf is None or buf.numel() < nbytes:
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    f"fused-gemm needs a {nbytes}-byte workspace on {device} while a CUDA graph is being "
                    "captured; run the same call once before capturing (warm-up) so it is preallocated")
            size = max(nbytes, 1 << 20)
            buf = torch.empty(size, dtype=torch.uint8, device=device)
            cls.buffers[device.index] = buf
        return buf.data_ptr(), buf.numel()


class GemmOp:
    """A compiled fused GEMM.  ``op(x, weight, bias=..., residual=..., ...)`` returns D.

    x: [..., K] activations; weight: [N, K] (spec.b_layout 'nk', nn.Linear) or [K, N] ('kn');
    bias/col_scale: [N]; row_scale: [M] (M = x.numel() // K); residual: [..., N] (may be ``out``).

    The call takes one of two routes to the same launch: a fast path for the common case (every
    tensor contiguous and aligned, on the current device) made of cheap checks only, and the
    general path, which accepts strided inputs and turns any bad argument into a precise error.
    """

    def __init__(self, spec: GemmSpec, library: KernelLibrary):
        self.spec = spec
        self.library = library
        ep = spec.epilogue
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._out_dtype = TORCH_DTYPES[spec.out_dtype]
        self._res_dtype = TORCH_DTYPES[spec.residual_dtype]
        self._bias_dtype = TORCH_DTYPES[spec.bias_dtype]
        self._uses = {"bias": ep.bias, "residual": ep.residual, "row_scale": ep.row_scale,
                      "col_scale": ep.col_scale}
        self._absent = (not ep.bias, not ep.residual, not ep.row_scale, not ep.col_scale)
        self._nk = spec.b_layout == "nk"
        self._k_align = _ALIGN_BYTES // self._dtype.itemsize
        self._n_align = _ALIGN_BYTES // self._out_dtype.itemsize
        self._stream_k = spec.config.scheduler == "stream_k"
        self._ws_sizes: Dict[tuple, int] = {}
        self._devices: set = set()          # device ordinals whose arch was checked
        self._fg_run = library._fg_run
        self._thread_buffer = library.thread_buffer

    def __repr__(self) -> str:
        return f"GemmOp({self.spec.uri})"

    def _check_arch(self, x) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        device = x.device
        if device.type != "cuda":
            raise ValueError(f"x is on {device}; fused-gemm kernels run on CUDA devices")
        want = ARCH_CAPABILITY[self.spec.arch]
        have = torch.cuda.get_device_capability(device)
        if have != want:
            raise ValueError(f"x is on {device} ({torch.cuda.get_device_name(device)}, sm_{have[0]}{have[1]}), "
                             f"but this kernel is built for {self.spec.arch}")
        self._devices.add(device.index)

    def _check_presence(self, **given) -> None:
        for name, value in given.items():
            if self._uses[name] and value is None:
                raise ValueError(f"{name} is required: this kernel's epilogue is {self.spec.epilogue.name!r}")
            if not self._uses[name] and value is not None:
                raise ValueError(f"{name} was given, but this kernel's epilogue ({self.spec.epilogue.name!r}) "
                                 f"has no {name} step")

    def __call__(self, x, weight, bias=None, residual=None, *, row_scale=None, col_scale=None,
                 alpha: float = 1.0, beta: float = 1.0, out: Optional[torch.Tensor] = None,
                 launch: LaunchOptions = DEFAULT_LAUNCH) -> torch.Tensor:
        try:
            dev = x.get_device()
        except AttributeError:
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}") from None
        if dev not in self._devices:
            self._check_arch(x)
        if (bias is None, residual is None, row_scale is None, col_scale is None) != self._absent:
            self._check_presence(bias=bias, residual=residual, row_scale=row_scale, col_scale=col_scale)
        fast = self._fast_fields(x, weight, bias, residual, row_scale, col_scale, alpha, beta, out, launch, dev)
        if fast is None:
            return self._general(x, weight, bias, residual, row_scale, col_scale, alpha, beta, out, launch)
        out, fields = fast
        if fields is not None:
            self._launch(fields, dev)
        return out

    def _fast_fields(self, x, weight, bias, residual, row_scale, col_scale, alpha, beta, out, launch, dev):
        """The packed problem if every argument is plainly valid (contiguous, aligned, current
        device), else None.  Only cheap checks: no error messages are built here."""
        dt = self._dtype
        xs = x.shape
        if (x.dtype is not dt or not xs or not x.is_contiguous() or x.data_ptr() % _ALIGN_BYTES
                or not isinstance(weight, torch.Tensor) or weight.dtype is not dt or weight.get_device() != dev
                or weight.dim() != 2 or not weight.is_contiguous() or weight.data_ptr() % _ALIGN_BYTES
                or type(launch) is not LaunchOptions or dev != _current_device()):
            return None
        K = xs[-1]
        N, Kw = weight.shape if self._nk else weight.shape[::-1]
        if Kw != K or K == 0 or K % self._k_align or N % self._n_align:
            return None
        M = x.numel() // K
        if out is None:
            out = torch.empty((*xs[:-1], N), dtype=self._out_dtype, device=dev)
        elif not _plain(out, self._out_dtype, dev, (*xs[:-1], N)):
            return None
        if M == 0:
            return out, None
        c_ptr = 0
        if residual is not None:
            if not _plain(residual, self._res_dtype, dev, (*xs[:-1], N)):
                return None
            c_ptr = residual.data_ptr()
        bias_ptr = row_ptr = col_ptr = 0
        if bias is not None:
            if not _plain(bias, self._bias_dtype, dev, (N,)):
                return None
            bias_ptr = bias.data_ptr()
        if row_scale is not None:
            if not _plain(row_scale, torch.float32, dev, (M,)):
                return None
            row_ptr = row_scale.data_ptr()
        if col_scale is not None:
            if not _plain(col_scale, torch.float32, dev, (N,)):
                return None
            col_ptr = col_scale.data_ptr()
        if type(alpha) not in (float, int) or type(beta) not in (float, int) or \
                not (math.isfinite(alpha) and math.isfinite(beta)):
            return None
        fields = (M, N, K, x.data_ptr(), K, weight.data_ptr(), K if self._nk else N, c_ptr, N,
                  out.data_ptr(), N, bias_ptr, row_ptr, col_ptr, alpha, beta, launch)
        return out, fields

    def _launch(self, fields, dev: int) -> None:
        launch = fields[-1]
        ws_ptr = ws_bytes = 0
        if self._stream_k:
            ws_ptr, ws_bytes = self._workspace(fields, launch, dev)
        buf, addr = self._thread_buffer()
        _PACK(buf, 0, *fields[:-1], *launch.abi, dev, 0, ws_ptr, ws_bytes, _raw_stream(dev))
        rc = self._fg_run(addr)
        if rc:
            raise FusedGemmError(f"{self.spec.uri}: {STATUS_NAMES.get(rc, rc)}: {self.library.last_error()} "
                                 f"(M={fields[0]}, N={fields[1]}, K={fields[2]})")

    def _workspace(self, problem, launch: LaunchOptions, dev: int) -> Tuple[int, int]:
        key = (problem[0], problem[1], problem[2], launch)
        need = self._ws_sizes.get(key)
        if need is None:
            need = self._ws_sizes[key] = self.library.workspace_size(*problem[:-1], *launch.abi, dev, 0, 0, 0, 0)
        return _Workspace.get(torch.device("cuda", dev), need) if need else (0, 0)

    def _general(self, x, weight, bias, residual, row_scale, col_scale, alpha, beta, out, launch):
        """Strided inputs, another device than the current one, and every error message."""
        device = x.device
        if x.dtype != self._dtype:
            raise TypeError(f"x has dtype {x.dtype}, but this kernel takes {self._dtype}")
        if x.dim() < 1:
            raise ValueError("x must have at least one dim ([..., K])")
        _tensor("weight", weight, self._dtype, device)
        if weight.dim() != 2:
            raise ValueError(f"weight must be 2-D, got shape {tuple(weight.shape)}")
        K = x.shape[-1]
        nk = self._nk
        N = weight.shape[0] if nk else weight.shape[1]
        if (weight.shape[1] if nk else weight.shape[0]) != K:
            raise ValueError(f"weight has shape {tuple(weight.shape)}, which does not match x's K={K} "
                             f"({'[N, K]' if nk else '[K, N]'} expected)")
        if K == 0:
            raise ValueError("x has K = 0: nothing to multiply")
        lead = x.shape[:-1]
        x2 = _flat2d("x", x, K)
        M = x2.shape[0]
        lda = _row_major("x", x2, M, K)
        ldb = _row_major("weight", weight, *((N, K) if nk else (K, N)))
        _aligned("x", x2)
        _aligned("weight", weight)
        if N % self._n_align:
            raise ValueError(f"weight gives N = {N}, which must be a multiple of {self._n_align} so that each "
                             f"{self._out_dtype} output row is 16-byte aligned")
        if out is None:
            out = torch.empty((*lead, N), dtype=self._out_dtype, device=device)
        d2, ldd = _output_matrix("out", out, self._out_dtype, device, lead, M, N)
        if M == 0:
            return out
        c_ptr, ldc = 0, 0
        if residual is not None:
            c2, ldc = _output_matrix("residual", residual, self._res_dtype, device, lead, M, N)
            c_ptr = c2.data_ptr()
        bias_ptr = _vector("bias", bias, N, self._bias_dtype, device) if bias is not None else 0
        row_ptr = _vector("row_scale", row_scale, M, torch.float32, device) if row_scale is not None else 0
        col_ptr = _vector("col_scale", col_scale, N, torch.float32, device) if col_scale is not None else 0
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise TypeError(f"{name} must be a finite Python number, got {value!r}")
        if not isinstance(launch, LaunchOptions):
            raise TypeError(f"launch must be a fused_gemm.LaunchOptions, got {type(launch).__name__}")
        fields = (M, N, K, x2.data_ptr(), lda, weight.data_ptr(), ldb, c_ptr, ldc, d2.data_ptr(), ldd,
                  bias_ptr, row_ptr, col_ptr, float(alpha), float(beta), launch)
        with torch.cuda.device(device):   # the library launches on the current device: make it x's
            self._launch(fields, device.index)
        return out


def _plain(t, dtype: torch.dtype, dev: int, shape) -> bool:
    """Contiguous, aligned, right dtype/device/shape: the fast path's test for an extra operand."""
    return (isinstance(t, torch.Tensor) and t.dtype is dtype and t.get_device() == dev and t.shape == shape
            and t.is_contiguous() and not t.data_ptr() % _ALIGN_BYTES)
