"""Which rope kernel variant serves which M: data, read by fused_gemm.rope.api.select.

In order of precedence:
  * the GPU's tuned table's qkv_rope entries (`fused-gemm tune --op qkv_rope`: Llama-3-8B, Llama-3-70B
    TP8 and Qwen2.5-7B QKV weights, NeoX with full rotary over 128-wide heads).  For those shapes and that
    geometry they take the place of SHAPE_ROWS and ROWS below, which serve the other geometries and shapes;
  * SHAPE_ROWS: kernels a GPU measured best for one QKV weight shape, per M bucket
    (perf/bench_rope.py --launch-sweep);
  * ROWS: kernels measured best on every GPU, per M bucket, for any shape;
  * otherwise the GEMM's tile (its tuned table, else its heuristic), and on top of it, for large
    prefill, part of shared memory kept for L1 (RopeSpec.l1_reserve_kb, L1_RESERVE_ROWS): the
    epilogue reads each token's cos/sin row and stores q/k/v through L1, and with every other byte
    given to mainloop stages (7 on 128x128x64) L1 is left ~25 KB.  On an H100, Llama-3-8B QKV
    (6144x4096), against the plain GEMM of the same tile:
      - M = 16384, Nsight Compute: 7 stages 1.07x with 30% more DRAM traffic; 5 stages (64 KB
        kept) 1.02x with the GEMM's DRAM traffic; in a CUDA graph (bench_rope) 1.04-1.05x -> 1.00x.
      - M = 1024 / 4096, CUDA graph: 7 stages 1.02x / 1.02x, 5 stages 1.05x / 1.04x (fewer stages
        hide less latency where the cos/sin rows stay in L2 anyway).
    On an H200 the reserve costs instead (GPU_L1_RESERVE_ROWS).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from ..gemm import heuristics as gemm_heuristics, tuned
from ..gemm.heuristics import Rule
from ..gemm.launch import LaunchOptions
from ..gemm.spec import TileConfig
from .spec import RopeSpec

# (from M on, KB kept for L1), rows in increasing M; below the first row nothing is kept.
L1_RESERVE_ROWS: Tuple[Tuple[int, int], ...] = ((8192, 64),)
# GPUs (tuned.gpu_key) that measured otherwise.  H200, Llama-3-8B QKV at M = 16384 (launch sweep,
# perf/results/h200_rope_launch_sweep.txt): every 128x128 variant with the 64 KB reserve ran 1.02-1.04x
# the GEMM, without it 0.99-1.02x: the H200's bandwidth leaves the cos/sin re-reads cheap, and the
# mainloop wants its stages.
GPU_L1_RESERVE_ROWS: Dict[str, Tuple[Tuple[int, int], ...]] = {"h200": ()}

# Every M at which some GPU's reserve changes: qkv_rope's memo key holds l1_row(m), so per call and
# without the GPU's name.
_L1_STARTS = tuple(sorted({min_m for rows in (L1_RESERVE_ROWS, *GPU_L1_RESERVE_ROWS.values()) for min_m, _ in rows}))


def l1_row(m: int) -> int:
    """Which L1 reserve boundaries (of any GPU) M tokens are past; part of qkv_rope's memo key."""
    return bisect_right(_L1_STARTS, m)


def l1_reserve_kb(m: int, config: TileConfig, gpu: Optional[str] = None) -> int:
    rows = GPU_L1_RESERVE_ROWS.get(gpu or "", L1_RESERVE_ROWS)
    kept = [kb for min_m, kb in rows if m >= min_m]
    return 0 if config.swap_ab or not kept else kept[-1]


@dataclass(frozen=True)
class MeasuredRow:
    """A kernel measured best for the rope epilogue itself, over the GEMM-derived choice."""
    config: str                  # a TileConfig name
    l1_reserve_kb: int = 0
    launch: LaunchOptions = LaunchOptions()

    def apply(self, base: RopeSpec) -> Tuple[RopeSpec, LaunchOptions]:
        return replace(base.with_config(TileConfig.from_name(self.config)), l1_reserve_kb=self.l1_reserve_kb), self.launch


