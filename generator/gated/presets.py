"""Named lists of gated specs (`fused-gemm build --preset ...`)."""
from __future__ import annotations

from typing import Callable, Dict, List

from .heuristics import GPU_ROWS, RULES
from .spec import GatedSpec


def gated_specs(dtype: str = "bf16", activation: str = "silu", bias: bool = False, residual: bool = False,
                out_dtype=None, arch: str = "sm90a") -> List[GatedSpec]:
    """The kernels ``gated_linear`` uses for these arguments, one per M bucket of its table (and of
    each GPU's own rows)."""
    configs = dict.fromkeys([rule.config for rule in RULES[arch]] +
                            [rule.config for rows in GPU_ROWS.values() for rule in rows])
    return [GatedSpec(dtype, out_dtype, activation, bias=bias, residual=residual, config=c, arch=arch) for c in configs]


def _gpu_tests() -> List[GatedSpec]:
    specs = []
    for dtype in ("bf16", "fp16"):
        for activation in ("silu", "gelu", "gelu_tanh"):
            specs += gated_specs(dtype, activation)
        specs += gated_specs(dtype, "silu", bias=True, residual=True)
    specs += gated_specs("bf16", "silu", out_dtype="fp32")
    return specs + _vector_store_specs()


def _vector_store_specs() -> List[GatedSpec]:
    """The 16-byte-store epilogue on the table's prefill tiles (N a multiple of 64), plain and with
    every extra (bias, residual, fp32 output), as tests/test_gated.py runs them and perf/gated_vs_gemm.py
    times them."""
    configs = [c.config for c in (*RULES["sm90a"], *(r for rows in GPU_ROWS.values() for r in rows))
               if not c.config.swap_ab and c.config.tile[1] % 64 == 0]
    specs = [GatedSpec("bf16", config=c, vector_store=True) for c in dict.fromkeys(configs)]
    specs.append(GatedSpec("fp16", activation="gelu_tanh", config=configs[0], vector_store=True))
    specs.append(GatedSpec("bf16", "fp32", bias=True, residual=True, config=configs[0], vector_store=True))
    return specs


def _gated_vs_gemm() -> list:
    """perf/gated_vs_gemm.py's kernels: per prefill tile the gated kernel (both stores) and the plain
    GEMM of the same tile (a GEMM-family spec) on the packed weight."""
    from ..gemm.spec import GemmSpec
    vector = _vector_store_specs()[:-2]
    return [*(GatedSpec("bf16", config=s.config) for s in vector), *vector,
            *(GemmSpec("bf16", epilogue="none", config=s.config) for s in vector)]


PRESETS: Dict[str, Callable[[], List[GatedSpec]]] = {
    "gated-tests": _gpu_tests,
    "gated-bench": lambda: gated_specs("bf16", "silu") + _vector_store_specs()[:-2],
    "gated-vs-gemm": _gated_vs_gemm,
    "gated-compile-ci": lambda: [gated_specs("bf16", "silu", bias=True, residual=True)[0]],
}
