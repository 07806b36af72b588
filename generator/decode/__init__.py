"""The decode family: attention of new tokens over a KV cache, split along the keys with an LSE
merge (templates/decode, csrc/fused_gemm/decode, fused_gemm/decode)."""
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .presets import PRESETS
from .spec import DecodeSpec

FAMILY = KernelFamily(
    name="decode",
    spec_type=DecodeSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.decode.op:DecodeOp",
    cli=cli,
    nvcc_flags=("--use_fast_math",),
)

__all__ = ["FAMILY", "PROBLEM", "DecodeSpec"]
