"""Which attention kernel serves which head dim: a table, not code.  Tiles as CUTLASS example 88
runs them (128 x 128 at D = 128, 128 x 64 at D = 64 and 256); one CTA per (Q tile, head, batch)."""
from __future__ import annotations

from typing import Dict

from .spec import AttentionSpec

# (arch, head_dim) -> block_n
BLOCK_N: Dict[tuple, int] = {("sm90a", 64): 64, ("sm90a", 128): 128, ("sm90a", 256): 64}
PERSISTENT: Dict[tuple, bool] = {("sm90a", 64): False, ("sm90a", 128): False, ("sm90a", 256): False}


def pick(dtype: str, head_dim: int, causal: bool, arch: str = "sm90a") -> AttentionSpec:
    key = (arch, head_dim)
    return AttentionSpec(dtype, head_dim, causal, BLOCK_N.get(key, 64), PERSISTENT.get(key, False), arch)
