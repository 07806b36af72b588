"""The int4 family's template variables: the GEMM family's epilogue tree and schedules, with the
mixed-input mainloop's operands (the int4 weight is always the kernel's A operand)."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.evt import build_tree
from ..gemm.render import KERNEL_SCHEDULES, TILE_SCHEDULERS, formula as gemm_formula
from ..gemm.spec import DTYPES, GemmSpec
from .spec import Int4Spec


def epilogue_spec(spec: Int4Spec) -> GemmSpec:
    """The 16-bit GEMM with this kernel's epilogue and swapped tile config: its tree is ours (the
    epilogue sees the accumulators of D^T either way)."""
    return GemmSpec(spec.dtype, out_dtype=spec.out_dtype, residual_dtype=spec.residual_dtype,
                    bias_dtype=spec.bias_dtype, epilogue=spec.epilogue, config=spec.config, arch=spec.arch)


def formula(spec: Int4Spec) -> str:
    return gemm_formula(epilogue_spec(spec)).replace("acc", "(x . dequant(W)^T)", 1)


def template(spec: Int4Spec) -> str:
    return f"int4/int4_{spec.arch[:4]}.cu.j2"


def context(spec: Int4Spec) -> Dict[str, Any]:
    kernel_schedule, epilogue_schedule = KERNEL_SCHEDULES[spec.config.schedule]
    return dict(
        cfg=spec.config,
        formula=formula(spec),
        tree=build_tree(epilogue_spec(spec)),
        element=DTYPES[spec.dtype][0],
        element_w=DTYPES[spec.weight][0],
        zeros=spec.weight == "u4",
        element_c=DTYPES[spec.residual_dtype][0] if spec.epilogue.residual else "void",
        element_d=DTYPES[spec.out_dtype][0],
        kernel_schedule=kernel_schedule,
        epilogue_schedule=epilogue_schedule,
        tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
    )
