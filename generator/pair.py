"""What the pair epilogue (csrc/fused_gemm/pair/sm90_pair_epilogue.hpp) needs of a tile config,
checked in the specs of the families built on it (gated, rope) so that nvcc never meets a
static_assert: the weight's side of the tile a multiple of 16 (pairs live in 16-row blocks), and
each consumer thread's accumulator count a whole number of 32-value batches (or of 8, below 32)."""
from __future__ import annotations

from .errors import SpecError
from .gemm.spec import TileConfig

BATCH_VALUES = 32   # the PairOps' kBatchValues
# csrc/fused_gemm folders a kernel on the pair epilogue includes (they enter its cache key): the epilogue,
# and evt/ for the no-workspace hooks it shares with our EVT nodes (evt/sm90_node.hpp).
CSRC_INCLUDES = ("pair", "evt")


def check_pair_config(config: TileConfig, family: str) -> None:
    if config.scheduler != "persistent" or config.epilogue_tile is not None:
        raise SpecError(f"{family} kernels use the persistent tile scheduler (no stream-K) and store from "
                        "registers (no epilogue_tile)")
    if (config.tile[0] if config.swap_ab else config.tile[1]) % 16:
        raise SpecError(f"tile {config.tile}: the weight's side of the tile must be a multiple of 16 "
                        "(pairs live in 16-row blocks)")
    threads = 256 if config.schedule == "cooperative" else 128
    values = config.tile[0] * config.tile[1] // threads
    if values % (BATCH_VALUES if values >= BATCH_VALUES else 8):
        raise SpecError(f"tile {config.tile} ({config.schedule}): {values} accumulators per thread do not split into "
                        f"the pair epilogue's batches ({BATCH_VALUES} values, or a multiple of 8 below that)")
