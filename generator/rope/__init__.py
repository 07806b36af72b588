"""The rope family: the QKV projection with rotary embeddings applied in its epilogue
(templates/rope, csrc/fused_gemm/rope, fused_gemm/rope)."""
from .. import pair
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .heuristics import gpu_rope_specs
from .presets import PRESETS, rope_specs
from .spec import RopeSpec

FAMILY = KernelFamily(
    name="rope",
    spec_type=RopeSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.rope.op:RopeOp",
    cli=cli,
    csrc_includes=pair.CSRC_INCLUDES,                # the pair epilogue
)

__all__ = ["FAMILY", "PROBLEM", "RopeSpec", "gpu_rope_specs", "rope_specs"]
