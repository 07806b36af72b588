"""The attention family's command-line flags (`fused-gemm codegen/build --family attention ...`).
--dtype is the GEMM family's and --head-dim the rope family's, shared."""
from __future__ import annotations

from .spec import ARCHES, BLOCK_N, SM80_BLOCK_M, SM90_BLOCK_M, AttentionSpec


def add_arguments(g) -> None:
    g.add_argument("--causal", action="store_true", help="bottom-right aligned causal mask")
    g.add_argument("--block-n", type=int, default=128, choices=BLOCK_N, help="keys per mainloop step")
    g.add_argument("--persistent", action="store_true", help="one CTA per SM walking the tiles (sm90a)")
    g.add_argument("--attention-arch", default="sm90a", choices=ARCHES,
                   help="sm90a: example 88's mainloop in our kernel; sm80: example 41's kernel (8.x GPUs, the fallback elsewhere)")
    g.add_argument("--block-m", type=int, choices=sorted(set(SM80_BLOCK_M + SM90_BLOCK_M)),
                   help="Q rows per CTA (default: 128 on sm90a, by head dim on sm80)")
    g.add_argument("--pingpong", action="store_true",
                   help="sm90a: consumer warpgroups take turns at the softmax (example 88's kIsMainloopLocked)")
    g.add_argument("--overlap", action="store_true",
                   help="sm90a: a warpgroup issues a step's QK^T and the previous step's PV back to back")
    g.add_argument("--free-epilogue", action="store_true",
                   help="sm90a: consumer warpgroups store O without taking turns (example 88's kernel orders them)")
    g.add_argument("--chain", action="store_true",
                   help="sm90a, --persistent --overlap: a tile's first QK^T issued before the previous tile's epilogue")


def spec_from_args(args) -> AttentionSpec:
    return AttentionSpec(args.dtype, args.head_dim, args.causal, args.block_n, args.persistent,
                         args.attention_arch, args.block_m, args.pingpong, args.overlap, not args.free_epilogue,
                         args.chain)