# Rows per M bucket (tuned.M_BUCKETS: a bucket serves M above the previous one up to its own),
# measured with perf/bench_rope.py --launch-sweep: the rope kernel against linear as shipped, in a
# CUDA graph with preallocated outputs, ratios per repetition, Llama-3-8B QKV.
#   M = 128: 64x128 pingpong, no cluster: H100 1.00x, H200 1.07x.  The GEMM-derived 128x128 tile
#             (one 128-row tile leaves most SMs idle) ran 1.18x / 1.43x, swap-AB 64x64 2.0x (H200).
ROWS: Dict[int, MeasuredRow] = {128: MeasuredRow("t64x128x64_c1x1x1_pp_persist")}
# Per GPU and (N, K), perf/results/<gpu>_rope_launch_sweep.txt.  H200, Llama-3-8B QKV:
#   M = 1024: 128x128 2x1 cluster, swizzle 4   1.017x; the GEMM's tuned 1x2, swizzle 8 1.021x (1.04x
#             in a bench_rope run)
#   M = 16384: 128x128 1x2 cluster, swizzle 2  0.99x; the GEMM's tuned 2x1, swizzle 8 1.02x (no reserve)
#   M = 8192 shares the 16384 row (not measured on its own).
# Mid M, 2026-11-27 (perf/results/h{100,200}_rope_launch_sweep.txt, "mid M"): the GEMM's tuned tiles
# there are 128x96 (M = 256) and 128x192 (M = 512), which the rope epilogue cannot take (a tile holds
# whole heads or whole chunks of one head), so qkv_rope fell back to the heuristic's 128x128 1x2 tile:
# 1.21-1.33x the GEMM, 0.65-0.84x torch.mm in `fused-gemm sweep`.  Measured best instead:
#   M = 64: 64x64 pingpong, not swap-AB: H100 1.05x, H200 1.12x (the GEMM's swap-AB 64x64 1.17x / 1.30x;
#            every launch option within 1%)
#   M = 256: 128x128 2x1 cluster   H100 1.06x, H200 1.14x (the 1x2 fallback 1.21x / 1.28x)
#   M = 512: 128x128 2x1, along M: H100 46.1 us, H200 45.7 us (the best, 128x256 2x1 cooperative along M
#            and 64x128, within 1 us); the 1x2 fallback 1.32x / 1.33x, 55 / 53 us.
_MID_M_64 = MeasuredRow("t64x64x128_c1x1x1_pp_persist")
_MID_M_256 = MeasuredRow("t128x128x64_c2x1x1_pp_persist")
_MID_M_512 = MeasuredRow("t128x128x64_c2x1x1_pp_persist", 0, LaunchOptions(raster="along_m"))
SHAPE_ROWS: Dict[str, Dict[Tuple[int, int], Dict[int, MeasuredRow]]] = {
    "h100": {(6144, 4096): {64: _MID_M_64, 256: _MID_M_256, 512: _MID_M_512}},
    "h200": {(6144, 4096): {64: _MID_M_64, 256: _MID_M_256, 512: _MID_M_512,
                            1024: MeasuredRow("t128x128x64_c2x1x1_pp_persist", 0, LaunchOptions(swizzle=4)),
                            8192: MeasuredRow("t128x128x64_c1x2x1_pp_persist", 0, LaunchOptions(swizzle=2)),
                            16384: MeasuredRow("t128x128x64_c1x2x1_pp_persist", 0, LaunchOptions(swizzle=2))}},
}


def measured_row(gpu: Optional[str], n: int, k: int, m: int) -> Optional[MeasuredRow]:
    bucket = tuned.M_BUCKETS[tuned.bucket_of(m)]
    return SHAPE_ROWS.get(gpu or "", {}).get((n, k), {}).get(bucket) or ROWS.get(bucket)


def measured_rows() -> List[MeasuredRow]:
    """Every measured row, of every GPU and shape (what prebuilt kernel sets hold)."""
    return [*ROWS.values(), *(row for shapes in SHAPE_ROWS.values() for rows in shapes.values() for row in rows.values())]


