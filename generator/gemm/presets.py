"""Named lists of GEMM specs, for `fused-gemm build --preset NAME` and `fused-gemm codegen --preset`.

'linear' is every kernel ``fused_gemm.linear`` picks for one dtype/epilogue across all M buckets;
'gpu-tests' is what tests/test_gpu.py runs; 'gemm-decode-tests' what tests/test_gemm_decode.py runs;
'bench' what perf/bench_linear.py runs.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, Iterable, List

from ..gemv import DecodeConfig
from . import tuned, tuning_space
from .heuristics import FP8_RULES, NARROW_RULES, RULES
from .spec import FP8_PROMOTION, Epilogue, GemmSpec, TileConfig

# Every activation once (with bias), plus residual, scales and everything together.
TEST_EPILOGUES = [
    "none", "bias", "bias+relu", "bias+gelu", "bias+gelu_tanh", "bias+silu", "bias+sigmoid",
    "bias+gelu_tanh+residual", "row_scale+col_scale", "row_scale+col_scale+bias+silu+residual",
]
STREAM_K = TileConfig((128, 16, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)
SPLIT_K_TEST_CONFIG = TileConfig((128, 64, 128), (1, 1, 1), "cooperative", "stream_k", swap_ab=True)  # the tables' split-K tile
# Split-K with a separate reduction: tests/test_gpu.py runs these (dtype, weight layout, config) with every epilogue
# step, odd M, slices with partial k-tiles and forced and automatic split counts.  The 64x64 tile without and with
# swap-AB in both dtypes and both weight layouts (a [K, N] weight's slices step along its rows), and the tables' own
# tiles: 64x64 swap-AB in 4x1 clusters, 64x64 in 2x2, 128x128 ping-pong (persistent over the batch of slices).
_SPLIT_64 = TileConfig((64, 64, 128), (1, 1, 1), "warpspecialized", "split_k_parallel")
SPLIT_K_PARALLEL_TEST_CASES = (
    ("bf16", "nk", _SPLIT_64), ("fp16", "nk", _SPLIT_64),
    ("bf16", "nk", replace(_SPLIT_64, swap_ab=True)), ("fp16", "nk", replace(_SPLIT_64, swap_ab=True)),
    ("bf16", "kn", _SPLIT_64), ("bf16", "kn", replace(_SPLIT_64, swap_ab=True)),
    ("bf16", "nk", TileConfig((64, 64, 128), (4, 1, 1), "warpspecialized", "split_k_parallel", swap_ab=True)),
    ("bf16", "nk", TileConfig((64, 64, 128), (2, 2, 1), "warpspecialized", "split_k_parallel")),
    ("bf16", "nk", TileConfig((128, 128, 64), (1, 1, 1), "pingpong", "split_k_parallel")),
)
DECODE_TEST_CONFIG = DecodeConfig(16, 4, 1)   # the decode kernel every epilogue is tested on


def linear_specs(dtype: str = "bf16", epilogue: str = "none", out_dtype=None, residual_dtype=None,
                 bias_dtype=None, arch: str = "sm90a") -> List[GemmSpec]:
    """The heuristic's M rows for this dtype/epilogue, one per row (``linear`` takes them for weights that neither a
    tuned table nor heuristics.NARROW_RULES serves; gpu_linear_specs has everything it may pick)."""
    ep = Epilogue.parse(epilogue)
    return [GemmSpec(dtype, out_dtype=out_dtype, residual_dtype=residual_dtype, bias_dtype=bias_dtype,
                     epilogue=ep, config=rule.config, arch=arch) for rule in RULES[arch]]


def fp8_linear_specs(epilogue: str = "row_scale+col_scale", out_dtype: str = "bf16", residual_dtype=None,
                     bias_dtype=None, fast_accum: bool = False, arch: str = "sm90a") -> List[GemmSpec]:
    """The kernels ``fused_gemm.fp8_linear`` uses for this epilogue, one per M bucket of FP8_RULES
    (gpu_fp8_specs adds a GPU's tuned entries)."""
    ep = Epilogue.parse(epilogue)
    return [GemmSpec("e4m3", "e4m3", out_dtype=out_dtype, residual_dtype=residual_dtype, bias_dtype=bias_dtype,
                     epilogue=ep, config=rule.config, fast_accum=fast_accum, promotion=rule.promotion, arch=arch)
            for rule in FP8_RULES[fast_accum]]


# Tiles whose N needs CuTe's extended wgmma shapes (TileConfig.extended_wgmma), one per width, schedule and
# epilogue subtile the tuned tables use: tests/test_gpu.py runs them with scales, bias, activation and residual.
EXTENDED_WGMMA_TEST_CONFIGS = (
    TileConfig((128, 112, 64), (1, 2, 1), "cooperative", "persistent", epilogue_tile=(128, 16)),
    TileConfig((128, 112, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 16)),
    TileConfig((128, 144, 64), (1, 2, 1), "pingpong", "persistent", epilogue_tile=(64, 16)),
    TileConfig((128, 224, 64), (2, 1, 1), "cooperative", "persistent"),
    TileConfig((128, 80, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 16)),
)
EXTENDED_WGMMA_TEST_EPILOGUE = "row_scale+col_scale+bias+silu+residual"   # every step but a_scale / b_scale


def _gpu_tests() -> Iterable[GemmSpec]:
    for dtype in ("bf16", "fp16"):
        for ep in TEST_EPILOGUES:
            yield from linear_specs(dtype, ep)
        for config in EXTENDED_WGMMA_TEST_CONFIGS:
            yield GemmSpec(dtype, epilogue=EXTENDED_WGMMA_TEST_EPILOGUE, config=config)
    for dtype, layout, config in SPLIT_K_PARALLEL_TEST_CASES:
        yield GemmSpec(dtype, b_layout=layout, epilogue=EXTENDED_WGMMA_TEST_EPILOGUE, config=config)
    yield from linear_specs("bf16", "bias+residual", out_dtype="fp32")
    yield from linear_specs("bf16", "bias+residual")                  # in-place residual, torch.compile MLP
    yield from linear_specs("bf16", "none", out_dtype="fp32")         # out_dtype=torch.float32
    yield GemmSpec("fp16", b_layout="kn", epilogue="bias+relu")
    yield GemmSpec("bf16", epilogue="bias+gelu_tanh", config=STREAM_K)
    yield GemmSpec("fp16", epilogue="bias+gelu_tanh", config=STREAM_K)   # an fp16 call on a bf16 table entry
    yield GemmSpec("bf16", epilogue="bias+gelu_tanh", config=SPLIT_K_TEST_CONFIG)
    yield GemmSpec("bf16", epilogue="bias", config=STREAM_K)          # the concurrent-streams test
    for ep in ("bias", "bias+silu", "bias+gelu_tanh+residual"):        # compiled ops on the default config
        yield GemmSpec("bf16", epilogue=ep)
    yield GemmSpec("bf16", epilogue="bias", pdl=False, config=RULES["sm90a"][0].config)  # refuses pdl launches


def decode_configs(dtype: str = "bf16"):
    """The decode kernel's configs the tuner tries."""
    return list(dict.fromkeys(c.config for c in tuning_space.SPACES[("sm90a", dtype)]
                              if isinstance(c.config, DecodeConfig)))


# The tuner's decode configs and the widest CTA the kernel takes (tests/test_gemm_decode.py runs them all)
DECODE_WIDE_CONFIGS = decode_configs() + [DecodeConfig(16, 4, 4)]


def _decode_tests() -> Iterable[GemmSpec]:
    for dtype in ("bf16", "fp16"):
        for ep in TEST_EPILOGUES:
            yield GemmSpec(dtype, epilogue=ep, config=DECODE_TEST_CONFIG)
        for config in decode_configs(dtype):
            yield GemmSpec(dtype, epilogue="bias+gelu_tanh", config=config)
    yield GemmSpec("bf16", epilogue="bias+gelu_tanh", config=DECODE_WIDE_CONFIGS[-1])
    yield GemmSpec("bf16", out_dtype="fp32", epilogue="bias+residual", config=DECODE_TEST_CONFIG)
    yield GemmSpec("bf16", epilogue="bias+residual", config=DECODE_TEST_CONFIG)   # in place
    yield GemmSpec("bf16", epilogue="bias", pdl=False, config=DECODE_TEST_CONFIG)  # refuses pdl launches


def gpu_fp8_specs(gpu: str, epilogue: str = "row_scale+col_scale", out_dtype: str = "bf16", residual_dtype=None,
                  bias_dtype=None) -> List[GemmSpec]:
    """Every kernel ``fp8_linear`` may pick on ``gpu`` (a tuned-table key) for this epilogue, in both
    accumulation modes: FP8_RULES's and the tuned table's fp8 and fp8_fast entries (prefill).
    ``fused_gemm.warmup(*gpu_fp8_specs(...))`` builds and prepares them ahead of a CUDA-graph capture."""
    specs = [s for fast in (False, True) for s in fp8_linear_specs(epilogue, out_dtype, residual_dtype, bias_dtype, fast)]
    table = tuned.load(gpu)
    specs += [replace(tuned_kernel(e.op, e.dtype, e.config, e.promotion), out_dtype=out_dtype,
                      residual_dtype=residual_dtype, bias_dtype=bias_dtype, epilogue=Epilogue.parse(epilogue))
              for e in (table.entries if table else ()) if e.op in tuned.FP8_OPS]
    return list(dict.fromkeys(specs))


def gpu_linear_specs(gpu: str, dtype: str = "bf16", epilogue: str = "none", out_dtype=None, residual_dtype=None,
                     bias_dtype=None, tuned_only: bool = False) -> List[GemmSpec]:
    """Every kernel ``linear`` may pick on ``gpu`` (a tuned-table key such as 'h100') for this dtype and
    epilogue: the tuned table's tiles and the heuristic's.  ``fused_gemm.warmup(*gpu_linear_specs(...))``
    builds and prepares them ahead, so that no first call inside a CUDA-graph capture finds one missing."""
    table = tuned.load(gpu)
    shared = tuned.entry_dtypes(dtype)
    configs = [e.config for e in table.entries if e.op == "linear" and e.dtype in shared] if table else []
    if not tuned_only:
        configs += [rule.config for rule in RULES["sm90a"]] + [row.config for row in NARROW_RULES["sm90a"]]
    return [GemmSpec(dtype, out_dtype=out_dtype, residual_dtype=residual_dtype, bias_dtype=bias_dtype,
                     epilogue=Epilogue.parse(epilogue), config=c) for c in dict.fromkeys(configs)]


def tuned_kernel(op: str, dtype: str, config, promotion: int = FP8_PROMOTION, m: int = 1, gpu: str = None):
    """The kernel a tuned entry of ``op`` names, at the epilogue the op is tuned with (fused-gemm tune's
    workloads build their candidates with it too): linear bias+gelu_tanh; gated SwiGLU; fp8 row x column
    scales, bf16 out, at the entry's promotion (fp8_fast: without promotion); qkv_rope NeoX over 128-wide heads, with qkv_rope's
    shared-memory reserve for M tokens on ``gpu``."""
    if op == "linear":
        return GemmSpec(dtype, epilogue="bias+gelu_tanh", config=config)
    if op in tuned.FP8_OPS:
        return GemmSpec("e4m3", "e4m3", out_dtype="bf16", epilogue=Epilogue(row_scale=True, col_scale=True),
                        config=config, fast_accum=tuned.FP8_OPS[op], promotion=promotion)
    if op == "gated":
        from ..gated.heuristics import vector_store
        from ..gated.spec import GatedSpec
        return GatedSpec(dtype, activation="silu", config=config, vector_store=vector_store(config))
    if op == "qkv_rope":
        from ..rope import heuristics as rope
        from ..rope.spec import RopeSpec
        return RopeSpec(dtype, rope.TUNED_HEAD_DIM, style=rope.TUNED_STYLE, config=config,
                        l1_reserve_kb=rope.l1_reserve_kb(m, config, gpu))
    raise ValueError(f"no tuned kernels for op {op!r}; ops: {tuned.OPS}")


def tuned_specs(gpu: str) -> list:
    """Every kernel a shipped tuned table names, with the epilogue its op was tuned with (an AOT set:
    CMakeLists.txt)."""
    table = tuned.load(gpu)
    return list(dict.fromkeys(tuned_kernel(e.op, e.dtype, e.config, e.promotion, e.m, gpu)
                              for e in (table.entries if table else ())))


def tuned_fp16_specs(gpu: str) -> list:
    """The kernels fp16 ``linear`` calls take from a table tuned in bf16 (tuned.SHARED_TILES), with the linear tables'
    epilogue: an AOT set for fp16 models."""
    table = tuned.load(gpu)
    return list(dict.fromkeys(tuned_kernel("linear", "fp16", e.config) for e in (table.entries if table else ())
                              if e.op == "linear" and e.dtype == "bf16"))


def _tune_candidates(dtype: str = "bf16") -> List[GemmSpec]:
    configs = dict.fromkeys(c.config for c in tuning_space.SPACES[("sm90a", dtype)])
    return [GemmSpec(dtype, epilogue="bias+gelu_tanh", config=c) for c in configs]


PRESETS: Dict[str, Callable[[], List[GemmSpec]]] = {
    "tune-candidates": _tune_candidates,
    # the shipped tables' kernels with the epilogue they were tuned with (an AOT set: CMakeLists.txt)
    "tuned-h100": lambda: tuned_specs("h100"),
    "tuned-h200": lambda: tuned_specs("h200"),
    "tuned-h100-fp16": lambda: tuned_fp16_specs("h100"),
    "tuned-h200-fp16": lambda: tuned_fp16_specs("h200"),
    "gpu-tests": lambda: list(_gpu_tests()),
    "gemm-decode-tests": lambda: list(_decode_tests()),
    "bench": lambda: linear_specs("bf16", "bias+gelu_tanh"),
    "compile-ci": lambda: [  # representative kernels compiled (not run) in CI
        GemmSpec("bf16", epilogue="bias+gelu_tanh"),
        linear_specs("fp16", "row_scale+col_scale+bias+silu+residual")[0],
        fp8_linear_specs("a_scale+b_scale+bias+silu")[0],   # fp8 mainloop, swap-AB, the GPU-scalar EVT node
        fp8_linear_specs("row_scale+b_scale+bias+silu")[-1],   # prefill: vectors read ahead beside a GPU scalar
        # a tuned table's odd-width tile with an explicit epilogue tile, under the widest epilogue and fp32 out
        GemmSpec("bf16", out_dtype="fp32", epilogue="row_scale+col_scale+bias+silu+residual",
                 config=TileConfig((128, 96, 64), (2, 1, 1), "pingpong", "persistent", epilogue_tile=(64, 32))),
        GemmSpec("fp16", epilogue="row_scale+col_scale+bias+silu+residual", config=DECODE_TEST_CONFIG),
        # split-K into fp32 partials (swap-AB) and the reduction kernel with every epilogue step
        GemmSpec("bf16", epilogue="row_scale+col_scale+bias+silu+residual", config=SPLIT_K_PARALLEL_TEST_CASES[2][2]),
    ],
}
