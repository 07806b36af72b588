"""Which gated kernel configuration and scheduler options serve which M: a table, not code.

The GPU's tuned table (`fused-gemm tune --op gated`, generator/gemm/tuned/<gpu>.json) serves the packed
weight shapes it has, per M bucket; these rows serve the rest.

Rows are tried in order; the first whose ``max_m`` covers M wins.  Decode (M <= 64) is the GEMM
family's: swap-AB with 64-row weight tiles and PDL, weight-bandwidth bound.  Above that the packed
[2I, K] weight makes N large (28672 for Llama-3-8B), and perf/sweep_gated.py on an H100 picked
(K = 4096, I = 14336, against torch.mm on the concatenated weight):
  M = 1024: pingpong 128x128, 2x1 cluster, swizzle 4      704 TF/s (torch.mm 657)
  M = 4096: pingpong 128x128, 1x2 cluster                 704 TF/s (torch.mm 714)
M <= 512 keeps the 1x2 cluster.  Later, in groups of three candidates with torch.compile of the
eager SwiGLU and torch.mm, ratios per repetition, shuffled order (perf/results/h100_sweep_gated.txt):
  M = 2048: pingpong 128x128, 1x2 cluster, swizzle 4 along M   1.10x torch.compile, 0.98x torch.mm;
            the 2x1 cluster, swizzle 4 row above it 0.95x / 0.86x
  M = 16384: pingpong 128x192, 1x2 cluster, swizzle 4          1.06x / 0.97x; along M 1.05x / 0.94x
Row bounds sit between the measured sizes.  Plain data (no torch): presets, the CLI and the runtime
read the same table.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ..gemm.heuristics import RULES as GEMM_RULES, Rule, first_row
from ..gemm.launch import LaunchOptions
from ..gemm.spec import TileConfig

_DECODE = tuple(rule for rule in GEMM_RULES["sm90a"] if rule.config.swap_ab)
SM90_RULES: Tuple[Rule, ...] = _DECODE + (
    # A 2x1 cluster needs two 128-row tiles of M: below that half of it would idle (M = 128 ran 2.5x slower).
    Rule(512, TileConfig((128, 128, 64), (1, 2, 1), "pingpong")),
    Rule(1536, TileConfig((128, 128, 64), (2, 1, 1), "pingpong"), LaunchOptions(swizzle=4)),
    Rule(3072, TileConfig((128, 128, 64), (1, 2, 1), "pingpong"), LaunchOptions(swizzle=4, raster="along_m")),
    Rule(8192, TileConfig((128, 128, 64), (1, 2, 1), "pingpong")),
    Rule(1 << 62, TileConfig((128, 192, 64), (1, 2, 1), "pingpong"), LaunchOptions(swizzle=4)),
)
RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": SM90_RULES}

# Rows a GPU measured otherwise (keys: fused_gemm.generator.gemm.tuned.gpu_key), each replacing the
# row with the same max_m.  H200, perf/sweep_gated.py at M = 16384 (81 candidates in groups of three
# with torch.compile of the eager SwiGLU and torch.mm on [2I, K], ratios per repetition,
# perf/results/h200_sweep_gated.txt): 128x128 1x2 pingpong, swizzle 8 along M, the best, 1.14x
# torch.compile and 0.99x torch.mm; the 128x192 row (then swizzle 4 along M) 0.83x / 0.75x.  The
# GEMM's tuned H200 table picks that tile for the [2I, K] shape too.
GPU_ROWS: Dict[str, Tuple[Rule, ...]] = {
    "h200": (Rule(1 << 62, TileConfig((128, 128, 64), (1, 2, 1), "pingpong"), LaunchOptions(swizzle=8, raster="along_m")),),
}


def vector_store(config: TileConfig) -> bool:
    """Whether gated_linear stores this tile with 16-byte stores (GatedSpec.vector_store): wherever the
    tile allows.  perf/gated_vs_gemm.py on an H100 at M = 16384 (128x192, 1x2 cluster, swizzle 4):
    1.9% fewer cycles per call than the pair-by-pair stores, level with our plain GEMM of the same
    tile (perf/results/h100_gated_vs_gemm.txt)."""
    return not config.swap_ab and config.tile[1] % 64 == 0


def row_index(arch: str, m: int) -> int:
    return first_row(RULES[arch], m)


def rule_for(arch: str, gpu: str, row: int) -> Rule:
    base = RULES[arch][row]
    return next((rule for rule in GPU_ROWS.get(gpu, ()) if rule.max_m == base.max_m), base)
