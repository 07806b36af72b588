"""Which int4-family kernel configuration serves which M: a table, not code (the GEMM family's ``Rule``).

Rows are tried in order; the first whose ``max_m`` covers M wins.
  M <= 16, int4 weights (decode): the decode kernel (DecodeConfig: a weight-streaming GEMV on
    mma.sync, csrc/fused_gemm/int4_decode/sm90_int4_decode.hpp), 8 tokens up to M = 8, then 16, its
    CTA shape by the weight's shape for int4_linear (DECODE_BY_SHAPE) and one for int4_gated_linear.  The
    mixed-input wgmma kernels read int4 weights at 0.6-1.3 TB/s there on an H100 (3-6x the HBM floor,
    slower than tinygemm at M = 1).
  M <= 16, e4m3 weights (decode): the GEMM family's dense decode kernel reading the e4m3 weight and
    converting it in registers (csrc/fused_gemm/gemv/sm90_dense_decode.hpp), its CTA shape by the weight's
    shape (FP8_DECODE_BY_SHAPE).  The mixed-input kernel took 1.6-3.6x the fp8 HBM floor there on an H200,
    slower than bf16 torch.mm at two of three Llama-3-8B shapes.
  M <= 64: the mixed-input kernel computes D^T = W . X^T (it converts its A operand in registers), so
    the tile's M side is the weight's N and its N side the tokens.  The weight streams through 64-row
    tiles (N = 4096 gives 64 CTAs) in a persistent pingpong kernel with PDL; the token side is 64 wide
    so the weight is read once.
  larger M (prefill): cooperative 128x256x64 tiles: 0.97x bf16 torch.mm's TFLOP/s at M = 4096
    there, 13-16% ahead of example 55's 128x128x64.
A k-tile must divide the group size (CUTLASS reads one scale row per k-tile): ``config_for`` narrows
a row's tile K to 64 for groups of 64.  e4m3 weights (W8A16: per channel, group = K) take the same
mixed-input rows above M = 16.  Plain data (no torch): presets, the CLI and the runtime read the same table.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Optional, Tuple

from ..gemm.heuristics import Rule, first_row
from ..gemm.launch import LaunchOptions
from ..gemm.spec import Epilogue, TileConfig, canonical_dtype
from .spec import INT4_WEIGHTS, TILE_K, DecodeConfig, Int4Spec

_BIG_M = 1 << 62
# The mixed-input rows, above M = 16 for every weight kind (the decode kernels' rows come first).
SM90_RULES: Tuple[Rule, ...] = (
    Rule(64, TileConfig((64, 64, 128), (1, 1, 1), "pingpong", "persistent", swap_ab=True), LaunchOptions(pdl=True)),
    Rule(_BIG_M, TileConfig((128, 256, 64), (1, 1, 1), "cooperative", "persistent", swap_ab=True)),
)
RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": SM90_RULES}
# int4_gated_linear's decode rows (its decode kernel: 8 blocks a CTA, a gate with its up): 8 tokens to M = 8,
# then 16 tokens in 2-warp CTAs, which an H100 ran in 10.9 / 30.5 / 24.4 us at 16 x {4096 x 4096, 28672 x 4096,
# 4096 x 14336} against CUTLASS's mixed-input stream-K kernel's 14.0 / 33.4 / 25.1 when int4_linear took them
# too (2026-11-24).  (Decode kernels launch with PDL: fused_gemm/int4/op.py.)
_DECODE_GATED = (Rule(8, DecodeConfig(tokens=8)), Rule(16, DecodeConfig(16, 2, 8)))
INT4_GATED_RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": _DECODE_GATED + SM90_RULES}


@dataclass(frozen=True)
class ShapeClass:
    """int4_linear's (or fp8_weight_linear's) decode rows for weights of up to ``max_n`` rows (N) and
    ``max_k`` columns (K)."""
    max_n: int
    decode: Tuple[Rule, Rule]       # M <= 8, M <= 16
    max_k: int = _BIG_M


# int4_linear's decode rows by the weight's shape: the first class whose max_n and max_k cover it.  A streaming
# warp hides little latency itself, so what counts is warps resident on every SM, with the CTAs spread evenly:
#   * N <= 4096 and K <= 6144, M <= 8: 32-row CTAs of 16 warps (128 registers): up to 128 row groups, one
#     CTA an SM with no cluster at 4096 rows (4096 x 4096 6.2 us against 7.0-7.1 for 64-row CTAs, 4096 x
#     6144 7.8 against 8.5, 3072 x 4096 5.6 against 5.9; 64-row CTAs win at K = 8192 and 14336);
#   * N <= 8192: 64-row CTAs of 16 warps (8 tokens; 123-128 registers, one CTA an SM) or 12 warps (16 tokens,
#     half-length register stages, 151-160 registers since 2026-11-27): N / 64 row groups times the K split fill about one
#     CTA per SM;
#   * up to 16383 rows (14336, an unmerged gate or up projection): 8-token CTAs of 8 warps;
#   * wider (a merged gate/up projection: 28672 rows, 448 row groups of 64): 4-warp CTAs, several an SM.
# Timed on an H100 against each other and the 8-block rows int4_linear took before, at Llama-3-8B's and
# Llama-3-70B's TP-8 shapes (perf/int4_decode_launch.py --shapes, 2026-11-26; the README lists the times and
# perf/results/h100_int4_decode_launch.txt has the runs): e.g. 4096 x 14336 at M = 1 / 16 in 13.2 / 17.5 us
# against 15.1 / 25.3.  At 7168 x 8192 and M = 16 the next class's 4-warp 8-block CTA ties (17.0 against 17.2).
_DECODE_16_TOKENS_NARROW = Rule(16, DecodeConfig(16, 12, 4))
DECODE_BY_SHAPE: Dict[str, Tuple[ShapeClass, ...]] = {"sm90a": (
    ShapeClass(4096, (Rule(8, DecodeConfig(8, 16, 2)), _DECODE_16_TOKENS_NARROW), max_k=6144),
    ShapeClass(8192, (Rule(8, DecodeConfig(8, 16, 4)), _DECODE_16_TOKENS_NARROW)),
    ShapeClass(16383, (Rule(8, DecodeConfig(8, 8, 4)), Rule(16, DecodeConfig(16, 4, 8)))),
    ShapeClass(_BIG_M, (Rule(8, DecodeConfig(8, 4, 4)), Rule(16, DecodeConfig(16, 4, 8)))),
)}
# fp8_weight_linear's decode rows by the weight's shape: the GEMM family's dense decode kernel reading the e4m3
# weight (csrc/fused_gemm/gemv/sm90_dense_decode.hpp; a 16-token config serves M = 1 too, on its first token tile
# alone).  Each the fastest of ten CTA shapes and register stages at the Llama-3-8B shape named, H200, M = 1 / 16,
# us (perf/int4_decode_launch.py --weight e4m3, perf/results/h200_fp8_weight_decode.txt; the mixed-input kernel before:
# 14.9 / 14.9 at 4096^2, 47.1 / 47.4 at 28672 x 4096, 41.2 / 41.2 at 4096 x 14336):
#   4096^2 6.3 / 8.4 (two 16-token CTAs an SM, 256 of them: one wave);
#   4096 x 14336 16.2 / 19.6 (longer K slices: three chunks a stage at M = 1, one at 16);
#   6144 x 4096 9.3 / 12.4 (384 CTAs: three 8-token ones an SM at M = 1; 32-row CTAs at 16);
#   14336 x 4096 18.1 / 22.1 and 28672 x 4096 30.4 / 40.9 (waves: small register stages, four or five CTAs an SM).
_FP8_NARROW_16 = Rule(16, DecodeConfig(16, 4, 1, unroll=1))
FP8_DECODE_BY_SHAPE: Dict[str, Tuple[ShapeClass, ...]] = {"sm90a": (
    ShapeClass(4096, (Rule(8, DecodeConfig(16, 4, 1)), Rule(16, DecodeConfig(16, 4, 1))), max_k=8192),
    ShapeClass(4096, (Rule(8, DecodeConfig(16, 4, 1, unroll=3)), _FP8_NARROW_16)),
    ShapeClass(8192, (Rule(8, DecodeConfig(8, 4, 1, unroll=3)), Rule(16, DecodeConfig(16, 4, 2)))),
    ShapeClass(16383, (Rule(8, DecodeConfig(16, 4, 1, unroll=1)), _FP8_NARROW_16)),
    ShapeClass(_BIG_M, (Rule(8, DecodeConfig(8, 4, 1)), _FP8_NARROW_16)),
)}
# row_index reads any int4-family table's M buckets from the gated one's: they must agree.
assert all(tuple(r.max_m for r in c.decode) == tuple(r.max_m for r in _DECODE_GATED)
           for table in (DECODE_BY_SHAPE, FP8_DECODE_BY_SHAPE) for classes in table.values() for c in classes)
GATED = None    # the shape class of int4_gated_linear (its rows do not depend on the weight's shape)


def _classes(weight: str, arch: str) -> Tuple[ShapeClass, ...]:
    return DECODE_BY_SHAPE[arch] if canonical_dtype(weight) in INT4_WEIGHTS else FP8_DECODE_BY_SHAPE[arch]


def shape_class(weight: str, n: int, k: int, gated: bool = False, arch: str = "sm90a") -> Optional[int]:
    """Which decode shape class serves an N x K weight: an index into DECODE_BY_SHAPE[arch] (int4_linear) or
    FP8_DECODE_BY_SHAPE[arch] (fp8_weight_linear), or GATED: int4_gated_linear's rows."""
    if gated:
        return GATED
    return next(i for i, c in enumerate(_classes(weight, arch)) if n <= c.max_n and k <= c.max_k)


