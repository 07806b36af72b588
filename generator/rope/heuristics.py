"""Which rope kernel variant serves which M: data, read by fused_gemm.rope.api.select.

The tile is the GEMM's (its tuned table, else its heuristic).  On top of it, large prefill keeps part
of shared memory for L1 (RopeSpec.l1_reserve_kb): the epilogue reads each token's cos/sin row and
stores q/k/v through L1, and with every other byte given to mainloop stages (7 on 128x128x64) L1 is
left ~25 KB.  On an H100, Llama-3-8B QKV (6144x4096), against the plain GEMM of the same tile:
  * M = 16384, Nsight Compute: 7 stages 1.07x with 30% more DRAM traffic; 5 stages (64 KB kept)
    1.02x with the GEMM's DRAM traffic; in a CUDA graph 1.04-1.05x -> 0.94-0.97x.
  * M = 1024 / 4096, CUDA graph: 7 stages 1.02x / 1.02x, 5 stages 1.05x / 1.04x (fewer stages hide
    less latency where the cos/sin rows stay in L2 anyway).
"""
from __future__ import annotations

from typing import Tuple

from ..gemm.spec import TileConfig

# (from M on, KB kept for L1), rows in increasing M; below the first row nothing is kept.
L1_RESERVE_ROWS: Tuple[Tuple[int, int], ...] = ((8192, 64),)


def l1_reserve_kb(m: int, config: TileConfig) -> int:
    if config.swap_ab:
        return 0
    kb = 0
    for min_m, row_kb in L1_RESERVE_ROWS:
        if m >= min_m:
            kb = row_kb
    return kb
