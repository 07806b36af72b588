"""The quant family: dynamic per-token fp8 quantisation of activations, x -> (e4m3 q, fp32 scale per
row), in one kernel (templates/quant, csrc/fused_gemm/quant, fused_gemm/quant)."""
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .presets import PRESETS
from .spec import QuantSpec

FAMILY = KernelFamily(
    name="quant",
    spec_type=QuantSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.quant.op:QuantOp",
    cli=cli,
)

__all__ = ["FAMILY", "PROBLEM", "QuantSpec"]
