"""The gated family: SwiGLU/GeGLU, act(x W_gate^T) * (x W_up^T) in one GEMM whose epilogue pairs
gate and up values in registers (templates/gated, csrc/fused_gemm/gated, fused_gemm/gated)."""
from .. import pair
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .presets import PRESETS, gated_specs
from .spec import GatedSpec

FAMILY = KernelFamily(
    name="gated",
    spec_type=GatedSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.gated.op:GatedOp",
    cli=cli,
    csrc_includes=pair.CSRC_INCLUDES,                # the pair epilogue
)

__all__ = ["FAMILY", "GatedSpec", "PROBLEM", "gated_specs"]
