"""The weight formats Int4Op reads, one class each: what the kernel's (w, scales, zeros, group_size)
ABI fields hold for an int4 weight (Int4Weight) and for an fp8 weight (Fp8Weight), how a call's
tensors are checked against them (TypeError/ValueError naming the argument) and which bytes they
occupy (for the overlap check against ``out``).  Int4Op picks the format from its spec's weight."""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from .. import checks
from ..checks import ALIGN_BYTES
from ..generator.int4 import Int4Spec
from .weight import check_group_size, check_shape

Tensor = torch.Tensor
FP8 = torch.float8_e4m3fn
Span = Tuple[str, int, int]
FP8_N_MULTIPLE = 8        # the output's rows: N 16-bit values must fill whole 16-byte TMA units
FP8_K_MULTIPLE = 16       # the weight's rows: K e4m3 values (bytes), in 16-byte TMA units


class Int4Format:
    """packed uint8 [N, K/2] (codes reordered by quantize_int4), scales (and zeros, for u4) [K/group, N]
    in x's dtype, any group size the kernel's k-tile divides."""
    op_name = "int4_linear"

    def __init__(self, spec: Int4Spec, dtype: torch.dtype):
        self.spec = spec
        self._dtype = dtype
        self._zeros = spec.weight == "u4"

    def check(self, packed, scales, zeros, group_size: int, K: int, dev: int) -> int:
        """Checks the weight's tensors for x's K on device ``dev``; returns N."""
        spec = self.spec
        if not isinstance(packed, Tensor) or packed.dtype is not torch.uint8 or packed.get_device() != dev:
            checks.tensor("w.packed", packed, torch.uint8, dev)
        if packed.dim() != 2 or packed.shape[1] * 2 != K:
            raise ValueError(f"w.packed has shape {tuple(packed.shape)}, which does not match x's K = {K} "
                             f"(expected [N, K/2] = [N, {K // 2}])")
        N = packed.shape[0]
        check_shape(N, K, "w")
        check_group_size(group_size, K, "w.group_size")
        if not spec.supports_group(group_size, K):
            raise ValueError(f"w.group_size {group_size}: {spec.uri} cannot take groups of that size (a k-tile must "
                             "divide them; the decode kernel takes multiples of 32)")
        groups = K // group_size
        for name, t, wanted in (("w.scales", scales, True), ("w.zeros", zeros, self._zeros)):
            if not wanted:
                if t is not None:
                    raise ValueError(f"{name} was given, but {spec.uri} is a symmetric (s4) kernel")
                continue
            if t is None:
                raise ValueError(f"{name} is required: {spec.uri} dequantises with zero offsets (u4)")
            if not isinstance(t, Tensor) or t.dtype is not self._dtype or t.get_device() != dev:
                if isinstance(t, Tensor) and t.dtype is not self._dtype:
                    raise TypeError(f"{name} has dtype {t.dtype}, but x is {self._dtype}: scales are in the "
                                    "activations' dtype (quantize_int4(..., dtype=x.dtype))")
                checks.tensor(name, t, self._dtype, dev)
            if t.shape != (groups, N):
                raise ValueError(f"{name} has shape {tuple(t.shape)}, expected [K/group_size, N] = [{groups}, {N}]")
            if not t.is_contiguous() or t.data_ptr() % ALIGN_BYTES:
                raise ValueError(f"{name} must be contiguous and 16-byte aligned (TMA reads it)")
        if not packed.is_contiguous() or packed.data_ptr() % ALIGN_BYTES:
            raise ValueError("w.packed must be contiguous and 16-byte aligned (TMA reads it)")
        return N

    def spans(self, packed, scales, zeros: Optional[Tensor], group_size: int, N: int, K: int) -> List[Span]:
        w_ptr, s_ptr = packed.data_ptr(), scales.data_ptr()
        scale_bytes = K // group_size * N * self._dtype.itemsize
        spans = [("w.packed", w_ptr, w_ptr + N * K // 2), ("w.scales", s_ptr, s_ptr + scale_bytes)]
        if zeros is not None:
            z_ptr = zeros.data_ptr()
            spans.append(("w.zeros", z_ptr, z_ptr + scale_bytes))
        return spans


class Fp8Format:
    """weight float8_e4m3fn [N, K] row-major (contiguous), scale float32 [N] (one per output channel,
    applied by the epilogue), no zeros, group size K."""
    op_name = "fp8_weight_linear"

    def __init__(self, spec: Int4Spec, dtype: torch.dtype):
        self.spec = spec

    def check(self, weight, scale, zeros, group_size: int, K: int, dev: int) -> int:
        """Checks the weight's tensors for x's K on device ``dev``; returns N."""
        if not isinstance(weight, Tensor) or weight.dtype is not FP8 or weight.get_device() != dev:
            checks.tensor("w.weight", weight, FP8, dev)
        if weight.dim() != 2 or weight.shape[1] != K:
            raise ValueError(f"w.weight has shape {tuple(weight.shape)}, which does not match x's K = {K} "
                             f"(expected [N, K] = [N, {K}])")
        N = weight.shape[0]
        if N <= 0 or N % FP8_N_MULTIPLE:
            raise ValueError(f"w.weight has N = {N} output features, which must be a positive multiple of "
                             f"{FP8_N_MULTIPLE} (the output's rows are stored 16 bytes at a time)")
        if K <= 0 or K % FP8_K_MULTIPLE:
            raise ValueError(f"w.weight has K = {K}, which must be a positive multiple of {FP8_K_MULTIPLE} (its rows "
                             "are read 16 bytes at a time)")
        if zeros is not None:
            raise ValueError(f"w.zeros was given, but {self.spec.uri} is an fp8 kernel (no zero offsets)")
        if group_size != K:
            raise ValueError(f"w.group_size {group_size}: an fp8 weight has one scale per output channel "
                             f"(group_size = K = {K})")
        checks.vector("w.scale", scale, N, torch.float32, dev)
        if not weight.is_contiguous() or weight.data_ptr() % ALIGN_BYTES:
            raise ValueError("w.weight must be contiguous and 16-byte aligned (TMA reads it); call .contiguous()")
        return N

    def spans(self, weight, scale, zeros, group_size: int, N: int, K: int) -> List[Span]:
        w_ptr, s_ptr = weight.data_ptr(), scale.data_ptr()
        return [("w.weight", w_ptr, w_ptr + N * K), ("w.scale", s_ptr, s_ptr + 4 * N)]


def weight_format(spec: Int4Spec, dtype: torch.dtype):
    return (Fp8Format if spec.fp8_weight else Int4Format)(spec, dtype)
