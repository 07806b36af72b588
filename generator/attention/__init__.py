"""The attention family: flash-attention forward on sm90 over CUTLASS example 88, and on sm80 (the
fallback elsewhere) over example 41 (templates/attention, csrc/fused_gemm/attention and
attention_sm80, fused_gemm/attention)."""
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
    # Both examples' folders hold distinct names (88: collective/ kernel/ device/; 41: gemm/ epilogue/
    # iterators/ transform/ and *.h), so each arch's includes resolve as they would alone.
    cutlass_examples=("88_hopper_fmha", "41_fused_multi_head_attention"),
    nvcc_flags=("--use_fast_math",),                 # exp2 without denormal handling, as example 88 builds
)

__all__ = ["FAMILY", "PROBLEM", "AttentionSpec", "attention_specs"]
