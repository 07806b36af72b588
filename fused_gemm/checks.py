"""Argument checks shared by the ops: each raises TypeError/ValueError naming the argument, before
any launch, and costs a few attribute reads when the argument is fine (they run on every call)."""
from __future__ import annotations

import math
from typing import Optional

import torch

ALIGN_BYTES = 16          # TMA: base addresses and row strides are multiples of 16 bytes
INT32_LIMIT = 1 << 31     # CUTLASS problem shapes are int


def tensor(name: str, t, dtype: torch.dtype, dev: Optional[int]) -> None:
    """``t`` is a tensor of ``dtype`` on CUDA device ``dev`` (any device if None)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype is not dtype:
        raise TypeError(f"{name} has dtype {t.dtype}, but this kernel takes {dtype}")
    if dev is not None and t.get_device() != dev:
        raise ValueError(f"{name} is on {t.device}, but x is on cuda:{dev}")


def shape(name: str, t: torch.Tensor, expected) -> None:
    if t.shape != expected:
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(expected)}")


def flat2d(name: str, t: torch.Tensor, cols: int) -> torch.Tensor:
    """An [..., cols] tensor as [rows, cols], without a copy."""
    if t.dim() == 2:
        return t
    try:
        return t.view(-1, cols)
    except RuntimeError:
        raise ValueError(f"{name} with shape {tuple(t.shape)} and strides {t.stride()} cannot be "
                         f"flattened to [-1, {cols}] without a copy; call .contiguous()") from None


def row_major(name: str, t: torch.Tensor, rows: int, cols: int, itemsize: int):
    """A [rows, cols] matrix with unit column stride that TMA can read: (row stride, data pointer)."""
    stride = t.stride()
    if cols > 1 and stride[1] != 1:
        raise ValueError(f"{name} must be contiguous in its last dim (strides {stride}); call .contiguous()")
    ld = stride[0] if rows > 1 else cols
    if (ld * itemsize) % ALIGN_BYTES:
        raise ValueError(f"{name} row stride {ld} elements is not a multiple of {ALIGN_BYTES} bytes (TMA needs "
                         f"it): the last dim must be a multiple of {ALIGN_BYTES // itemsize}")
    if rows > 1 and ld < cols:
        raise ValueError(f"{name} rows overlap (row stride {ld} < {cols})")
    ptr = t.data_ptr()
    if ptr % ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {ALIGN_BYTES}-byte aligned (TMA needs it); "
                         f"pass a fresh or .contiguous() tensor")
    return ld, ptr


def matrix(name: str, t: torch.Tensor, rows: int, cols: int, itemsize: int):
    """An [..., cols] tensor read as a [rows, cols] TMA-readable matrix: (row stride, data pointer).
    A contiguous, aligned tensor is settled by one call; anything else gets the full check."""
    ptr = t.data_ptr()
    if t.is_contiguous() and not (cols * itemsize % ALIGN_BYTES or ptr % ALIGN_BYTES):
        return cols, ptr
    return row_major(name, flat2d(name, t, cols), rows, cols, itemsize)


def vector(name: str, t, length: int, dtype: torch.dtype, dev: int) -> int:
    """A contiguous, aligned [length] vector: returns its data pointer."""
    tensor(name, t, dtype, dev)
    shape = t.shape
    if len(shape) != 1 or shape[0] != length:
        raise ValueError(f"{name} has shape {tuple(shape)}, expected ({length},)")
    if length > 1 and t.stride()[0] != 1:
        raise ValueError(f"{name} must be contiguous")
    ptr = t.data_ptr()
    if ptr % ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {ALIGN_BYTES}-byte aligned; pass a fresh tensor")
    return ptr


def device_scalar(name: str, t, dev: int) -> int:
    """One fp32 on CUDA device ``dev`` that a kernel reads on the GPU (a per-tensor scale: reading
    it on the host would synchronise), shape () or (1,): returns its data pointer."""
    tensor(name, t, torch.float32, dev)
    if t.dim() > 1 or t.numel() != 1:
        raise ValueError(f"{name} has shape {tuple(t.shape)}; this kernel takes one value (a per-tensor scale), "
                         "shape () or (1,)")
    return t.data_ptr()


def scalar(name: str, value) -> float:
    """A finite real number (a tensor is refused: reading it would synchronise)."""
    if type(value) is not float:
        if isinstance(value, (bool, str, torch.Tensor)) or not hasattr(value, "__float__"):
            raise TypeError(f"{name} must be a real Python number, got {type(value).__name__}")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def dims_fit(m: int, n: int, k: int) -> None:
    if m >= INT32_LIMIT or n >= INT32_LIMIT or k >= INT32_LIMIT:
        name, value = next((nm, v) for nm, v in (("M", m), ("N", n), ("K", k)) if v >= INT32_LIMIT)
        raise ValueError(f"{name} = {value} does not fit the kernel's 32-bit problem shape (< 2**31)")


def overlapping(spans, out_span) -> Optional[str]:
    """The name of the first (name, lo, hi) byte span that intersects ``out_span``, or None.
    Spans come from row strides and shapes, so strided views count conservatively."""
    lo, hi = out_span
    for name, a, b in spans:
        if a < hi and lo < b:
            return name
    return None


def refuse_overlap(spans, out_span) -> None:
    """Raises ValueError if ``out_span`` meets any (name, lo, hi) input span: the kernel would read
    what it writes.  A residual is in place only as exactly ``out`` (left out of ``spans``)."""
    hit = overlapping(spans, out_span)
    if hit == "residual":
        raise ValueError("residual overlaps out without being exactly out (an in-place residual is "
                         "out=residual, the same tensor)")
    if hit is not None:
        raise ValueError(f"out overlaps {hit}: the kernel would read what it writes")


def leading_shape(x) -> torch.Size:
    """x's shape, which must have a last dim K (the prologue every [..., K] op shares)."""
    try:
        xs = x.shape
    except AttributeError:
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}") from None
    if not xs:
        raise ValueError("x must have at least one dim ([..., K])")
    return xs


