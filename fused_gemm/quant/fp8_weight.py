"""``Fp8Weight``: an fp8 (e4m3) weight [N, K] with one fp32 scale per output channel, what
``quantize_fp8_weight`` returns and both fp8 ops read:

    w = fused_gemm.quantize_fp8_weight(linear.weight)          # once, at load
    y = fused_gemm.fp8_weight_linear(x, w, bias, "silu")       # W8A16: bf16/fp16 activations
    wq, ws = w                                                 # W8A8: fp8_linear(xq, wq, xs, ws)

    dequant(W)[n, k] = weight[n, k] * scale[n]

It is a (weight, scale) named tuple, so one quantised copy serves W8A8 and W8A16, and code that
unpacks quantize_fp8_weight's result as a pair keeps working.  The weight is nn.Linear's layout as
it is (row-major [N, K], K contiguous; no reordering: see csrc/fused_gemm/fp8_weight).  Pure torch,
for load time: nothing here runs per call.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

Tensor = torch.Tensor
FP8 = torch.float8_e4m3fn


class _Fields(NamedTuple):
    weight: Tensor     # float8_e4m3fn [N, K]
    scale: Tensor      # float32 [N]


class Fp8Weight(_Fields):
    """``Fp8Weight(weight, scale)``: weight float8_e4m3fn [N, K]; scale float32, one per output
    channel ([N] or [N, 1]) or one for the whole tensor (shape () or (1,), as per-tensor fp8
    checkpoints store it), kept as a contiguous [N] vector (a per-tensor scale is repeated N times:
    the kernels read one scale per channel)."""
    __slots__ = ()

    def __new__(cls, weight: Tensor, scale: Tensor) -> "Fp8Weight":
        for name, t in (("weight", weight), ("scale", scale)):
            if not isinstance(t, Tensor):
                raise TypeError(f"Fp8Weight.{name} must be a torch.Tensor, got {type(t).__name__}")
        if weight.dtype is not FP8:
            raise TypeError(f"Fp8Weight.weight has dtype {weight.dtype}; expected torch.float8_e4m3fn "
                            "(fused_gemm.quantize_fp8_weight makes one from a bf16/fp16/fp32 weight)")
        if weight.dim() != 2:
            raise ValueError(f"Fp8Weight.weight must be 2-D [N, K], got shape {tuple(weight.shape)}")
        if scale.dtype is not torch.float32:
            raise TypeError(f"Fp8Weight.scale has dtype {scale.dtype}; scales are float32")
        if scale.device != weight.device:
            raise ValueError(f"Fp8Weight.scale is on {scale.device}, but weight is on {weight.device}")
        n = weight.shape[0]
        if scale.numel() == 1 and scale.dim() <= 1 and n != 1:
            scale = scale.reshape(1).expand(n)
        elif scale.numel() != n or scale.dim() > 2 or (scale.dim() == 2 and scale.shape[1] != 1):
            raise ValueError(f"Fp8Weight.scale has shape {tuple(scale.shape)}: expected one value per output channel "
                             f"([N] = [{n}] or [N, 1]) or one for the tensor")
        return super().__new__(cls, weight, scale.reshape(n).contiguous())

    @property
    def N(self) -> int:
        return self.weight.shape[0]

    @property
    def K(self) -> int:
        return self.weight.shape[1]

    @property
    def device(self) -> torch.device:
        return self.weight.device

    def to(self, device) -> "Fp8Weight":
        return Fp8Weight(self.weight.to(device), self.scale.to(device))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """dequant(W) [N, K] computed in ``dtype`` (float64 gives it exactly: every e4m3 value and
        fp32 scale, and their products, are doubles)."""
        return self.weight.to(dtype) * self.scale.to(dtype)[:, None]
