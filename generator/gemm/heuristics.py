"""Which kernel configuration serves which M: a table, not code.

Rows are tried in order; the first whose ``max_m`` covers M wins.  Decode sizes (M <= 64) use
swap-AB, so the weight's N fills the 64-row side of the wgmma and the few tokens sit on the tile's
narrow N side, with 64-row tiles so that even N = 4096 yields 64 CTAs streaming the weight; no
split-K (its workspace memset and reduction cost more than they bring) and programmatic dependent
launch so that the prologue overlaps the previous kernel.  Larger M uses a persistent pingpong
kernel, 128x128 tiles in 1x2 clusters: while one consumer warpgroup runs its fused epilogue the
other keeps the tensor cores busy, which the cooperative 128x256 kernel cannot do (it came out 3-6%
slower with bias+gelu).  Measured on H200 with the old perf/sweep.py; `fused-gemm tune` now writes per-GPU tables (tuned.py) that take precedence for the shapes they cover.
Plain data with no torch, so presets and the CLI read the same table the runtime does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from .launch import LaunchOptions
from .spec import FP8_PROMOTION, TileConfig


@dataclass(frozen=True)
class Rule:
    max_m: int                                          # inclusive upper bound of M this row serves
    config: TileConfig                                  # compile-time: one kernel per row
    launch: LaunchOptions = LaunchOptions()             # runtime scheduler knobs
    promotion: int = FP8_PROMOTION                      # fp8 rows without fast accumulation: GemmSpec.promotion


_BIG_M = 1 << 62
SM90_RULES: Tuple[Rule, ...] = (
    Rule(16, TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True),
         LaunchOptions(pdl=True)),
    Rule(64, TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True),
         LaunchOptions(pdl=True)),
    Rule(_BIG_M, TileConfig((128, 128, 64), (1, 2, 1), "pingpong", "persistent")),
)
RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": SM90_RULES}


@dataclass(frozen=True)
class NarrowRule:
    """A row for a weight too narrow (N rows) for the M row's tile to fill the GPU, with K at least min_k (split-K
    rows, and persistent tiles for narrow weights at mid M): ``linear`` takes it before SM90_RULES for shapes its
    GPU's tuned table lacks.  Rows are tried in
    order; M is the call's bucket (tuned.M_BUCKETS), as for the tables."""
    min_m: int
    max_m: int
    max_n: int
    min_k: int
    config: TileConfig
    launch: LaunchOptions = LaunchOptions(pdl=True)


