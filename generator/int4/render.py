"""The int4 family's template variables: the GEMM family's epilogue tree and schedules, with the
mixed-input mainloop's operands (the int4 or fp8 weight is always the kernel's A operand)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict

from ..gated.render import PAIR_ACTIVATIONS
from ..gemm.evt import THREAD_FUNCTORS, Node, build_tree
from ..gemm.render import KERNEL_SCHEDULES, TILE_SCHEDULERS, formula as gemm_formula
from ..gemm.spec import DTYPES, GemmSpec
from .spec import DEFAULT_CONFIG, Int4Spec

# An fp8 weight's per-channel scales: the ABI's `scales` field, read by the epilogue's col_scale step.
FP8_SCALE_STEP, FP8_SCALE_FIELD = "col_scale", "scales"


def epilogue_spec(spec: Int4Spec) -> GemmSpec:
    """The 16-bit GEMM with this kernel's epilogue and swapped tile config: its tree is ours (the
    epilogue sees the accumulators of D^T either way).  An fp8 weight adds its per-channel scale
    as the first step (fp32, on the accumulator).  The decode kernel's epilogue is its own: the GEMM
    spec then only spells the formula (on the family's default tile)."""
    ep = replace(spec.epilogue, col_scale=True) if spec.fp8_weight else spec.epilogue
    return GemmSpec(spec.dtype, out_dtype=spec.out_dtype, residual_dtype=spec.residual_dtype,
                    bias_dtype=spec.bias_dtype, epilogue=ep, config=DEFAULT_CONFIG if spec.decode else spec.config,
                    arch=spec.arch)


def _read_from(node: Node, operand: str, field: str) -> Node:
    """The tree with every leaf that reads Problem field ``operand`` reading ``field`` instead."""
    children = tuple(_read_from(c, operand, field) for c in node.children)
    return replace(node, children=children, operand=field if node.operand == operand else node.operand)


def tree(spec: Int4Spec) -> Node:
    t = build_tree(epilogue_spec(spec))
    # The int4 ABI has no col_scale field (adding one would change every int4 kernel's source):
    # an fp8 weight's scales travel in `scales`, which its mainloop leaves unread.
    return _read_from(t, FP8_SCALE_STEP, FP8_SCALE_FIELD) if spec.fp8_weight else t


def formula(spec: Int4Spec) -> str:
    text = gemm_formula(epilogue_spec(spec))
    if spec.fp8_weight:
        return text.replace("col_scale[n] * acc", "scales[n] * (x . W^T)", 1)
    return text.replace("acc", "(x . dequant(W)^T)", 1)


def gated_formula(spec: Int4Spec) -> str:
    gate_bias, up_bias = (" + bias[n]", " + bias[I + n]") if spec.epilogue.bias else ("", "")
    x = (f"{spec.epilogue.activation}(alpha * x.dequant(W)[gate n]{gate_bias}) * "
         f"(alpha * x.dequant(W)[up n]{up_bias})")
    return x + (" + beta * C[m,n]" if spec.epilogue.residual else "")


def template(spec: Int4Spec) -> str:
    if spec.decode and spec.fp8_weight:   # the GEMM family's dense decode kernel on the e4m3 weight
        return f"int4/fp8_weight_decode_{spec.arch[:4]}.cu.j2"
    kind = "decode_" if spec.decode else ("gated_" if spec.gated else "")
    return f"int4/int4_{kind}{spec.arch[:4]}.cu.j2"


def _decode_context(spec: Int4Spec) -> Dict[str, Any]:
    return dict(
        cfg=spec.config,
        formula=gated_formula(spec) if spec.gated else formula(spec),
        element=DTYPES[spec.dtype][0],
        element_d=DTYPES[spec.out_dtype][0],
        element_bias=DTYPES[spec.bias_dtype][0],
        element_c=DTYPES[spec.residual_dtype][0],
        activation=THREAD_FUNCTORS[spec.epilogue.activation],
        zeros=spec.weight == "u4",
        element_w=DTYPES[spec.weight][0],
    )


def _gated_context(spec: Int4Spec) -> Dict[str, Any]:
    return dict(
        cfg=spec.config,
        formula=gated_formula(spec),
        element=DTYPES[spec.dtype][0],
        element_w=DTYPES[spec.weight][0],
        zeros=spec.weight == "u4",
        element_d=DTYPES[spec.out_dtype][0],
        element_bias=DTYPES[spec.bias_dtype][0],
        element_residual=DTYPES[spec.residual_dtype][0],
        activation=PAIR_ACTIVATIONS[spec.epilogue.activation],
        kernel_schedule=KERNEL_SCHEDULES[spec.config.schedule][0],
        tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
    )


def context(spec: Int4Spec) -> Dict[str, Any]:
    if spec.decode:
        return _decode_context(spec)
    if spec.gated:
        return _gated_context(spec)
    kernel_schedule, epilogue_schedule = KERNEL_SCHEDULES[spec.config.schedule]
    return dict(
        cfg=spec.config,
        formula=formula(spec),
        tree=tree(spec),
        element=DTYPES[spec.dtype][0],
        element_w=DTYPES[spec.weight][0],
        zeros=spec.weight == "u4",
        fp8=spec.fp8_weight,
        arguments="fp8_weight_arguments" if spec.fp8_weight else "int4_arguments",
        element_c=DTYPES[spec.residual_dtype][0] if spec.epilogue.residual else "void",
        element_d=DTYPES[spec.out_dtype][0],
        kernel_schedule=kernel_schedule,
        epilogue_schedule=epilogue_schedule,
        tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
    )
