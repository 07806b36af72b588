"""The int4 family: W4A16 GEMMs, int4 weights dequantised in CUTLASS's sm90 mixed-input mainloop, with
the GEMM family's epilogue trees (templates/int4, csrc/fused_gemm/int4, fused_gemm/int4); and W8A16,
fp8 (e4m3) weights through the same mainloop (weight 'e4m3': csrc/fused_gemm/fp8_weight)."""
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .presets import PRESETS, int4_gated_specs, int4_specs
from .spec import Int4Spec

FAMILY = KernelFamily(
    name="int4",
    spec_type=Int4Spec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.int4.op:Int4Op",
    cli=cli,
    csrc_includes=("gemm",),                         # the stream-K scheduler fixed for PDL
)

__all__ = ["FAMILY", "Int4Spec", "PROBLEM", "int4_gated_specs", "int4_specs"]