def shape_classes(weight: str, arch: str = "sm90a") -> Tuple[Optional[int], ...]:
    """Every shape class int4_linear (int4 weights) or fp8_weight_linear (e4m3) may use."""
    return tuple(range(len(_classes(weight, arch))))


def rules(arch: str, weight: str, class_index: Optional[int]) -> Tuple[Rule, ...]:
    """The table for a weight kind and shape class (see shape_class): int4 (s4, u4) decodes on the int4
    decode kernel, int4_linear with the class's rows, int4_gated_linear (GATED) with its own; e4m3 on the
    dense decode kernel with its class's rows (GATED there: the first class's, for its M buckets)."""
    fp8 = canonical_dtype(weight) not in INT4_WEIGHTS
    if class_index is GATED and not fp8:
        return INT4_GATED_RULES[arch]
    return _classes(weight, arch)[class_index or 0].decode + SM90_RULES


# Alternatives perf/bench_int4.py --sweep times at decode sizes (preset 'int4-sweep').
SWEEP_CONFIGS: Tuple[TileConfig, ...] = (
    TileConfig((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True),
    TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "persistent", swap_ab=True),
    TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True),
    TileConfig((64, 16, 64), (1, 1, 1), "pingpong", "persistent", swap_ab=True),
    TileConfig((128, 256, 64), (1, 1, 1), "cooperative", "persistent", swap_ab=True),
)


