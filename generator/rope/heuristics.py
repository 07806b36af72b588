"""Which rope kernel variant serves which M: data, read by fused_gemm.rope.api.select.

The tile is the GEMM's (its tuned table, else its heuristic).  On top of it, large prefill keeps part
of shared memory for L1 (RopeSpec.l1_reserve_kb): the epilogue reads each token's cos/sin row and
stores q/k/v through L1, and with every other byte given to mainloop stages (7 on 128x128x64) L1 is
left ~25 KB.  On an H100, Llama-3-8B QKV (6144x4096), against the plain GEMM of the same tile:
  * M = 16384, Nsight Compute: 7 stages 1.07x with 30% more DRAM traffic; 5 stages (64 KB kept)
    1.02x with the GEMM's DRAM traffic; in a CUDA graph (bench_rope) 1.04-1.05x -> 1.00x.
  * M = 1024 / 4096, CUDA graph: 7 stages 1.02x / 1.02x, 5 stages 1.05x / 1.04x (fewer stages hide
    less latency where the cos/sin rows stay in L2 anyway).
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


_L1_STARTS = tuple(min_m for min_m, _ in L1_RESERVE_ROWS)


def l1_row(m: int) -> int:
    """How many L1_RESERVE_ROWS apply to M tokens (0: none); part of qkv_rope's memo key, so per call."""
    return bisect_right(_L1_STARTS, m)


def l1_reserve_kb(m: int, config: TileConfig) -> int:
    row = l1_row(m)
    return 0 if config.swap_ab or row == 0 else L1_RESERVE_ROWS[row - 1][1]


@dataclass(frozen=True)
class GpuRow:
    """A kernel measured best for the rope epilogue itself, over the GEMM-derived choice."""
    config: str                  # a TileConfig name
    l1_reserve_kb: int = 0
    launch: LaunchOptions = LaunchOptions()


# Per M bucket (tuned.M_BUCKETS: serves M above the previous bucket up to its own), rows measured with
# perf/bench_rope.py --launch-sweep: the rope kernel against linear as shipped, in a CUDA graph with
# preallocated outputs, ratios per repetition, Llama-3-8B QKV.  ROWS hold on every GPU; GPU_ROWS
# (keyed by tuned.gpu_key) take precedence on theirs.
#   M = 128: 64x128 pingpong, no cluster: H100 1.00x, H200 1.07x.  The GEMM-derived 128x128 tile
#             (one 128-row tile leaves most SMs idle) ran 1.18x / 1.43x, swap-AB 64x64 2.0x (H200).
ROWS: Dict[int, GpuRow] = {128: GpuRow("t64x128x64_c1x1x1_pp_persist")}
# H200:
#   M = 1024: 128x128 2x1 cluster, swizzle 4   1.017x; the GEMM's tuned 1x2, swizzle 8: 1.021x
#             (1.04x in bench_rope's run)
#   M = 16384: 128x128 1x2 cluster, swizzle 2  0.99x; with the H100's 64 KB L1 reserve every
#             variant ran 1.02-1.04x, the GEMM's tuned 2x1, swizzle 8 with it 1.036x.  The H200's
#             larger L2 and bandwidth leave the cos/sin re-reads cheap, and the mainloop wants its stages.
#   M = 8192 shares the 16384 row (not measured on its own).
GPU_ROWS: Dict[str, Dict[int, GpuRow]] = {
    "h200": {1024: GpuRow("t128x128x64_c2x1x1_pp_persist", 0, LaunchOptions(swizzle=4)),
             8192: GpuRow("t128x128x64_c1x2x1_pp_persist", 0, LaunchOptions(swizzle=2)),
             16384: GpuRow("t128x128x64_c1x2x1_pp_persist", 0, LaunchOptions(swizzle=2))},
}


def gpu_row(gpu: Optional[str], m: int) -> Optional[GpuRow]:
    bucket = tuned.M_BUCKETS[tuned.bucket_of(m)]
    return GPU_ROWS.get(gpu or "", {}).get(bucket) or ROWS.get(bucket)


def choose(base: RopeSpec, gemm_rule: Optional[Rule], m: int, gpu: Optional[str] = None
           ) -> Tuple[RopeSpec, LaunchOptions]:
    """qkv_rope's kernel and launch options for M tokens, given the GEMM's rule for the weight shape
    (its tuned table's entry, or None).  Prefill takes the GEMM's tuned tile and launch options where
    the rope epilogue can run that tile (the epilogue hides behind the other warpgroup's MMA, so
    what is fastest for the GEMM is fastest here); otherwise the heuristic's tile, with the tuned
    launch options when the tiles agree.  A tuned swap-AB (decode) tile is not taken: on an H100 the
    rope epilogue on the GEMM's tuned 64x32 decode tile ran 1.08x the GEMM at M = 16, against 0.99x
    on the heuristic's 64x16.  A measured row (ROWS, GPU_ROWS) for M's bucket overrides all of this."""
    row = gpu_row(gpu, m)
    if row is not None:
        return replace(base.with_config(TileConfig.from_name(row.config)), l1_reserve_kb=row.l1_reserve_kb), row.launch
    rule = gemm_heuristics.pick(base.arch, m)
    spec, launch = base.with_config(rule.config), rule.launch
    if gemm_rule is not None and gemm_rule.config == rule.config:
        launch = gemm_rule.launch
    elif gemm_rule is not None and not gemm_rule.config.swap_ab and spec.accepts(gemm_rule.config):
        spec, launch = spec.with_config(gemm_rule.config), gemm_rule.launch
    return replace(spec, l1_reserve_kb=l1_reserve_kb(m, spec.config)), launch


def gpu_rope_specs(gpu: str, n: int, k: int, dtype: str = "bf16", head_dim: int = 128, rotary_dim: int = 0,
                   style: str = "neox", bias: bool = False) -> List[RopeSpec]:
    """Every kernel qkv_rope may pick on ``gpu`` (a tuned-table key such as 'h100') for an [n, k] QKV
    weight: ``fused_gemm.warmup(*gpu_rope_specs(...))`` builds and prepares them ahead of a CUDA-graph
    capture.  M runs over both ends of every GEMM bucket, so rows that start inside a bucket count."""
    base = RopeSpec(dtype, head_dim, rotary_dim, style, bias)
    bounds = tuned.M_BUCKETS
    ms = sorted(set(bounds) | {b + 1 for b in bounds[:-1]} | {min_m for min_m, _ in L1_RESERVE_ROWS})
    return list(dict.fromkeys(choose(base, tuned.rule_for(gpu, dtype, n, k, m), m, gpu)[0] for m in ms))
