"""Decode attention's choices, as data: the kernel per head dim and how many key ranges (splits) a
sequence is cut into.  Work groups (batch x kv head x row group) times splits are the CTAs; the
split count is the smallest that fills SPLIT_SLOTS_PER_SM CTAs an SM to WAVE_FILL in the last wave
(one wave of 256 groups needs no split at all, and no merge), keeping each split at least MIN_KEYS
long (shorter ones cost more to merge than they bring).  Measured on an H100 and an H200
(perf/bench_decode.py, perf/decode_splits.py)."""
from __future__ import annotations

from .spec import DecodeSpec

STAGES = {64: 4, 128: 3, 256: 2}          # two CTAs per SM fit at 128 (96 KB of shared memory each)
# The CTAs an SM the split count aims for.  At 128 one: a split CTA alone on its SM streams its keys
# about as fast as two do, and every split adds merge work.  Llama-3-8B's 8 kv heads at 32k keys
# (perf/results/h{100,200}_decode_splits.txt): B = 1 ran at 0.96-0.98x SDPA's speed with 16 splits
# (128 CTAs) against 0.89-0.91x with 32 (256 CTAs, two an SM); B = 2 and 4 on the H200 likewise best
# at 128 CTAs.
SPLIT_SLOTS_PER_SM = {64: 2, 128: 1, 256: 1}
WAVE_FILL = 0.96
# The shortest split, in keys: shorter ones cost more to merge than they bring.  At D = 128 short caches
# with few groups split down to 128: on an H100 at 1k keys B = 1 / 2 / 4 (8 kv heads) ran 7.9 / 8.6 /
# 9.5 us with 8 / 8 / 4 splits against 12.5 / 12.5 / 12.6 with the 2 that 512 allowed, and at 4k B = 1
# 10.8 us with 16 against 13.0 with 8; at 512 keys B = 1 / 2 / 4 7.5 / 7.6 / 8.1 us with 4 against 9.3
# unsplit, B = 8 a tie; at 256 keys splitting lost at every B up to 8, so those stay whole
# (perf/results/h100_decode_splits.txt).  Other head dims keep 512 (not measured); and no cache splits
# more ways than 512 keys a split or 16 would give, so long caches (measured at 512: one 32k sequence,
# MQA) keep their counts.
MIN_KEYS = {128: 128}
MIN_KEYS_DEFAULT = 512
SHORT_SPLITS = 16
UNSPLIT_KEYS = 256


def pick(dtype: str, head_dim: int, arch: str = "sm90a") -> DecodeSpec:
    return DecodeSpec(dtype, head_dim, STAGES.get(head_dim, 2), arch)


def splits(groups: int, max_len: int, head_dim: int, sm_count: int) -> int:
    slots = sm_count * SPLIT_SLOTS_PER_SM.get(head_dim, 1)
    by_default = -(-max_len // MIN_KEYS_DEFAULT)
    most = max(1, -(-max_len // MIN_KEYS.get(head_dim, MIN_KEYS_DEFAULT)))
    if max_len <= UNSPLIT_KEYS:
        most = 1
    most = min(most, max(by_default, SHORT_SPLITS))
    for n in range(1, most + 1):
        ctas = groups * n
        waves = -(-ctas // slots)
        if ctas / (waves * slots) >= WAVE_FILL:
            return n
    return most
