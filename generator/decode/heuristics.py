"""Decode attention's choices, as data: the kernel per head dim and how many key ranges (splits) a
sequence is cut into, from the cache's capacity and the number of (batch, kv head, row group) work
groups: enough CTAs for several waves of the GPU, each streaming at least MIN_KEYS keys."""
from __future__ import annotations

from .spec import DecodeSpec

STAGES = {64: 4, 128: 3, 256: 2}          # two CTAs per SM at 128 (96 KB of shared memory each)
CTAS_PER_SM = {64: 2, 128: 2, 256: 1}
WAVES = 4                                 # CTAs per slot to aim for: the last wave's loss stays small
MIN_KEYS = 512                            # a split shorter than this costs more in merging than it gains


def pick(dtype: str, head_dim: int, arch: str = "sm90a") -> DecodeSpec:
    return DecodeSpec(dtype, head_dim, STAGES.get(head_dim, 2), arch)


def splits(groups: int, max_len: int, head_dim: int, sm_count: int) -> int:
    slots = sm_count * CTAS_PER_SM.get(head_dim, 1)
    wanted = -(-WAVES * slots // max(groups, 1))
    return max(1, min(wanted, -(-max_len // MIN_KEYS)))
