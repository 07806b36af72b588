"""The gated family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.evt import THREAD_FUNCTORS
from ..gemm.render import KERNEL_SCHEDULES, TILE_SCHEDULERS, kernel_operands
from ..gemm.spec import DTYPES, GemmSpec
from .spec import GatedSpec

# The pair epilogue's activation functors: CUTLASS's, but SiLU our own (csrc/fused_gemm/gated: the
# hardware exp2 and reciprocal, not expf and an IEEE division).
PAIR_ACTIVATIONS = {**THREAD_FUNCTORS, "silu": "fused_gemm::FastSiLu"}


def formula(spec: GatedSpec) -> str:
    b = (" + b_gate[n]", " + b_up[n]") if spec.bias else ("", "")
    x = f"{spec.activation}(alpha * x.W_gate[n]{b[0]}) * (alpha * x.W_up[n]{b[1]})"
    return x + (" + beta * C[m,n]" if spec.residual else "")


def template(spec: GatedSpec) -> str:
    return f"gated/gated_{spec.arch[:4]}.cu.j2"


def context(spec: GatedSpec) -> Dict[str, Any]:
    # The mainloop is the GEMM family's: the packed weight is an nn.Linear-layout B operand.
    a, b, _ = kernel_operands(GemmSpec(spec.dtype, config=spec.config))
    return dict(
        cfg=spec.config,
        formula=formula(spec),
        kernel_a=a,
        kernel_b=b,
        element_d=DTYPES[spec.out_dtype][0],
        element_bias=DTYPES[spec.bias_dtype][0],
        element_residual=DTYPES[spec.residual_dtype][0],
        activation=PAIR_ACTIVATIONS[spec.activation],
        kernel_schedule=KERNEL_SCHEDULES[spec.config.schedule][0],
        tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
    )
