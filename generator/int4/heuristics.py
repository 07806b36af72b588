"""Which int4 kernel configuration serves which M: a table, not code (the GEMM family's ``Rule``).

Rows are tried in order; the first whose ``max_m`` covers M wins.  Every int4 kernel computes
D^T = W . X^T (the mixed-input mainloop converts its A operand in registers), so the tile's M side
is the weight's N and its N side the tokens.
  M <= 16 and M <= 64 (decode): the weight streams through 64-row tiles (N = 4096 gives 64 CTAs;
    128-row tiles would leave three quarters of an H100 idle) in a persistent pingpong kernel, so the
    producer warp keeps loading the next tile's codes while a consumer warpgroup finishes the last;
    PDL overlaps the prologue with the previous kernel.  The token side is 16 or 64 wide so the
    weight is read once.  Open: on an H100 this reads int4 weights at 0.6-1.3 TB/s (3-5x the HBM
    floor; tinygemm is faster at M = 1); two runs disagreed on which k-tile (64 or 128) is faster,
    so the table keeps 128.  A dedicated decode kernel (many CTAs over N and K) is the next step.
  larger M (prefill): cooperative 128x256x64 tiles: 0.97x bf16 torch.mm's TFLOP/s at M = 4096
    there, 13-16% ahead of example 55's 128x128x64.
A k-tile must divide the group size (CUTLASS reads one scale row per k-tile): ``config_for`` narrows
a row's tile K to 64 for groups of 64.  e4m3 weights (W8A16: per channel, group = K) take the same
rows, not yet timed for them: the weight streams the same way at twice the bytes (perf/bench_fp8_weight.py
measures it).  Plain data (no torch): presets, the CLI and the runtime read the same table.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, Tuple

from ..gemm.heuristics import Rule, first_row
from ..gemm.launch import LaunchOptions
from ..gemm.spec import Epilogue, TileConfig
from .spec import TILE_K, Int4Spec

_BIG_M = 1 << 62
SM90_RULES: Tuple[Rule, ...] = (
    Rule(16, TileConfig((64, 16, 128), (1, 1, 1), "pingpong", "persistent", swap_ab=True), LaunchOptions(pdl=True)),
    Rule(64, TileConfig((64, 64, 128), (1, 1, 1), "pingpong", "persistent", swap_ab=True), LaunchOptions(pdl=True)),
    Rule(_BIG_M, TileConfig((128, 256, 64), (1, 1, 1), "cooperative", "persistent", swap_ab=True)),
)
RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": SM90_RULES}

# Alternatives perf/bench_int4.py --sweep times at decode sizes (preset 'int4-sweep').
SWEEP_CONFIGS: Tuple[TileConfig, ...] = (
    TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True),
    TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "persistent", swap_ab=True),
    TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True),
    TileConfig((64, 16, 64), (1, 1, 1), "pingpong", "persistent", swap_ab=True),
    TileConfig((128, 256, 64), (1, 1, 1), "cooperative", "persistent", swap_ab=True),
)


def tile_k_for(group_size: int, k: int, tile_k: int) -> int:
    """The largest k-tile up to ``tile_k`` whose multiples the groups are (any, per channel)."""
    if group_size == k:
        return tile_k
    for t in TILE_K[::-1]:
        if t <= tile_k and group_size % t == 0:
            return t
    raise ValueError(f"group size {group_size} is not a multiple of {min(TILE_K)}")


def config_for(rule: Rule, group_size: int, k: int) -> TileConfig:
    """The row's config with its tile K narrowed so that it divides the group size."""
    cfg = rule.config
    tk = tile_k_for(group_size, k, cfg.tile[2])
    return cfg if tk == cfg.tile[2] else replace(cfg, tile=(cfg.tile[0], cfg.tile[1], tk))


def row_index(arch: str, m: int) -> int:
    return first_row(RULES[arch], m)


def spec_for(dtype: str, weight: str, epilogue, group_size: int, k: int, m: int, bias_dtype=None,
             residual_dtype=None, arch: str = "sm90a") -> Int4Spec:
    """The kernel int4_linear (weight 's4'/'u4') or fp8_weight_linear ('e4m3', group size = K) runs for
    these arguments (x dtype, weight, epilogue, group size, K, M)."""
    rule = RULES[arch][row_index(arch, m)]
    ep = Epilogue.parse(epilogue) if isinstance(epilogue, str) else epilogue
    return Int4Spec(dtype, weight, residual_dtype=residual_dtype, bias_dtype=bias_dtype, epilogue=ep,
                    config=config_for(rule, group_size, k), arch=arch)
