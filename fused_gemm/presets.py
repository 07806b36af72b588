"""Named lists of specs, for `fused-gemm build --preset NAME` and `fused-gemm codegen --preset`.

'linear' is every kernel ``fused_gemm.linear`` picks for one dtype/epilogue across all M buckets;
'gpu-tests' is what tests/test_gpu.py runs; 'bench' what perf/bench_linear.py runs.
"""
from __future__ import annotations

from typing import Dict, Iterable, List

from .generator import Epilogue, GemmSpec, TileConfig
from .heuristics import RULES

# Every activation once (with bias), plus residual, scales and everything together.
TEST_EPILOGUES = [
    "none", "bias", "bias+relu", "bias+gelu", "bias+gelu_tanh", "bias+silu", "bias+sigmoid",
    "bias+gelu_tanh+residual", "row_scale+col_scale", "row_scale+col_scale+bias+silu+residual",
]


def linear_specs(dtype: str = "bf16", epilogue: str = "none", out_dtype=None, residual_dtype=None,
                 arch: str = "sm90a") -> List[GemmSpec]:
    """The kernels ``linear`` uses for this dtype/epilogue, one per M bucket of the table."""
    ep = Epilogue.parse(epilogue)
    return [GemmSpec(dtype, out_dtype=out_dtype, residual_dtype=residual_dtype, epilogue=ep,
                     config=rule.config, arch=arch) for rule in RULES[arch]]


def _gpu_tests() -> Iterable[GemmSpec]:
    for dtype in ("bf16", "fp16"):
        for ep in TEST_EPILOGUES:
            yield from linear_specs(dtype, ep)
    yield from linear_specs("bf16", "bias+residual", out_dtype="fp32")
    yield GemmSpec("fp16", b_layout="kn", epilogue="bias+relu")
    yield GemmSpec("bf16", epilogue="bias+gelu_tanh", config=TileConfig(
        (128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True))


PRESETS: Dict[str, callable] = {
    "gpu-tests": lambda: list(dict.fromkeys(_gpu_tests())),
    "bench": lambda: linear_specs("bf16", "bias+gelu_tanh"),
    "compile-ci": lambda: [  # representative kernels compiled (not run) in CI
        GemmSpec("bf16", epilogue="bias+gelu_tanh"),
        linear_specs("fp16", "row_scale+col_scale+bias+silu+residual")[0],
    ],
}


def preset(name: str) -> List[GemmSpec]:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; presets: {sorted(PRESETS)}")
    return PRESETS[name]()