def output_dtype(out, out_dtype: Optional[torch.dtype], default: torch.dtype) -> torch.dtype:
    """The dtype an op writes: out's (out_dtype, if also given, must agree), else out_dtype, else default."""
    if out is not None:
        try:
            if out_dtype is not None and out_dtype is not out.dtype:
                raise TypeError(f"out_dtype {out_dtype} disagrees with out.dtype {out.dtype}")
            return out.dtype
        except AttributeError:
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}") from None
    return default if out_dtype is None else out_dtype


def refuse_grad(op: str, *tensors) -> None:
    """fused-gemm kernels have no backward: an input that wants a gradient is an error, never a
    silently detached output."""
    if torch.is_grad_enabled():
        for t in tensors:
            if getattr(t, "requires_grad", False):
                raise RuntimeError(
                    f"fused_gemm.{op}: an input requires grad, but fused-gemm kernels have no backward "
                    "(inference only). Run under torch.no_grad() / torch.inference_mode(), or detach the input")


def head_dim_last(name: str, t: torch.Tensor, itemsize: int, limit: Optional[int] = None) -> tuple:
    """The strides of a [..., H, D] tensor whose rows are read 16 bytes at a time (TMA, cp.async):
    D contiguous, every other stride and the data pointer 16-byte aligned (and below ``limit``).
    A dim of size 1 may carry any stride (its coordinate is always 0): it gets the head dim's."""
    shape, stride = t.shape, t.stride()
    if 1 in shape or 0 in shape:     # per call: the common shapes skip this comprehension
        stride = tuple(st if size > 1 else shape[-1] for st, size in zip(stride, shape))
    if shape[-1] > 1 and stride[-1] != 1:
        raise ValueError(f"{name} must be contiguous in its head dim (strides {stride}); call .contiguous()")
    align = ALIGN_BYTES // itemsize
    for s in stride[:-1]:
        if s % align:
            raise ValueError(f"{name} strides {stride} must be multiples of {align} elements ({ALIGN_BYTES} bytes)")
        if limit is not None and s >= limit:
            raise ValueError(f"{name} stride {s} is too large (the kernel's strides are 32-bit)")
    if t.data_ptr() % ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {ALIGN_BYTES}-byte aligned; pass a fresh or .contiguous() "
                         "tensor")
    return stride
