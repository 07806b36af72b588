"""Argument checks shared by the ops: each raises TypeError/ValueError naming the argument, before
any launch, and costs a few attribute reads when the argument is fine (they run on every call)."""
from __future__ import annotations

import math

import torch

ALIGN_BYTES = 16          # TMA: base addresses and row strides are multiples of 16 bytes
INT32_LIMIT = 1 << 31     # CUTLASS problem shapes are int


def tensor(name: str, t, dtype: torch.dtype, dev: int) -> None:
    """``t`` is a tensor of ``dtype`` on CUDA device ``dev``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype is not dtype:
        raise TypeError(f"{name} has dtype {t.dtype}, but this kernel takes {dtype}")
    if t.get_device() != dev:
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


def row_major(name: str, t: torch.Tensor, rows: int, cols: int) -> int:
    """A [rows, cols] matrix with unit column stride that TMA can read: returns its row stride."""
    if cols > 1 and t.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dim (strides {t.stride()}); call .contiguous()")
    ld = t.stride(0) if rows > 1 else cols
    if (ld * t.element_size()) % ALIGN_BYTES:
        raise ValueError(f"{name} row stride {ld} elements is not a multiple of {ALIGN_BYTES} bytes (TMA needs "
                         f"it): the last dim must be a multiple of {ALIGN_BYTES // t.element_size()}")
    if rows > 1 and ld < cols:
        raise ValueError(f"{name} rows overlap (row stride {ld} < {cols})")
    if t.data_ptr() % ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {ALIGN_BYTES}-byte aligned (TMA needs it); "
                         f"pass a fresh or .contiguous() tensor")
    return ld


def vector(name: str, t, length: int, dtype: torch.dtype, dev: int) -> int:
    """A contiguous, aligned [length] vector: returns its data pointer."""
    tensor(name, t, dtype, dev)
    if t.shape != (length,):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected ({length},)")
    if length > 1 and t.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous")
    if t.data_ptr() % ALIGN_BYTES:
        raise ValueError(f"{name} data pointer is not {ALIGN_BYTES}-byte aligned; pass a fresh tensor")
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


def dims_fit(**dims: int) -> None:
    for name, value in dims.items():
        if value >= INT32_LIMIT:
            raise ValueError(f"{name} = {value} does not fit the kernel's 32-bit problem shape (< 2**31)")


def _byte_span(t: torch.Tensor):
    lo = t.data_ptr()
    if t.is_contiguous():
        return lo, lo + t.numel() * t.element_size()
    extent = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()) if n > 0)
    return lo, lo + extent * t.element_size()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory ``a`` and ``b`` can touch intersects (conservative for strided views)."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    a_lo, a_hi = _byte_span(a)
    b_lo, b_hi = _byte_span(b)
    return a_lo < b_hi and b_lo < a_hi


def same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()


def refuse_grad(op: str, *tensors) -> None:
    """fused-gemm kernels have no backward: an input that wants a gradient is an error, never a
    silently detached output."""
    if torch.is_grad_enabled():
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                raise RuntimeError(
                    f"fused_gemm.{op}: an input requires grad, but fused-gemm kernels have no backward "
                    "(inference only). Run under torch.no_grad() / torch.inference_mode(), or detach the input")
