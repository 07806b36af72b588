"""Baselines that need their own weight formats: torch's tinygemm int4 kernel (`_weight_int4pack_mm`)."""
from __future__ import annotations

import torch

INNER_K_TILES = 8        # torch's tinygemm packing (its int4mm kernels)


def tinygemm_available(group_size: int = 128) -> str:
    """'' if torch._weight_int4pack_mm and _convert_weight_to_int4pack(uint8 [N, K/2], inner_k_tiles) run
    here, else why not (the baseline is then left out, and said to be)."""
    try:
        w = torch.zeros(64, 64, dtype=torch.uint8, device="cuda")     # K = 128 codes: two a byte
        packed = torch.ops.aten._convert_weight_to_int4pack(w, INNER_K_TILES)
        sz = torch.zeros(max(128 // group_size, 1), 64, 2, dtype=torch.bfloat16, device="cuda")
        torch._weight_int4pack_mm(torch.zeros(1, 128, dtype=torch.bfloat16, device="cuda"), packed,
                                  min(group_size, 128), sz)
        return ""
    except Exception as exc:   # noqa: BLE001 - any failure means: no baseline on this torch/GPU
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def tinygemm_weight(w):
    """A symmetric ``Int4Weight``'s codes and scales in tinygemm's format: uint8 [N, K/2] (even k in the
    high nibble) packed by _convert_weight_to_int4pack, and qScaleAndZeros [K/g, N, 2] with
    dequant = (u - 8) * scale + zero."""
    codes = w.codes().to(torch.int16) + 8                              # symmetric codes -> unsigned
    u8 = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8).contiguous()
    packed = torch.ops.aten._convert_weight_to_int4pack(u8, INNER_K_TILES)
    sz = torch.stack((w.scales, torch.zeros_like(w.scales)), dim=-1).contiguous()
    return packed, sz
