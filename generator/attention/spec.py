"""The attention family's spec: flash-attention forward, one kernel per spec, on one of two arches:

  * sm90a: CUTLASS example 88's warp-specialized mainloop with our kernel, masks, loads and epilogue
    (csrc/fused_gemm/attention/sm90_fmha.hpp, sm90_fmha_kernel.hpp);
  * sm80: CUTLASS example 41's (xformers') mma.sync kernel, with our per-block problem set-up
    (csrc/fused_gemm/attention_sm80/sm80_fmha.hpp): the path of compute capability 8.x GPUs, and
    the fallback that Hopper can be forced onto (FUSED_GEMM_ATTENTION_BACKEND=sm80).

Runtime arguments (not in the spec): batch, heads (GQA: Hq a multiple of Hkv), lengths (fixed or
cu_seqlens), strides, scale, LSE or not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import SpecError
from ..uri import parse as uri_parse
from ..gemm.spec import canonical_dtype

DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128, 256)
ARCHES = ("sm90a", "sm80")
BLOCK_N = (64, 128)
BLOCK_M = 128                         # sm90a's default Q tile: two consumer warpgroups of 64 rows
SM90_BLOCK_M = (64, 128, 192)         # sm90a: 64 Q rows per consumer warpgroup; three fit registers at D = 64 only
SM80_BLOCK_M = (32, 64)               # sm80: Q rows per CTA (warps = block_m * block_n / 32^2)
KV_STAGES = 5                         # example 88's K/V ring on sm90a (a stage holds one K or one V tile)
SM90_SMEM_BYTES = (227 << 10) - (1 << 10)   # an sm90 CTA's shared memory, less the kernel's barriers
# Two CTAs an SM (64-row Q tiles): each gets half of the SM's 228 KB less its 1 KB reserve, less barriers.
SM90_PAIR_SMEM_BYTES = (113 << 10) - (1 << 9)


@dataclass(frozen=True)
class AttentionSpec:
    """softmax(scale * Q K^T [+ causal mask]) V for one dtype and head dim.

    ``block_n`` is the K/V tile (keys per mainloop step); ``persistent`` (sm90a only) launches one
    CTA per SM that walks the tiles (example 88's persistent kernel; our own order under a causal
    mask), else one CTA per (Q tile, head,
    batch).  ``block_m`` is the Q tile: on sm90a 64 rows per consumer warpgroup, 128 (two, the default)
    or 192 (three, D = 64 only: each K/V tile then feeds more rows), or 64 (one, with two CTAs an SM:
    one CTA's tile start, softmax tail and epilogue run under the other's GEMMs, where a CTA's
    warpgroups of one tile reach them together; the K/V ring shrinks to fit, ``kv_stages``); 32 or 64 on sm80 (default 64, and 32
    for D = 256 as example 41 builds it).  On sm80 the K/V tile is also the tile of V's head dim:
    with block_n >= D, O stays in registers across K/V tiles; with block_n < D (D = 256: example
    41's warps of 32x32 cannot load a Q tile when block_n > 128) O accumulates in a float
    workspace of [tokens, Hq, D] in global memory (``o_workspace``).

    ``pingpong`` (sm90a only): the consumer warpgroups take turns at the softmax (example 88's
    kIsMainloopLocked, FA3's inter-warpgroup ping-pong; not example 88's "Pingpong" kernel, which is
    its persistent one), so one's softmax runs while the others' GEMMs keep the tensor cores busy.

    ``overlap`` (sm90a only, not with ``pingpong``): each warpgroup issues a step's QK^T and the previous
    step's PV back to back, as FA3's intra-warpgroup pipelining does.  (The softmax was meant to run
    under that PV; ptxas moves the PV's wait above it, see FaMainloop::compute.)

    ``ordered_epilogue`` (sm90a only): the consumer warpgroups take turns at the epilogue, as example
    88's kernel always has them do (see csrc/fused_gemm/attention/sm90_fmha_kernel.hpp); False lets
    each store its O as soon as its mainloop ends.

    ``chain`` (sm90a, persistent, overlapped mainloop): a warpgroup issues its next tile's first QK^T
    right after this tile's last PV, so that it runs under this tile's softmax tail and epilogue; the
    next tile's Q then needs a second Q stage per warpgroup (at D = 128 the K/V ring shrinks to four
    stages to make room).
    """
    family = "attention"

    dtype: str = "bf16"
    head_dim: int = 128
    causal: bool = False
    block_n: int = 128
    persistent: bool = False
    arch: str = "sm90a"
    block_m: Optional[int] = None     # None: the arch's default (see above)
    pingpong: bool = False
    overlap: bool = False
    ordered_epilogue: bool = True
    chain: bool = False

    def __post_init__(self):
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.dtype not in DTYPES:
            raise SpecError(f"attention dtype {self.dtype!r} is not one of {DTYPES}")
        if self.head_dim not in HEAD_DIMS:
            raise SpecError(f"head_dim {self.head_dim} is not one of {HEAD_DIMS}")
        if self.arch not in ARCHES:
            raise SpecError(f"arch {self.arch!r} is not supported by the attention family; supported: {ARCHES}")
        if self.block_n not in BLOCK_N:
            raise SpecError(f"block_n {self.block_n} is not one of {BLOCK_N}")
        if self.arch == "sm90a":
            self._check_sm90()
        else:
            self._check_sm80()

    def _check_sm90(self) -> None:
        if self.block_m is None:
            object.__setattr__(self, "block_m", BLOCK_M)
        if self.block_m not in SM90_BLOCK_M:
            raise SpecError(f"sm90a attention block_m {self.block_m} is not one of {SM90_BLOCK_M}")
        if self.block_m > BLOCK_M and self.head_dim != 64:
            raise SpecError(f"sm90a attention block_m {self.block_m} needs head_dim 64 (registers of three "
                            f"consumer warpgroups), got {self.head_dim}")
        if self.head_dim == 256 and self.block_n != 64:
            raise SpecError("head_dim 256 needs block_n 64 (shared memory)")
        if self.block_m == 64 and self.pingpong:
            raise SpecError("block_m 64 has one consumer warpgroup: no ping-pong softmax")
        if self.overlap and self.pingpong:
            raise SpecError("overlap and pingpong are two different mainloops: pick one")
        if self.chain and not (self.persistent and self.overlap and self.block_m == BLOCK_M):
            raise SpecError("chain (the next tile's first QK^T issued early) needs persistent=True, overlap=True "
                            f"and the {BLOCK_M}-row Q tile")
        if self.kv_stages < 3:                      # example 88's loop needs a K and a V stage beside the one it reads
            raise SpecError(f"this sm90a attention kernel leaves room for {self.kv_stages} K/V stage(s) at head_dim "
                            f"{self.head_dim} ({'two CTAs an SM, ' if self.ctas_per_sm > 1 else ''}"
                            f"{'two Q tiles (chain), ' if self.chain else ''}"
                            f"{'its own O tile (persistent)' if self.persistent else 'the Q tile'}); it needs 3")
        if self.smem_bytes > SM90_SMEM_BYTES:
            raise SpecError(f"this sm90a attention kernel needs {self.smem_bytes >> 10} KB of shared memory "
                            f"(Q tile, {self.kv_stages} K/V stages{', O tile' if self.persistent else ''}); "
                            f"an sm90 CTA has {SM90_SMEM_BYTES >> 10} KB")

    def _check_sm80(self) -> None:
        if self.block_m is None:
            object.__setattr__(self, "block_m", 64 if self.head_dim <= 128 else 32)
        if self.block_m not in SM80_BLOCK_M:
            raise SpecError(f"sm80 attention block_m {self.block_m} is not one of {SM80_BLOCK_M}")
        if self.persistent:
            raise SpecError("sm80 attention has no persistent variant (example 41 launches one CTA per tile)")
        if self.pingpong:
            raise SpecError("sm80 attention has no ping-pong variant (example 41's warps share one tile)")
        if self.overlap:
            raise SpecError("sm80 attention has no overlapped mainloop (example 41's)")
        if not self.ordered_epilogue:
            raise SpecError("sm80 attention has no epilogue order to lift (example 41's warps share one tile)")
        if self.chain:
            raise SpecError("sm80 attention has no chained tiles (example 41 launches one CTA per tile)")

    @property
    def ctas_per_sm(self) -> int:
        """sm90a: CTAs an SM (launch bounds, register split, persistent grid): two for 64-row Q tiles."""
        return 2 if self.arch == "sm90a" and self.block_m == 64 else 1

    @property
    def _q_and_o_bytes(self) -> int:
        """The Q tile (two with ``chain``) and the O tile the epilogue stages its stores in (16-bit
        elements); without a persistent scheduler the O tile overlays the Q tile (the kernel's union)."""
        return 2 * self.head_dim * ((2 if self.chain else 1) + (1 if self.persistent else 0)) * self.block_m

    @property
    def kv_stages(self) -> int:
        """sm90a: stages of the K/V ring (each one K or one V tile): example 88's five, or as many as
        fit beside the Q and O tiles (two CTAs an SM; chained tiles at D = 128, whose second Q stage a
        warpgroup leaves room for four)."""
        if self.ctas_per_sm == 1 and not self.chain:
            return KV_STAGES
        budget = SM90_SMEM_BYTES if self.ctas_per_sm == 1 else SM90_PAIR_SMEM_BYTES
        return min(KV_STAGES, (budget - self._q_and_o_bytes) // (2 * self.head_dim * self.block_n))

    @property
    def smem_bytes(self) -> int:
        """sm90a: the Q and O tiles and the K/V ring."""
        return self._q_and_o_bytes + 2 * self.head_dim * self.kv_stages * self.block_n

    @property
    def o_workspace(self) -> bool:
        """Whether the kernel accumulates O in a float workspace (sm80 with block_n < head_dim)."""
        return self.arch == "sm80" and self.block_n < self.head_dim

    @property
    def csrc_includes(self) -> Tuple[str, ...]:
        """csrc/fused_gemm folders beyond the family's own that the kernel includes (they enter its
        cache key alone).  The sm80 launcher lives outside csrc/fused_gemm/attention because every
        header in that folder enters every attention kernel's key: sm90a builds stay valid."""
        return ("attention_sm80",) if self.arch == "sm80" else ()

    @property
    def include_folders(self) -> Tuple[str, ...]:
        """csrc/ folders on the <...> include path: the sm80 kernel's cuRAND shim (see there)."""
        return ("fused_gemm/attention_sm80",) if self.arch == "sm80" else ()

    @property
    def uri(self) -> str:
        mask = "_causal" if self.causal else ""
        persist = "_persist" if self.persistent else ""
        mainloop = "_pingpong" if self.pingpong else "_ovl" if self.overlap else ""
        tile = f"_bm{self.block_m}" if self.arch != "sm90a" or self.block_m != BLOCK_M else ""   # URIs as before
        epilogue = "" if self.ordered_epilogue else "_freeepi"
        chain = "_chain" if self.chain else ""
        return (f"attention_{self.arch}_{self.dtype}_d{self.head_dim}{mask}{tile}_bn{self.block_n}{persist}"
                f"{mainloop}{chain}{epilogue}")

    @classmethod
    def from_uri(cls, uri: str) -> "AttentionSpec":
        return uri_parse(cls, _URI, uri, "an attention", lambda g: cls(
            g["dtype"], int(g["d"]), g["causal"] is not None, int(g["bn"]), g["persist"] is not None, g["arch"],
            None if g["bm"] is None else int(g["bm"]), g["mainloop"] == "_pingpong", g["mainloop"] == "_ovl",
            g["freeepi"] is None, g["chain"] is not None))


_URI = re.compile(r"^attention_(?P<arch>sm\d+a?)_(?P<dtype>[a-z0-9]+)_d(?P<d>\d+)(?P<causal>_causal)?"
                  r"(?:_bm(?P<bm>\d+))?_bn(?P<bn>\d+)(?P<persist>_persist)?(?P<mainloop>_pingpong|_ovl)?"
                  r"(?P<chain>_chain)?(?P<freeepi>_freeepi)?$")
