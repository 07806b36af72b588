"""Named lists of rope specs (`fused-gemm build --preset ...`)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List

from ..gemm.heuristics import RULES
from ..gemm.presets import linear_specs
from .heuristics import L1_RESERVE_ROWS, gpu_rope_specs, measured_rows
from .spec import RopeSpec


def rope_specs(dtype: str = "bf16", head_dim: int = 128, rotary_dim: int = 0, style: str = "neox",
               bias: bool = False, arch: str = "sm90a") -> List[RopeSpec]:
    """The kernels ``qkv_rope`` uses for these arguments on a weight shape the GPU's tuned GEMM table
    lacks: one per rule of the GEMM heuristic, the prefill rule's large-M variant
    (heuristics.L1_RESERVE_ROWS), and every measured row (heuristics.ROWS, SHAPE_ROWS).
    gpu_rope_specs lists what a tuned shape may pick."""
    base = RopeSpec(dtype, head_dim, rotary_dim, style, bias, arch=arch)
    specs = [base.with_config(rule.config) for rule in RULES[arch]]
    return list(dict.fromkeys(specs + _with_l1_reserves(specs) + [row.apply(base)[0] for row in measured_rows()]))


def _with_l1_reserves(specs: List[RopeSpec]) -> List[RopeSpec]:
    return [replace(s, l1_reserve_kb=kb) for s in specs for _, kb in L1_RESERVE_ROWS if not s.config.swap_ab]


def _gpu_tests() -> List[RopeSpec]:
    specs = []
    for style in ("neox", "gptj"):
        specs += rope_specs("bf16", 128, 0, style)
        specs += rope_specs("bf16", 64, 32, style, bias=True)
        specs += rope_specs("bf16", 256, 128, style)      # a head spans two 128-column tiles
    specs += rope_specs("fp16", 128, 64, "neox", bias=True)
    return specs


def _tuned_gemms(n: int, k: int, dtype: str = "bf16") -> list:
    """The plain GEMMs the shipped tuned tables pick for one weight shape (what linear runs there)."""
    from ..gemm import tuned
    from ..gemm.spec import GemmSpec
    return [GemmSpec(dtype, epilogue="none", config=rule.config) for gpu in ("h100", "h200")
            for rule in ((tuned.load(gpu).rules(dtype, n, k) or ()) if tuned.load(gpu) else ())]


PRESETS: Dict[str, Callable[[], List[RopeSpec]]] = {
    "rope-tests": _gpu_tests,
    # one prefill kernel for the compile-only CI: GPT-J pairs, partial rotary, bias, the L1 reserve
    "rope-compile-ci": lambda: [RopeSpec("bf16", 128, 64, "gptj", True, l1_reserve_kb=64)],
    # with the plain GEMMs perf/bench_rope.py compares against
    "rope-bench": lambda: rope_specs("bf16", 128, 0, "neox") + linear_specs("bf16", "none") + _tuned_gemms(6144, 4096)
    + [s for gpu in ("h100", "h200") for s in gpu_rope_specs(gpu, 6144, 4096)],
}
