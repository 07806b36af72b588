"""Decode attention's choices, as data: the kernel per head dim and how many key ranges (splits) a
sequence is cut into.  Work groups (batch x kv head x row group) times splits are the CTAs; the
split count is the smallest that fills the GPU's CTA slots to WAVE_FILL in its last wave (one wave
of 256 groups on 264 slots needs no split at all, and no merge), keeping each split at least
MIN_KEYS long (shorter ones cost more to merge than they bring).  Measured on an H100
(perf/bench_decode.py)."""
from __future__ import annotations

from .spec import DecodeSpec

STAGES = {64: 4, 128: 3, 256: 2}          # two CTAs per SM at 128 (96 KB of shared memory each)
CTAS_PER_SM = {64: 2, 128: 2, 256: 1}
WAVE_FILL = 0.96
MIN_KEYS = 512


def pick(dtype: str, head_dim: int, arch: str = "sm90a") -> DecodeSpec:
    return DecodeSpec(dtype, head_dim, STAGES.get(head_dim, 2), arch)


def splits(groups: int, max_len: int, head_dim: int, sm_count: int) -> int:
    slots = sm_count * CTAS_PER_SM.get(head_dim, 1)
    most = max(1, -(-max_len // MIN_KEYS))
    for n in range(1, most + 1):
        ctas = groups * n
        waves = -(-ctas // slots)
        if ctas / (waves * slots) >= WAVE_FILL:
            return n
    return most
