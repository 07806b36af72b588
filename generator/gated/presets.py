"""Named lists of gated specs (`fused-gemm build --preset ...`)."""
from __future__ import annotations

from typing import Callable, Dict, List

from .heuristics import GPU_ROWS, RULES, vector_store
from .spec import GatedSpec


def gated_specs(dtype: str = "bf16", activation: str = "silu", bias: bool = False, residual: bool = False,
                out_dtype=None, arch: str = "sm90a") -> List[GatedSpec]:
    """The kernels ``gated_linear`` uses for these arguments from its heuristic table, one per M bucket
    (and of each GPU's own rows); gpu_gated_specs adds a GPU's tuned entries."""
    configs = dict.fromkeys([rule.config for rule in RULES[arch]] +
                            [rule.config for rows in GPU_ROWS.values() for rule in rows])
    return [GatedSpec(dtype, out_dtype, activation, bias=bias, residual=residual, config=c, arch=arch,
                      vector_store=vector_store(c)) for c in configs]


def gpu_gated_specs(gpu: str, dtype: str = "bf16", activation: str = "silu", bias: bool = False,
                    residual: bool = False, out_dtype=None) -> List[GatedSpec]:
    """Every kernel ``gated_linear`` may pick on ``gpu`` (a tuned-table key such as 'h100') for these
    arguments: the heuristic's and the tuned table's gated entries.  ``fused_gemm.warmup(*gpu_gated_specs(...))``
    builds and prepares them ahead of a CUDA-graph capture."""
    from ..gemm import tuned
    table = tuned.load(gpu)
    configs = [s.config for s in gated_specs(dtype, activation, bias, residual, out_dtype)]
    configs += [e.config for e in table.entries if e.op == "gated" and e.dtype == dtype] if table else []
    return [GatedSpec(dtype, out_dtype, activation, bias=bias, residual=residual, config=c,
                      vector_store=vector_store(c)) for c in dict.fromkeys(configs)]


def _gpu_tests() -> List[GatedSpec]:
    specs = []
    for dtype in ("bf16", "fp16"):
        for activation in ("silu", "gelu", "gelu_tanh"):
            specs += gated_specs(dtype, activation)
        specs += gated_specs(dtype, "silu", bias=True, residual=True)
    specs += gated_specs("bf16", "silu", out_dtype="fp32")
    return specs


def _gated_vs_gemm() -> list:
    """perf/gated_vs_gemm.py's kernels: per prefill tile the gated kernel with either store and the
    plain GEMM of the same tile (a GEMM-family spec) on the packed weight."""
    from ..gemm.spec import GemmSpec
    configs = [s.config for s in gated_specs("bf16", "silu") if s.vector_store]
    return [*(GatedSpec("bf16", config=c, vector_store=v) for c in configs for v in (False, True)),
            *(GemmSpec("bf16", epilogue="none", config=c) for c in configs)]


PRESETS: Dict[str, Callable[[], List[GatedSpec]]] = {
    "gated-tests": _gpu_tests,
    "gated-bench": lambda: gated_specs("bf16", "silu"),
    "gated-vs-gemm": _gated_vs_gemm,
    "gated-compile-ci": lambda: [gated_specs("bf16", "silu", bias=True, residual=True)[0]],
}