# Decode-kernel alternatives the same sweep times for int4 weights (rows where M fits their tokens).
DECODE_SWEEP_CONFIGS: Tuple[DecodeConfig, ...] = (
    DecodeConfig(16, 2, 8), DecodeConfig(16, 4, 8), DecodeConfig(16, 8, 4), DecodeConfig(16, 12, 4),
    DecodeConfig(8, 2, 8), DecodeConfig(8, 4, 4), DecodeConfig(8, 8, 4), DecodeConfig(8, 16, 4), DecodeConfig(8, 16, 2),
)


# ... and the dense decode kernel's, for e4m3 weights: the ten perf/results/h200_fp8_weight_decode.txt timed
# (B) but the 16-token one of four chunks a stage, which spills.
FP8_DECODE_SWEEP_CONFIGS: Tuple[DecodeConfig, ...] = (
    DecodeConfig(8, 4, 1), DecodeConfig(8, 4, 1, unroll=3), DecodeConfig(8, 4, 1, unroll=4), DecodeConfig(8, 8, 1),
    DecodeConfig(8, 4, 2), DecodeConfig(16, 4, 1, unroll=1), DecodeConfig(16, 4, 1), DecodeConfig(16, 4, 1, unroll=3),
    DecodeConfig(16, 8, 1), DecodeConfig(16, 4, 2),
)


def sweep_configs(weight: str) -> tuple:
    """What --sweep times for a weight kind: the mixed-input tiles and its decode kernel's shapes."""
    decode = DECODE_SWEEP_CONFIGS if canonical_dtype(weight) in INT4_WEIGHTS else FP8_DECODE_SWEEP_CONFIGS
    return SWEEP_CONFIGS + decode


def tile_k_for(group_size: int, k: int, tile_k: int) -> int:
    """The largest k-tile up to ``tile_k`` whose multiples the groups are (any, per channel)."""
    if group_size == k:
        return tile_k
    for t in TILE_K[::-1]:
        if t <= tile_k and group_size % t == 0:
            return t
    raise ValueError(f"group size {group_size} is not a multiple of {min(TILE_K)}")


def config_for(rule: Rule, group_size: int, k: int):
    """The row's config with its tile K narrowed so that it divides the group size (a DecodeConfig
    takes any group size that is a multiple of 32)."""
    cfg = rule.config
    if isinstance(cfg, DecodeConfig):
        return cfg
    tk = tile_k_for(group_size, k, cfg.tile[2])
    return cfg if tk == cfg.tile[2] else replace(cfg, tile=(cfg.tile[0], cfg.tile[1], tk))


def row_index(arch: str, weight: str, m: int) -> int:
    return first_row(rules(arch, weight, GATED), m)   # every int4 table has the gated one's M buckets


def spec_for(dtype: str, weight: str, epilogue, group_size: int, k: int, m: int, bias_dtype=None,
             residual_dtype=None, arch: str = "sm90a", gated: bool = False, n: int = 0) -> Int4Spec:
    """The kernel int4_linear (weight 's4'/'u4'), int4_gated_linear (gated) or fp8_weight_linear
    ('e4m3', group size = K) runs for these arguments (x dtype, weight, epilogue, group size, K, M,
    and N: the weight's rows, which pick int4_linear's decode rows)."""
    rule = rules(arch, weight, shape_class(weight, n, k, gated, arch))[row_index(arch, weight, m)]
    ep = Epilogue.parse(epilogue) if isinstance(epilogue, str) else epilogue
    return Int4Spec(dtype, weight, residual_dtype=residual_dtype, bias_dtype=bias_dtype, epilogue=ep,
                    config=config_for(rule, group_size, k), arch=arch, gated=gated)
