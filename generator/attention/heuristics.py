"""Which attention kernel serves which problem: a table, not code.  Per (arch, head dim, causal),
rows of (largest Sq served, Q tile, K/V tile, persistent, overlapped mainloop, epilogues in turns, chained
tiles), the first that covers
Sq wins (Q tile None: the arch's default).  From perf/sweep_attention.py on an H100 and an H200 (bf16,
B*S = 16k tokens, H = 32; perf/results/h{100,200}_sweep_attention.txt), which agree:

  * without a mask the persistent kernel wins (its next tile's loads overlap this one's epilogue):
    D = 128 1k 0.90-0.92x cuDNN against 0.84, 8k 1.03x against 1.01x (H100);
  * with a causal mask, the persistent kernel in our causal order (then heaviest tiles first, L2-sized
    head sections; pairs of rows of equal work since, below) beats one CTA per tile at D = 128 at every length (1k 0.85-0.88x vs 0.78-0.81x, 4k
    1.07-1.10x vs 1.00-1.04x, 16k 1.12-1.13x vs 1.06-1.10x), and at D = 64 up to 4k; from 8k on
    one CTA per tile wins at D = 64 (8k 1.10x vs 0.86x, H100);
  * at D = 64, 192-row Q tiles (three consumer warpgroups: each K/V tile feeds 50% more rows) win
    from 4k on (1.04-1.14x cuDNN against 0.94-1.03x for the best 128-row kernel); at 1k the 128-row
    tile's finer grid wins;
  * the ping-pong softmax and 64-key tiles lost or tied everywhere: no row takes them.

Re-swept on the H100 at 1k and 4k after the epilogue began staging O in shared memory (2026-11-24):
every kernel gained, the persistent ones most (D = 128 1k 1.00x vs 0.89x, causal 0.94x vs 0.84x;
D = 64 1k 1.00x vs 0.87x), and the same rows win.  The overlapped mainloop (a warpgroup issues step
j's QK^T and step j-1's PV back to back) then wins where tiles are short: D = 64 up to 2k (1.01x vs
0.99x; causal 0.89x vs 0.84x) and D = 128 causal up to 1k (0.99x vs 0.95x); it loses 2-8% at D = 128 elsewhere
and ties at D = 64 from 4k on (perf/results/h100_sweep_attention.txt).  A build whose softmax truly runs
under the PV (the PV's wait moved to the next step, where ptxas cannot hoist it above the softmax) lost
where this table takes the shipped overlapped loop (D = 64 1k 0.93x vs 0.99x, D = 128 causal 1k 0.94x vs
0.99x; H100, 2026-11-26), so the shipped loop stays.  Computing every 2nd or 4th exp2 of the softmax with a
polynomial on the FMA pipe instead of MUFU (to lift D = 64's MUFU bound) lost everywhere (D = 64 1k 0.85-0.95x
vs 0.97x; 4k 192-row 0.97x vs 1.06x; H100, 2026-11-27).

The consumers' epilogues (2026-11-27, our own kernel in place of example 88's, which always has them take
turns; perf/sweep_attention.py --table-only --epilogues, each table kernel beside its twin, H100 / H200;
perf/results/h{100,200}_sweep_attention.txt): free epilogues win at D = 64 without a mask up to 2k
(+2.2% / +1.0%; a build of example 88's kernel without the turns, +3.5% on the H100) and with 192-row
tiles under a causal mask (one CTA per tile, 16k: +1.7% / +2.4%; persistent, 4k: -0.3% / +1.1%);
turns win at D = 64 causal up to 2k (+2.4% / +4.7%).  D = 128 ties within run-to-run noise (free, without a mask: 1k +0.5% / 0.0%, 4k
-1.0% / -1.0%; causal from 4k: -1.8% to +1.4%); there the table takes free epilogues without a mask
up to 1k and with a causal mask from 4k on, turns elsewhere.

Chained tiles (2026-11-27, `AttentionSpec(chain=True)`: each tile's first QK^T issued right after the
previous tile's last PV, under its softmax tail and epilogue; perf/sweep_attention.py --table-only
--variants, H100 / H200, against the rows before): D = 64 up to 2k, without a mask +0.6% / +2.3% (1k),
+1.4% / +1.1% (2k), causal (with the turns; free epilogues gain less) +1.7% / +3.2% (1k), +1.6% / +1.8%
(2k); at 4k the 192-row kernels stay ahead (0.92-0.99x against 1.06-1.10x cuDNN, H100).  At D = 128
a second Q stage a warpgroup does not fit beside the O tile and five K/V stages (four do: below).

Two CTAs an SM (2026-11-27, `block_m=64`: one consumer warpgroup a CTA, so that one CTA's tile start,
softmax tail and epilogue run under the other's GEMMs; perf/sweep_attention.py --variants, H100): one tile
per CTA with the overlapped mainloop wins at D = 64 causal 2k (0.99-1.01x cuDNN against 0.93-0.95x for the
chained tiles, three runs), ties at 1k (0.90-0.92x against 0.88-0.92x) and loses at 4k (1.00-1.06x against
1.02-1.08x for the 192-row tiles); persistent (0.85-0.88x at 1k) and at D = 128 (0.82-0.92x at 1k, three K/V
stages) it loses.  The table took it for D = 64 causal over 1k up to 2k until the balanced causal
order (below).

Balanced causal order and chained tiles at D = 128 (2026-11-27, thirteenth session; perf/sweep_attention.py
--table-only --variants, two runs on two H100s, perf/results/h100_sweep_attention.txt): the causal persistent
kernels now take a head's Q tile rows in pairs of equal work (FaCausalPersistentScheduler).  Against the same
kernels with the old order: D = 64 causal 1k +7% (0.94x / 0.97x cuDNN against 0.88x / 0.90x), D = 128 causal
2k +5% / +1%, 4k and D = 64 causal 4k within +-1.5%, D = 128 causal 1k -3% / 0% (the old rounds happen to
balance there at B = 16).  The chained tiles then also win D = 64 causal 2k (0.96x, and 1.01x for the
half-tile softmax build below, against 0.95x / 0.98x for the 64-row tiles, which leave the table), and at D = 128 (the
K/V ring shrunk to four stages beside the second Q stage) without a mask at 1k (1.08x against 1.02x, both
runs); they tie at 2k and under the causal mask at 1k.  The 64-row persistent kernel, now balanced too,
still loses at 1k (0.89x) and ties at 2k.  A softmax that skips the exponentials of a diagonal tile's right
half where a warpgroup's rows see none of it lost 2% (0.95x against 0.97x; D = 128 -2%): dropped.

Short sequences (2026-11-28, fourteenth session; perf/sweep_attention.py --table-only --also, --hkv 8 for GQA 32/8;
H100 runs F-J, H200 runs 1-3 in perf/results/h{100,200}_sweep_attention.txt): at S = 64 a 128-row Q tile is half
empty and the call is bound by memory, so 64-row tiles win there at both head dims.  D = 128, one tile a CTA with
the overlapped loop and free epilogues: 1.02-1.07x cuDNN (H100) / 1.20-1.28x (H200), against 0.74-0.89x / 0.74-0.94x.
D = 64, persistent: 1.23-1.53x against 0.60-1.03x.  At D = 64 causal they win to S = 128 too (0.90x / 0.81-0.88x
against 0.73x / 0.58-0.64x; from 160 on the chained tiles win, GQA or not).  At D = 128 they lose at S = 128 on the
H200 (0.81-0.85x against 0.86-0.94x) and at 96-128 with GQA on both GPUs, but win again under the causal mask at
160-192 (two tiles of 128 rows become three of 64; GQA 1.06-1.12x against 1.04-1.09x for the chained tiles, without
GQA 0.98-1.09x against 0.93-1.08x; H100 run J, H200 run 3) and lose from 224 on (0.81-0.89x against 0.92-1.08x).
Under the causal mask at D = 128, chained tiles win from 224 to 1k with GQA (1.00-1.13x against 0.95-1.07x);
without it they tie at 1k (three of five runs within 1%) and lose 1-2% at 256 on the H100, so the row rests on
GQA.  At 96-128 the overlapped kernel without chaining stays ahead (GQA 0.74-0.90x against 0.61-0.79x).

sm80 (example 41) has one kernel per (head dim, causal): no sweep on an sm80 GPU yet, so its rows
are xformers' choices: 64-row Q tiles with K/V tiles as wide as D (O stays in registers) up to
D = 128; at D = 256, 32x128 tiles with O accumulated in a float workspace (K/V tiles of 256 keys
would leave example 41's 32x32 warps more threads than a Q tile has 16-byte loads)."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from .spec import AttentionSpec

ANY = 1 << 31
FREE, TURNS = False, True            # the consumers' epilogues: free, or taking turns (example 88's way)
Row = Tuple[int, Optional[int], int, bool, bool, bool, bool]
# (max Sq, block_m, block_n, persistent, overlap, ordered epilogue, chained tiles)
TABLE: Dict[Tuple[str, int, bool], Tuple[Row, ...]] = {
    ("sm90a", 64, False): ((64, 64, 128, True, True, FREE, False), (2048, None, 128, True, True, FREE, True),
                           (ANY, 192, 128, True, False, FREE, False)),
    ("sm90a", 64, True): ((128, 64, 128, True, True, FREE, False), (2048, None, 128, True, True, TURNS, True),
                          (4096, 192, 128, True, False, FREE, False), (ANY, 192, 128, False, False, FREE, False)),
    ("sm90a", 128, False): ((64, 64, 128, False, True, FREE, False), (1024, None, 128, True, True, FREE, True),
                            (ANY, None, 128, True, False, TURNS, False)),
    ("sm90a", 128, True): ((64, 64, 128, False, True, FREE, False), (128, None, 128, True, True, TURNS, False),
                           (192, 64, 128, False, True, FREE, False), (1024, None, 128, True, True, TURNS, True),
                           (ANY, None, 128, True, False, FREE, False)),
    ("sm90a", 256, False): ((ANY, None, 64, False, False, TURNS, False),),
    ("sm90a", 256, True): ((ANY, None, 64, False, False, TURNS, False),),
    ("sm80", 64, False): ((ANY, None, 64, False, False, TURNS, False),),
    ("sm80", 64, True): ((ANY, None, 64, False, False, TURNS, False),),
    ("sm80", 128, False): ((ANY, None, 128, False, False, TURNS, False),),
    ("sm80", 128, True): ((ANY, None, 128, False, False, TURNS, False),),
    ("sm80", 256, False): ((ANY, None, 128, False, False, TURNS, False),),
    ("sm80", 256, True): ((ANY, None, 128, False, False, TURNS, False),),
}


def rows(head_dim: int, causal: bool, arch: str = "sm90a") -> Tuple[Row, ...]:
    return TABLE.get((arch, head_dim, causal), ((ANY, None, 64, False, False, TURNS, False),))


def row_index(head_dim: int, causal: bool, seqlen_q: int, arch: str = "sm90a") -> int:
    for i, (max_q, *_) in enumerate(rows(head_dim, causal, arch)):
        if seqlen_q <= max_q:
            return i
    raise AssertionError("the last row covers every Sq")


def pick(dtype: str, head_dim: int, causal: bool, seqlen_q: int = ANY, arch: str = "sm90a") -> AttentionSpec:
    """The kernel for Sq (the longest sequence, for varlen) queries; an unknown head dim gets a spec
    that refuses it with a clear error."""
    return spec_of(dtype, head_dim, causal, rows(head_dim, causal, arch)[row_index(head_dim, causal, seqlen_q, arch)], arch)


def spec_of(dtype: str, head_dim: int, causal: bool, row: Row, arch: str = "sm90a") -> AttentionSpec:
    _, block_m, block_n, persistent, overlap, ordered, chain = row
    return AttentionSpec(dtype, head_dim, causal, block_n, persistent, arch, block_m, overlap=overlap,
                         ordered_epilogue=ordered, chain=chain)
