"""The attention family: flash-attention forward on sm90 over CUTLASS example 88
(templates/attention, csrc/fused_gemm/attention, fused_gemm/attention)."""
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .presets import PRESETS, attention_specs
from .spec import AttentionSpec

FAMILY = KernelFamily(
    name="attention",
    spec_type=AttentionSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.attention.op:AttentionOp",
    cli=cli,
    cutlass_examples=("88_hopper_fmha",),
    nvcc_flags=("--use_fast_math",),                 # exp2 without denormal handling, as example 88 builds
)

__all__ = ["FAMILY", "PROBLEM", "AttentionSpec", "attention_specs"]