# Split-K with a separate reduction (splits=1: the most K slices that fit one wave).  H200, linear(bias,
# gelu_tanh) against torch.mm, untabled weights (Llama-3-405B TP8 qkv 2304x16384, Llama-3-70B TP4 qkv 2560x8192,
# Llama-3-8B TP4 qkv 1536x4096; perf/results/h200_split_k_parallel.txt, section F), this row / SM90_RULES' row:
#   M = 64: 0.96 / 0.82, 1.03 / 0.97, 1.26 / 1.00 (and the tables' Llama-3-70B TP8 qkv, 1280x8192: 1.15 / 0.88);
#   M = 128: 1.02 / 0.38, 1.04 / 0.46, 0.92 / 0.41; M = 256: 0.74 / 0.43, 0.96 / 0.62, 0.84 / 0.44.
# Wider weights (3584 rows at M = 128-256) did better on a persistent tile in the tuner's runs: no row for them.
# Measured on an H200 only (no H100 was lent that day); the H100's table serves its tabled shapes first.
# The shortest K split-K serves untabled weights with (here, and tuned.nearest_rule_for's borrowed split entries).
SPLIT_MIN_K = 4096
NARROW_RULES: Dict[str, Tuple[NarrowRule, ...]] = {"sm90a": (
    NarrowRule(17, 64, 3584, SPLIT_MIN_K,
               TileConfig((64, 64, 128), (4, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True)),
    NarrowRule(65, 256, 2560, SPLIT_MIN_K, TileConfig((128, 128, 64), (1, 1, 1), "pingpong", "split_k_parallel")),
    # Narrow weights at M = 257-1024: the tiles the H200 table held for 1280 x 8192 there until 2026-11-28, which
    # Llama-3-8B TP4's qkv (1536 x 4096) then borrowed as its nearest weight: 0.93-1.00x / 0.91-0.92x torch.mm at
    # M = 512 / 1024 against 0.59-0.60x / 0.75-0.77x on SM90_RULES' rows (three runs each; sweep_linear_untabled_*.csv
    # in perf/results/h200/).  1280 x 8192 now has one-wave 160-wide tiles there, which divide no such neighbour.
    NarrowRule(257, 512, 2048, 4096, TileConfig((64, 128, 64), (1, 1, 1), "pingpong", "persistent", swap_ab=True),
               LaunchOptions(swizzle=4)),
    NarrowRule(513, 1024, 2048, 4096, TileConfig((128, 96, 64), (2, 1, 1), "pingpong", "persistent",
                                                 epilogue_tile=(64, 32)), LaunchOptions(swizzle=2)),
)}


def first_row(rules: Tuple[Rule, ...], m: int) -> int:
    """Index of the first rule that serves M tokens (any family's table: the last covers every M)."""
    for i, rule in enumerate(rules):
        if m <= rule.max_m:
            return i
    raise AssertionError("the last rule covers every M")


def row_index(arch: str, m: int) -> int:
    return first_row(RULES[arch], m)


def pick(arch: str, m: int) -> Rule:
    return RULES[arch][row_index(arch, m)]


def pick_for_shape(arch: str, m: int, n: int, k: int) -> Rule:
    """``linear``'s row for M (a bucket) on an [n, k] weight: a NARROW_RULES row that serves it, else pick's."""
    for row in NARROW_RULES[arch]:
        if row.min_m <= m <= row.max_m and n <= row.max_n and k >= row.min_k:
            return Rule(row.max_m, row.config, row.launch)
    return pick(arch, m)


# -- fp8 (e4m3 x e4m3, W8A8): its own table, keyed by fast accumulation (GemmSpec.fast_accum) ------
# Decode rows are SM90_RULES' (as for 16-bit operands: swap-AB, 64-row weight tiles, PDL),
# with 128-element (128-byte) k-tiles.  Prefill with fp32 promotion (the default) keeps three copies of
# the accumulators per consumer warpgroup (two of wgmma's, one promoted while the other is written, and the
# fp32 sum), so a warpgroup owns at most 64x128 of the tile: the cooperative 128x128x128 kernel (a pingpong
# 128x128 warpgroup would need 384 accumulator registers per thread).  With fast accumulation, the pingpong 128x128x128
# kernel in 2x1 clusters (CUTLASS's and vLLM's sm90 fp8 default).  perf/sweep_fp8.py on an H100
# (Llama-3-8B's four prefill shapes, geomean speed vs torch._scaled_mm, perf/results/h100_sweep_fp8.txt):
#   precise, 128x128x128 cooperative 1x2, swizzle 8 along M: 0.93 / 0.83 / 0.86 at M = 1024 / 4096 / 16384
#     (2x1: 0.87 / 0.83 / 0.85; pingpong 64x128: <= 0.68);
#   fast, pingpong 128x128x128 2x1: 0.95 at M = 1024; 1x2, swizzle 8 along M: 0.97 / 0.96 at 4096 / 16384.
# Precise prefill promotes every 4 wgmmas (128 of K, CUTLASS's default and cuBLAS's precision: 1.3e-5 from
# _scaled_mm's precise result, 1.66e-3 against float64; every 8: 7.8e-4 from it, every 16: 1.1e-3;
# perf/fp8_promotion_error.py at M = 4096).  With CUTLASS's mainloop, which drains the tensor cores at each
# promotion, every 4 cost 10% against every 8 (perf/results/h100_sweep_fp8_promotion.txt); ours promotes
# while the next interval's wgmmas run (csrc/fused_gemm/fp8), and then every 4 is as fast as 8 or 16: the
# row's kernel, swizzle 8 along M, on an H100 at M = 1024 / 4096 / 16384, geomean over Llama-3-8B's four
# shapes, 0.975 / 0.968 / 0.975x _scaled_mm (8: 0.974 / 0.960 / 0.983; CUTLASS's drain every 8: 0.961 /
# 0.936 / 0.958; perf/results/h100_sweep_fp8.txt, 2026-11-27).  The GPU's tuned table (`fused-gemm tune
# --op fp8`, and `--op fp8_fast` for fast accumulation) overrides the prefill rows per weight shape and M bucket.
# The precise kernel stores its tile in two 128x64 subtiles, not CUTLASS's four 128x32 ones: each subtile
# costs the consumers a wait and a release on the epilogue's load pipeline (which brings the scales ahead,
# GemmSpec.vectors_ahead).  Same run, the row's kernel, geomean as above, M = 1024 / 4096 / 16384: H100
# 0.988 / 0.994 / 1.022 against 0.966 / 0.993 / 1.007 with 128x32 subtiles and 0.961 / 0.971 / 0.979 with
# CUTLASS's broadcasts; H200 0.992 / 0.990 / 0.983, 0.983 / 0.970 / 0.967, 0.980 / 0.959 / 0.959 (an earlier
# H100 run: 128x128 subtiles 0.967 / 0.999 / 0.993, behind 128x64; perf/results/h{100,200}_sweep_fp8.txt).
FP8_EPILOGUE_TILE = (128, 64)
_FP8_DECODE = SM90_RULES[:2]   # the 16-bit decode rows: 64x16 / 64x64 swap-AB tiles, K 128 (128 fp8 bytes)
FP8_RULES: Dict[bool, Tuple[Rule, ...]] = {
    False: _FP8_DECODE + (Rule(_BIG_M, TileConfig((128, 128, 128), (1, 2, 1), "cooperative", "persistent",
                                          epilogue_tile=FP8_EPILOGUE_TILE),
                               LaunchOptions(swizzle=8, raster="along_m")),),
    True: _FP8_DECODE + (Rule(2048, TileConfig((128, 128, 128), (2, 1, 1), "pingpong", "persistent")),
                         Rule(_BIG_M, TileConfig((128, 128, 128), (1, 2, 1), "pingpong", "persistent"),
                              LaunchOptions(swizzle=8, raster="along_m"))),
}
