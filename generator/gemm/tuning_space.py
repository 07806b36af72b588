"""What `fused-gemm tune` tries: tile configs (one kernel each) and the launch options to try on them.

Plain data.  Each candidate serves a range of M: swap-AB configs put the tokens on the tile's
narrow N side and are only worth timing for small M; 128/256-row tiles only for M that fills them.
Launch variants cost no compile, so each config lists the few that matter for it (CTA swizzle and
raster order for L2 reuse on big grids; split/stream-K decompositions for grids that under-fill
the GPU; programmatic dependent launch for decode, where the prologue should overlap the previous
kernel).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Tuple, Union

from ..gemv import DecodeConfig as D
from .launch import LaunchOptions as L
from .heuristics import FP8_EPILOGUE_TILE
from .spec import FP8_PROMOTION, TileConfig as T


@dataclass(frozen=True)
class Candidate:
    config: Union[T, D]
    min_m: int
    max_m: int
    launches: Tuple[L, ...]
    promotion: int = FP8_PROMOTION     # fp8 without fast accumulation: GemmSpec.promotion

    def serves(self, m: int) -> bool:
        return self.min_m <= m <= self.max_m

    @property
    def name(self) -> str:
        """The kernel's name in the tuner's measurements: the config's, plus a non-default promotion."""
        return self.config.name + (f"_promo{self.promotion}" if self.promotion != FP8_PROMOTION else "")


_SWIZZLE = (L(), L(swizzle=2), L(swizzle=4), L(swizzle=8))
# Each swizzle also with PDL: the prologue (barrier init, tensor-map prefetch, the first loads' issue)
# then overlaps the previous kernel's tail, which weighs at mid M (a wave or two, tens of microseconds).
_MID = _SWIZZLE + tuple(replace(l, pdl=True) for l in _SWIZZLE)
_GRID = _MID + (L(raster="along_m"), L(raster="along_n"), L(swizzle=4, raster="along_m"),
                L(swizzle=8, raster="along_m"))
_DECODE = (L(pdl=True),)
# The GEMV's K split over a cluster: its own choice (one wave of resident CTAs), or forced
_GEMV = (L(pdl=True), L(splits=2, pdl=True), L(splits=4, pdl=True))
_SPLIT = (L(pdl=True), L(decomposition="stream_k", pdl=True), L(decomposition="data_parallel", pdl=True),
          L(splits=2, decomposition="split_k", pdl=True), L(splits=3, decomposition="split_k", pdl=True),
          L(splits=4, decomposition="split_k", pdl=True))
# Split-K with a separate reduction: its own count (one wave of CTAs), or forced
_SPLIT_K_PARALLEL = (L(pdl=True),) + tuple(L(splits=s, pdl=True) for s in (2, 4, 8, 16))
_STREAM_K = (L(decomposition="stream_k"), L(), L(decomposition="data_parallel"), L(decomposition="stream_k", swizzle=4),
             L(splits=2, decomposition="split_k"), L(splits=3, decomposition="split_k"))

