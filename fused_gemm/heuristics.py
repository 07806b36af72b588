"""Which kernel configuration serves which M: a table, not code.

Rows are tried in order; the first whose ``max_m`` covers M wins.  Decode sizes use swap-AB so
that the weight's N fills the 128-row side of the tile and M becomes the narrow N side, with a
stream-K scheduler to spread the K loop over all SMs when there are fewer tiles than SMs.
Tuned on H100/H200 with perf/bench_linear.py (numbers in README.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from .generator import TileConfig
from .runtime import LaunchOptions


@dataclass(frozen=True)
class Rule:
    max_m: int                                          # inclusive upper bound of M this row serves
    config: TileConfig                                  # compile-time: one kernel per row
    launch: LaunchOptions = LaunchOptions()             # runtime scheduler knobs


_BIG_M = 1 << 62
SM90_RULES: Tuple[Rule, ...] = (
    Rule(16, TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)),
    Rule(64, TileConfig((128, 64, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)),
    Rule(_BIG_M, TileConfig((128, 256, 64), (2, 1, 1), "cooperative", "persistent")),
)
RULES: Dict[str, Tuple[Rule, ...]] = {"sm90a": SM90_RULES}


def row_index(arch: str, m: int) -> int:
    """Index of the first rule of ``arch`` that serves M tokens."""
    for i, rule in enumerate(RULES[arch]):
        if m <= rule.max_m:
            return i
    raise AssertionError("the last rule covers every M")


def pick(arch: str, m: int) -> Rule:
    return RULES[arch][row_index(arch, m)]
