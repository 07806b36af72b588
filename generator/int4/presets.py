"""Named lists of int4 specs (`fused-gemm build --preset ...`): 'int4-gpu-tests' is what
tests/test_int4.py runs on a GPU, 'int4-bench' what perf/bench_int4.py times, 'int4-sweep' the
alternatives its --sweep times."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ..gemm.spec import Epilogue
from .heuristics import RULES, SWEEP_CONFIGS, config_for
from .spec import Int4Spec

# (dtype, weight, epilogue, group size) sets the GPU tests run at every M bucket.
TEST_GROUPS = (64, 128)                   # and per channel (group size = K), served by the group-128 kernels
TEST_FULL_EPILOGUE = "bias+gelu_tanh+residual"


def int4_specs(dtype: str = "bf16", weight: str = "s4", epilogue: str = "none", group_size: int = 128,
               out_dtype: Optional[str] = None, arch: str = "sm90a") -> List[Int4Spec]:
    """The kernels ``int4_linear`` uses for these arguments, one per M bucket of its table (for a
    per-channel weight, pass any group size that is a multiple of 128)."""
    ep = Epilogue.parse(epilogue)
    k = 1 << 40   # a K no group equals: the group size alone decides the tile K
    return [Int4Spec(dtype, weight, out_dtype, epilogue=ep, config=config_for(rule, group_size, k), arch=arch)
            for rule in RULES[arch]]


def _gpu_tests() -> List[Int4Spec]:
    specs = []
    for dtype in ("bf16", "fp16"):
        for weight in ("s4", "u4"):
            specs += int4_specs(dtype, weight, TEST_FULL_EPILOGUE)
    for weight in ("s4", "u4"):
        for group in TEST_GROUPS:
            specs += int4_specs("bf16", weight, "none", group)
    return specs


PRESETS: Dict[str, Callable[[], List[Int4Spec]]] = {
    "int4-gpu-tests": _gpu_tests,
    "int4-bench": lambda: int4_specs("bf16", "s4", "none", 128),
    "int4-sweep": lambda: [Int4Spec("bf16", "s4", config=c) for c in SWEEP_CONFIGS],
    "int4-compile-ci": lambda: [int4_specs("bf16", "u4", TEST_FULL_EPILOGUE)[0]],
}