SM90_BF16: Tuple[Candidate, ...] = (
    # decode: the weight-streaming GEMV (a tokens-wide MMA tile per 16 weight rows; 8 tokens serve M = 1 only,
    # as a bucket's entry serves every M down to the previous bucket)
    Candidate(D(16, 4, 1), 1, 16, _GEMV),
    # three chunks a stage: two CTAs an SM, so 4096-row weights (256 CTAs) fill the GPU and launch the next
    # kernel at their start (H100 4096 x 4096 at M = 1: 14.1 -> 12.4 us); wider weights run in waves
    Candidate(D(16, 4, 1, unroll=3), 1, 16, _GEMV),
    # four chunks a stage: 196 registers, still two CTAs an SM, a third more weight bytes in flight, for short
    # K slices (H200, 4096 x 4096: M = 1 9.62 -> 9.37 us, M = 16 11.52 -> 11.21; perf/results/h200_decode_schedules.txt)
    Candidate(D(16, 4, 1, unroll=4), 1, 16, _GEMV),
    Candidate(D(16, 4, 2), 1, 16, _GEMV),
    Candidate(D(16, 8, 1), 1, 16, _GEMV),
    Candidate(D(8, 4, 1), 1, 1, _GEMV),
    # 8 tokens, four chunks a stage: the registers of the 16-token three-chunk CTAs (4 x 24 = 3 x 32), a
    # third more weight bytes in flight
    Candidate(D(8, 4, 1, unroll=4), 1, 1, _GEMV),
    # decode: swap-AB, the weight's N on the 64-row wgmma side
    Candidate(T((64, 16, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True), 1, 16, _DECODE),
    Candidate(T((64, 32, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True), 1, 64, _DECODE),
    Candidate(T((64, 64, 128), (1, 1, 1), "warpspecialized", "persistent", swap_ab=True), 16, 128, _DECODE),
    # ... and the same tile without swap-AB, tokens on the 64-row side: cuBLAS's tile (nvjet 64x64, 13 stages) for
    # narrow or long-K weights at M = 64-128 (H200, x torch.mm at M = 128: 3584 x 3584 0.97 against 0.87 for the
    # swap-AB tile, 3584 x 8192 0.94 against 0.83 for the table's 64x96 ping-pong; it also won 1280 x 8192 at
    # M = 256, 0.90 against 0.79; perf/results/h200_narrow_tiles.txt)
    Candidate(T((64, 64, 128), (1, 1, 1), "warpspecialized", "persistent"), 64, 256, _MID),
    # ... and that tile over slices of K into fp32 partials, a reduction kernel applying the epilogue after
    # (GemmSpec.split_k_parallel): cuBLAS's recipe where a narrow weight with a long K leaves most SMs idle
    # (Llama-3-70B TP8's 1280 x 8192 at M = 64: 20 tiles; cuBLAS runs a 64x64 split-K kernel and a reduction,
    # 6.3 + 2.2 us, against 12 us for our best stream-K kernel; perf/results/h200_split_k.txt).  Any tile
    # schedule serves, unlike stream-K's cooperative-only split: also with swap-AB at small M, and a 128x128
    # ping-pong tile where a mid-M grid is still short of a wave.
    # At M = 64 half a CTA's bytes are x's, read again by every weight tile: cuBLAS's split-K kernels there run in
    # clusters (nvjet 64x64 4x1 at M = 64, 4x2 at M = 128), so that one load of an x tile feeds four weight
    # tiles (and one weight tile two token tiles).
    # (Without swap-AB, the tile alone or in 1x4 clusters never won a cell: perf/results/h200_split_k_parallel.txt.)
    Candidate(T((64, 64, 128), (2, 2, 1), "warpspecialized", "split_k_parallel"), 128, 256, _SPLIT_K_PARALLEL),
    Candidate(T((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True), 16, 64,
              _SPLIT_K_PARALLEL),
    Candidate(T((64, 64, 128), (4, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True), 16, 64,
              _SPLIT_K_PARALLEL),
    # (128x80 ping-pong tiles over K slices, cuBLAS's split-K pick for 1280 x 8192 at M = 512, lost every cell at
    # M = 512-2048 in both cluster shapes: perf/results/h200_split_k_parallel.txt, section G)
    Candidate(T((128, 128, 64), (1, 1, 1), "pingpong", "split_k_parallel"), 128, 2048, _SPLIT_K_PARALLEL),
    Candidate(T((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True), 1, 16, _SPLIT),
    Candidate(T((128, 64, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True), 16, 256, _SPLIT),
    Candidate(T((64, 128, 64), (1, 1, 1), "pingpong", "persistent", swap_ab=True), 64, 512, _MID),
    # mid M, without swap-AB: the weight's N on the tile's N side, which wgmma lets be any multiple of
    # 8 (widths off CuTe's default list through its extended shapes: TileConfig.extended_wgmma), so that the
    # tile count lands just under a whole number of waves (cuBLAS's nvjet kernels on an H100 use 96x128,
    # 112x128, 144x128 and 192x128 tiles here, weight side first)
    Candidate(T((64, 96, 64), (1, 1, 1), "pingpong", "persistent"), 64, 512, _MID),
    # ... and in pairs along M, so that a weight tile is read once (multicast) for both: cuBLAS's choice
    # for 128 x 6144 x 4096 on an H100 (nvjet 96x64 tiles, 1x2 cluster, 10 stages of 64 along K); from
    # M = 128, where both CTAs of a pair have rows
    Candidate(T((64, 96, 64), (2, 1, 1), "pingpong", "persistent"), 128, 512, _MID),
    Candidate(T((64, 128, 64), (2, 1, 1), "pingpong", "persistent"), 128, 512, _MID),
    Candidate(T((128, 96, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 32)), 128, 2048, _GRID),
    Candidate(T((128, 112, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    Candidate(T((128, 144, 64), (1, 2, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    # ... and those N sizes in pairs along N (cuBLAS on an H200 at M = 256: 112x128 tiles for 14336 x 4096,
    # 96x128 for 6144 x 4096, both 2x1 clusters along the weight's N)
    Candidate(T((128, 112, 64), (1, 2, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    Candidate(T((128, 96, 64), (1, 2, 1), "pingpong", "persistent", epilogue_tile=(64, 32)), 128, 2048, _GRID),
    # cuBLAS's picks at the weakest mid-M cells on an H200 (CUPTI, 2026-11-28; weight side first): 80x128 for
    # 1280 x 8192 at M = 512-1024 and 4608 x 3584 at M = 256, 144x128 in pairs along M for 4608 x 3584 at
    # M = 512 and 18944 x 3584 at M = 256, 192x128 cooperative in pairs along M for 6144 x 4096 at M = 512
    Candidate(T((128, 80, 64), (1, 2, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    Candidate(T((128, 80, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    Candidate(T((128, 144, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 16)), 128, 2048, _GRID),
    Candidate(T((128, 192, 64), (2, 1, 1), "cooperative", "persistent"), 256, 8192, _GRID),
    Candidate(T((128, 192, 64), (1, 2, 1), "cooperative", "persistent"), 256, 8192, _GRID),
    # mid M where the grid is one wave of one tile per CTA (4096 x 4096 at M = 512, 14336 x 4096 at M = 256):
    # a pingpong CTA then has one warpgroup idle; cooperative ones split the tile over both
    Candidate(T((128, 96, 64), (2, 1, 1), "cooperative", "persistent"), 128, 2048, _MID),
    Candidate(T((128, 128, 64), (2, 1, 1), "cooperative", "persistent"), 128, 4096, _MID),
    Candidate(T((128, 128, 64), (1, 2, 1), "cooperative", "persistent"), 128, 4096, _MID),
    Candidate(T((128, 224, 64), (2, 1, 1), "cooperative", "persistent"), 128, 1024, _MID),
    # ... and 112 wide, one tile a CTA over both warpgroups: 14336 x 4096 at M = 128 is then 128 tiles, one
    # wave (H200: 0.99x torch.mm against 0.95x for 128x128; perf/results/h200_mid_m_tiles.txt)
    Candidate(T((128, 112, 64), (1, 1, 1), "cooperative", "persistent", epilogue_tile=(128, 16)), 128, 1024, _MID),
    Candidate(T((128, 112, 64), (1, 2, 1), "cooperative", "persistent", epilogue_tile=(128, 16)), 128, 1024, _MID),
    # Widths that cut the weight into whole waves of one tile a CTA (or a warpgroup), 160 for 1280 rows, 112 for
    # 3584 / 7168, 144 for 4608 (H200, x torch.mm, the table's pick before in brackets; perf/results/h200_wave_tiles.txt):
    # 1280 x 8192 at M = 512 on 128x160 cooperative tiles over 4 K slices (32 tiles x 4) 0.98 (0.92), at M = 1024 on
    # 64x160 (128 tiles) 0.93 (0.85), at M = 2048 on 128x160 cooperative (128 tiles) 1.00 (0.94), at M = 4096 on
    # 128x160 ping-pong (256 tiles, one a warpgroup) 1.02 (0.92); 7168 x 8192 at M = 128 on 64x112 in pairs along M
    # (128 tiles) 0.99 (0.95); 3584 x 3584 at M = 256 on 64x112 0.96 (0.93); 4608 x 3584 at M = 512 on 128x144
    # cooperative (128 tiles) 0.96 (0.92)
    Candidate(T((64, 112, 64), (1, 1, 1), "warpspecialized", "persistent", epilogue_tile=(64, 16)), 64, 512, _MID),
    Candidate(T((64, 112, 64), (2, 1, 1), "warpspecialized", "persistent", epilogue_tile=(64, 16)), 128, 512, _MID),
    Candidate(T((64, 160, 64), (1, 1, 1), "warpspecialized", "persistent"), 256, 2048, _MID),
    Candidate(T((64, 160, 64), (2, 1, 1), "warpspecialized", "persistent"), 256, 2048, _MID),
    Candidate(T((128, 144, 64), (1, 1, 1), "cooperative", "persistent", epilogue_tile=(128, 16)), 256, 2048, _MID),
    Candidate(T((128, 160, 64), (1, 1, 1), "cooperative", "persistent"), 512, 8192, _MID),
    Candidate(T((128, 160, 64), (1, 1, 1), "cooperative", "split_k_parallel"), 256, 1024, _SPLIT_K_PARALLEL),
    Candidate(T((128, 160, 64), (1, 1, 1), "pingpong", "persistent"), 1024, 1 << 30, _GRID),
    # mid and large M
    Candidate(T((128, 64, 64), (1, 2, 1), "pingpong", "persistent"), 64, 2048, _GRID),
    Candidate(T((128, 128, 64), (1, 2, 1), "pingpong", "persistent"), 64, 1 << 30, _GRID),
    Candidate(T((128, 128, 64), (2, 1, 1), "pingpong", "persistent"), 64, 1 << 30, _GRID),
    Candidate(T((128, 128, 64), (1, 2, 1), "cooperative", "stream_k"), 128, 8192, _STREAM_K),
    Candidate(T((128, 256, 64), (1, 2, 1), "cooperative", "stream_k"), 128, 4096, _STREAM_K),
    Candidate(T((128, 256, 64), (1, 2, 1), "cooperative", "persistent"), 256, 1 << 30, _GRID),
    Candidate(T((128, 256, 64), (2, 1, 1), "cooperative", "persistent"), 256, 1 << 30, _GRID),
    Candidate(T((256, 128, 64), (1, 2, 1), "cooperative", "persistent"), 256, 1 << 30, _GRID),
    Candidate(T((256, 128, 64), (2, 1, 1), "cooperative", "persistent"), 256, 1 << 30, _GRID),
    Candidate(T((128, 256, 64), (2, 1, 1), "cooperative", "stream_k"), 512, 1 << 30, _STREAM_K),
)
# qkv_rope's own, besides SM90_BF16's tiles its epilogue takes: the tiles perf/bench_rope.py --launch-sweep
# measured best for it at mid M (generator/rope/heuristics.py ROWS and SHAPE_ROWS), which no GEMM row uses.
ROPE_EXTRA: Tuple[Candidate, ...] = (
    Candidate(T((64, 64, 128), (1, 1, 1), "pingpong", "persistent"), 16, 256, _MID),
    Candidate(T((64, 128, 64), (1, 1, 1), "pingpong", "persistent"), 64, 1024, _MID),
)

# fp8 (e4m3 x e4m3, row x column scales) without fast accumulation, prefill only (below M = 1024 the
# swap-AB decode rows of heuristics.FP8_RULES serve).  Each consumer warpgroup keeps wgmma's accumulators
# (two of them: csrc/fused_gemm/fp8 promotes one while the other is written) and their fp32 sum, so at
# most 64x128 of a tile per warpgroup: cooperative 128x128x128 tiles (cuBLAS's own, nvjet 128x128_128x6
# coopA), in each cluster shape, promoting every 4, 8 or 16 wgmmas (ping-pong 64x128 tiles <= 0.68x
# _scaled_mm, perf/results/h100_sweep_fp8.txt).
_FP8_GRID = (L(), L(swizzle=4), L(swizzle=8), L(raster="along_m"), L(swizzle=4, raster="along_m"),
             L(swizzle=8, raster="along_m"))
SM90_E4M3: Tuple[Candidate, ...] = tuple(
    Candidate(T((128, 128, 128), cluster, "cooperative", "persistent", epilogue_tile=FP8_EPILOGUE_TILE), 1024, 1 << 30,
              _FP8_GRID, promotion)
    for cluster in ((1, 2, 1), (2, 1, 1), (1, 1, 1)) for promotion in (4, 8, 16))
# fp8 with fast accumulation (FP8FastAccum schedules: wgmma keeps the sums, one copy of the accumulators),
# prefill only as above.  Without promotion a ping-pong warpgroup holds a whole 128x128 tile: ping-pong
# 128x128x128 in each cluster shape (cuBLAS's fast kernel is nvjet 128x128_128x6 1x2, not cooperative), with
# CUTLASS's 64x32 epilogue subtiles or 64x128 ones (a geomean toss-up per M: perf/results/h100_sweep_fp8.txt),
# and cooperative 256-wide tiles, which lead on some shapes (down_proj at M = 1024: 0.98 against 0.95).
_PP, _COOP = "pingpong", "cooperative"
SM90_E4M3_FAST: Tuple[Candidate, ...] = tuple(
    Candidate(T(tile, cluster, schedule, "persistent", epilogue_tile=subtile), 1024, 1 << 30, _FP8_GRID)
    for tile, cluster, schedule, subtile in (
        ((128, 128, 128), (1, 2, 1), _PP, None), ((128, 128, 128), (2, 1, 1), _PP, None),
        ((128, 128, 128), (1, 1, 1), _PP, None), ((128, 128, 128), (1, 2, 1), _PP, (64, 128)),
        ((128, 128, 128), (2, 1, 1), _PP, (64, 128)), ((256, 128, 128), (2, 1, 1), _COOP, None),
        ((128, 256, 128), (1, 2, 1), _COOP, None)))
SPACES = {("sm90a", "bf16"): SM90_BF16, ("sm90a", "fp16"): SM90_BF16, ("sm90a", "e4m3"): SM90_E4M3}
FAST_ACCUM_SPACES = {("sm90a", "e4m3"): SM90_E4M3_FAST}


def candidates(arch: str, dtype: str, m: int, fast_accum: bool = False) -> Tuple[Candidate, ...]:
    space = (FAST_ACCUM_SPACES if fast_accum else SPACES)[(arch, dtype)]
    return tuple(c for c in space if c.serves(m))
