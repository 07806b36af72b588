"""The weight-streaming decode kernels' shape (csrc/fused_gemm/gemv: the int4 family's decode kernel and
the GEMM family's dense one): a config that names one of them in place of a wgmma ``TileConfig``.
Plain data; the families' specs check what else their kernel needs."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import SpecError

# Warps a CTA: 12 and 16 (384 / 512 threads, at most 168 / 128 registers a thread) serve the int4 kernel's
# 4-block CTAs; wider CTAs of so many warps spill.
WARPS = (1, 2, 4, 8, 12, 16)
UNROLLS = (1, 3, 4)   # chunks a register stage a config may name (0: the kernel's own)
CSRC_FOLDER = "gemv"   # the shared split-K reduction, launch and device set-up (sm90_gemv.hpp)


@dataclass(frozen=True)
class DecodeConfig:
    """The decode kernel's shape: up to ``tokens`` (8 or 16) rows of x; CTAs of ``warps`` warps that
    split K, each CTA owning ``blocks`` 16-row blocks of the weight (its launcher splits K further
    across a cluster, by N and the SM count)."""
    tokens: int = 16
    warps: int = 4
    blocks: int = 8
    # The dense kernel's K chunks (a row's 128-byte line) per register stage (two stages in flight a warp),
    # one of UNROLLS: 3 takes ~180 registers a thread with 16 tokens and 16-bit weights, so two 4-warp CTAs
    # an SM instead of three, and 4 ~196, still two (5 spills); 1 serves e4m3 weights with 16 tokens, whose
    # x fragments take twice the registers (~100 a thread, four CTAs an SM); 0 is the kernel's own (2 with
    # one block, 1 with more).  Part of the name only when set.
    unroll: int = 0

    def __post_init__(self):
        if self.tokens not in (8, 16):
            raise SpecError(f"decode tokens {self.tokens} must be 8 or 16 (one or two 8-wide MMA tiles)")
        if self.warps not in WARPS:
            raise SpecError(f"decode warps {self.warps} must be one of {WARPS}")
        if self.blocks not in (1, 2, 4, 8):
            raise SpecError(f"decode blocks {self.blocks} must be 1, 2, 4 or 8 (16-row weight blocks per CTA)")
        if self.unroll and (self.unroll not in UNROLLS or self.blocks != 1):
            raise SpecError(f"decode unroll {self.unroll}: 0 (the kernel's own), or {' or '.join(map(str, UNROLLS))} "
                            "chunks a stage with blocks=1")

    @property
    def name(self) -> str:
        return f"decode_t{self.tokens}_w{self.warps}_b{self.blocks}" + (f"_u{self.unroll}" if self.unroll else "")

    @classmethod
    def from_name(cls, name: str) -> "DecodeConfig":
        m = re.fullmatch(DECODE_NAME, name)
        if not m:
            raise SpecError(f"{name!r} is not a decode config name (decode_t<tokens>_w<warps>_b<blocks>[_u<unroll>])")
        return cls(int(m["tokens"]), int(m["warps"]), int(m["blocks"]), int(m["unroll"] or 0))


DECODE_NAME = r"decode_t(?P<tokens>\d+)_w(?P<warps>\d+)_b(?P<blocks>\d+)(?:_u(?P<unroll>\d+))?"

DECODE_URI = r"decode_t\d+_w\d+_b\d+(?:_u\d+)?"    # the same, without groups, inside a family's URI regex


def check_dense_decode(config: DecodeConfig, weight_bits: int) -> None:
    """What the dense decode kernel (csrc/fused_gemm/gemv/sm90_dense_decode.hpp) holds in registers without
    spilling: the GEMM family's 16-bit weights, or the int4 family's e4m3 ones (weight_bits 8), whose x fragments
    take twice the registers a chunk."""
    if config.blocks > 4:
        raise SpecError(f"decode blocks {config.blocks}: the dense decode kernel keeps two stages of every 16-row "
                        "block in registers; more than 4 blocks spill")
    if weight_bits == 8 and config.tokens == 16 and config.unroll == 4:
        raise SpecError("decode unroll 4 with 16 tokens spills on an e4m3 weight (x's fragments take twice the "
                        "registers): 3 chunks a stage at most")