# What `fused-gemm tune --op qkv_rope` times (fused_gemm/bench/tune.py RopeWork): the tuned entries, keyed by
# the weight's shape only, serve calls of this geometry; any other falls through to the rows below.
TUNED_STYLE, TUNED_HEAD_DIM = "neox", 128


def tuned_geometry(spec: RopeSpec) -> bool:
    return (spec.style, spec.head_dim, spec.rotary_dim) == (TUNED_STYLE, TUNED_HEAD_DIM, TUNED_HEAD_DIM)


def choose(base: RopeSpec, gemm_rule: Optional[Rule], m: int, gpu: Optional[str] = None, n: int = -1,
           k: int = -1, rope_rule: Optional[Rule] = None) -> Tuple[RopeSpec, LaunchOptions]:
    """qkv_rope's kernel and launch options for M tokens of an [n, k] weight on ``gpu`` (a tuned-table
    key, or None), given the GEMM's rule for the shape (its tuned table's entry, or None) and qkv_rope's
    own tuned entry (``fused-gemm tune --op qkv_rope``, or None), which wins for the geometry it was tuned
    with (TUNED_STYLE, full rotary over TUNED_HEAD_DIM; with this rule's shared-memory reserve).  Otherwise a measured row for M's bucket wins.  Otherwise prefill takes the GEMM's tuned tile and launch options where
    the rope epilogue can run that tile (the epilogue hides behind the other warpgroup's MMA, so
    what is fastest for the GEMM is nearly so here); otherwise the heuristic's tile, with the tuned
    launch options when the tiles agree.  A tuned swap-AB (decode) tile is not taken: on an H100 the
    rope epilogue on the GEMM's tuned 64x32 decode tile ran 1.08x the GEMM at M = 16, against 0.99x
    on the heuristic's 64x16."""
    if rope_rule is not None and tuned_geometry(base) and base.accepts(rope_rule.config):
        return replace(base.with_config(rope_rule.config), l1_reserve_kb=l1_reserve_kb(m, rope_rule.config, gpu)), \
            rope_rule.launch
    row = measured_row(gpu, n, k, m)
    if row is not None:
        return row.apply(base)
    if gemm_rule is not None and not isinstance(gemm_rule.config, TileConfig):
        gemm_rule = None   # the GEMM's decode kernel (a DecodeConfig) has no epilogue to fuse rope into
    rule = gemm_heuristics.pick(base.arch, m)
    spec, launch = base.with_config(rule.config), rule.launch
    if gemm_rule is not None and gemm_rule.config == rule.config:
        launch = gemm_rule.launch
    elif gemm_rule is not None and not gemm_rule.config.swap_ab and spec.accepts(gemm_rule.config):
        spec, launch = spec.with_config(gemm_rule.config), gemm_rule.launch
    return replace(spec, l1_reserve_kb=l1_reserve_kb(m, spec.config, gpu)), launch


def gpu_rope_specs(gpu: str, n: int, k: int, dtype: str = "bf16", head_dim: int = 128, rotary_dim: int = 0,
                   style: str = "neox", bias: bool = False) -> List[RopeSpec]:
    """Every kernel qkv_rope may pick on ``gpu`` (a tuned-table key such as 'h100') for an [n, k] QKV
    weight: ``fused_gemm.warmup(*gpu_rope_specs(...))`` builds and prepares them ahead of a CUDA-graph
    capture.  M runs over both ends of every GEMM bucket, so rows that start inside a bucket count."""
    base = RopeSpec(dtype, head_dim, rotary_dim, style, bias)
    bounds = tuned.M_BUCKETS
    ms = sorted(set(bounds) | {b + 1 for b in bounds[:-1]} | set(_L1_STARTS))
    return list(dict.fromkeys(choose(base, tuned.rule_for(gpu, dtype, n, k, m), m, gpu, n, k,
                                     tuned.rule_for(gpu, dtype, n, k, m, "qkv_rope"))[0] for m in ms))
