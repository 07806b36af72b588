"""Named lists of attention specs (`fused-gemm build --preset ...`)."""
from __future__ import annotations

from typing import Callable, Dict, List

from .heuristics import rows, spec_of
from .spec import AttentionSpec


def attention_specs(dtype: str = "bf16", head_dim: int = 128, arch: str = "sm90a") -> List[AttentionSpec]:
    """The kernels ``attention`` uses for this dtype and head dim (causal and not, every length)."""
    return [spec_of(dtype, head_dim, causal, row, arch) for causal in (False, True) for row in rows(head_dim, causal, arch)]


def _gpu_tests(arch: str = "sm90a") -> List[AttentionSpec]:
    specs = []
    for dtype in ("bf16", "fp16"):
        for head_dim in (64, 128):
            specs += attention_specs(dtype, head_dim, arch)
    return specs + attention_specs("bf16", 256, arch)


def variants() -> List[AttentionSpec]:
    """One kernel of each kind perf/sweep_attention.py weighs (the causal persistent order, the
    ping-pong softmax, the overlapped mainloop, the 192- and 64-row Q tiles, persistent or not, the epilogues
    in turns or free, chained tiles):
    tests/test_attention.py runs them directly on shapes the table's length rows would not send them, so that a table change never
    picks an untested kind."""
    return [AttentionSpec("bf16", 128, True, 128, True),
            AttentionSpec("bf16", 128, True, 128, True, pingpong=True),
            AttentionSpec("bf16", 64, False, 128, True, block_m=192),
            AttentionSpec("bf16", 64, True, 128, False, block_m=192),
            AttentionSpec("bf16", 64, True, 128, True, block_m=192),
            AttentionSpec("bf16", 64, True, 128, True, block_m=192, pingpong=True),
            AttentionSpec("bf16", 128, False, 128, True, overlap=True),
            AttentionSpec("bf16", 64, True, 128, False, block_m=192, overlap=True),
            AttentionSpec("bf16", 128, True, 128, False, ordered_epilogue=False),   # free O tiles over the mainloop's
            AttentionSpec("bf16", 64, True, 128, True, overlap=True, ordered_epilogue=False),
            AttentionSpec("bf16", 64, True, 128, True, overlap=True, ordered_epilogue=False, chain=True),
            AttentionSpec("bf16", 128, True, 128, True, overlap=True, chain=True),   # four K/V stages
            AttentionSpec("bf16", 128, True, 128, True, pingpong=True, ordered_epilogue=False),
            # two CTAs an SM: one tile a CTA, a persistent grid of 2 x SMs, and at D = 128 3 K/V stages
            AttentionSpec("bf16", 64, True, 128, False, block_m=64, overlap=True, ordered_epilogue=False),
            AttentionSpec("bf16", 64, True, 128, True, block_m=64, overlap=True, ordered_epilogue=False),
            AttentionSpec("bf16", 128, False, 128, False, block_m=64),
            AttentionSpec("bf16", 128, True, 128, False, block_m=64, overlap=True, ordered_epilogue=False)]


PRESETS: Dict[str, Callable[[], List[AttentionSpec]]] = {
    "attention-tests": lambda: list(dict.fromkeys(_gpu_tests() + variants())),
    "attention-bench": lambda: [s for d in ("bf16", "fp16") for hd in (64, 128) for s in attention_specs(d, hd)],
    "attention-compile-ci": lambda: [AttentionSpec("bf16", 128, causal=True)],
    # The sm80 kernels (example 41): what tests/test_attention.py runs with FUSED_GEMM_ATTENTION_BACKEND=sm80
    # (on an H100 too), and one for CI's compile check.
    "attention-sm80-tests": lambda: _gpu_tests("sm80"),
    "attention-sm80-bench": lambda: [s for d in ("bf16", "fp16") for hd in (64, 128)
                                     for s in attention_specs(d, hd, "sm80")],
    "attention-sm80-compile-ci": lambda: [AttentionSpec("bf16", 128, causal=True, arch="sm80")],
}
