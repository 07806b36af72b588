"""Named lists of quant specs and of the W8A8 fp8 kernel sets (`fused-gemm build --preset ...`):
'fp8-gpu-tests' is what tests/test_fp8.py runs (fp8 GEMMs and quantisers), 'fp8-bench' what
perf/bench_fp8.py runs."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List

from ..gemm.presets import fp8_linear_specs, tuned_kernel
from ..gemm.spec import Epilogue, GemmSpec, TileConfig
from ..gemm.tuning_space import SM90_E4M3_FAST
from .spec import QuantSpec

# The fp8 mainloop's longer promotion intervals (2, 4 and 8 k-tiles), which no rule of the heuristic takes:
# (tile K, promotion) for tests/test_fp8.py's test_promotion_intervals_and_leftover_k_tiles.
PROMOTION_TEST_CASES = [(128, 8), (128, 16), (64, 16)]


def promotion_test_spec(tile_k: int, promotion: int) -> GemmSpec:
    return tuned_kernel("fp8", "e4m3", TileConfig((128, 128, tile_k), (1, 1, 1), "cooperative"), promotion)


# (epilogue, output dtype): both scale granularities, mixed ones, bias, activations, residual.
FP8_TEST_EPILOGUES = [
    ("row_scale+col_scale", "bf16"),
    ("a_scale+b_scale", "bf16"),
    ("row_scale+col_scale+bias+silu", "fp16"),
    ("a_scale+col_scale+bias+gelu_tanh+residual", "bf16"),
    ("row_scale+b_scale+bias+relu", "bf16"),
]


# The fast-accumulation candidates whose epilogue reads its vectors ahead, as the precise kernels' does (the
# cooperative tiles; ping-pong ones keep CUTLASS's broadcasts): fp8_linear(use_fast_accum=True) runs them where
# a tuned table names them.
FAST_COOPERATIVE_CONFIGS = [c.config for c in SM90_E4M3_FAST
                            if tuned_kernel("fp8_fast", "e4m3", c.config).vectors_ahead]


def fast_cooperative_specs(epilogue: str, out: str) -> List[GemmSpec]:
    """The kernels test_fp8.py's test_fast_accumulation_cooperative_tiles runs for this epilogue."""
    return [replace(tuned_kernel("fp8_fast", "e4m3", c), epilogue=Epilogue.parse(epilogue), out_dtype=out,
                    bias_dtype=None, residual_dtype=None)
            for c in FAST_COOPERATIVE_CONFIGS]


def _fp8_gpu_tests() -> list:
    specs = [QuantSpec("bf16"), QuantSpec("fp16")]
    for epilogue, out in FP8_TEST_EPILOGUES:
        specs += fp8_linear_specs(epilogue, out) + fast_cooperative_specs(epilogue, out)
    specs += fp8_linear_specs("row_scale+col_scale", fast_accum=True)
    specs += fp8_linear_specs("row_scale+col_scale", "fp32")
    specs += [promotion_test_spec(*case) for case in PROMOTION_TEST_CASES]
    return specs


PRESETS: Dict[str, Callable[[], List]] = {
    "quant-tests": lambda: [QuantSpec("bf16"), QuantSpec("fp16")],
    "quant-compile-ci": lambda: [QuantSpec("bf16")],
    "fp8-gpu-tests": _fp8_gpu_tests,
    "fp8-bench": lambda: ([QuantSpec("bf16")] + fp8_linear_specs("row_scale+col_scale") +
                          fp8_linear_specs("row_scale+col_scale", fast_accum=True)),
}
