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
    return specs


PRESETS: Dict[str, Callable[[], List[GatedSpec]]] = {
    "gated-tests": _gpu_tests,
    "gated-bench": lambda: gated_specs("bf16", "silu"),
    "gated-compile-ci": lambda: [gated_specs("bf16", "silu", bias=True, residual=True)[0]],
}
