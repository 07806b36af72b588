"""The GEMM family: D = epilogue(A @ B^T) on CUTLASS 3.x sm90 kernels with fused epilogue trees."""
from ..family import KernelFamily
from . import cli, render
from .abi import PROBLEM
from .launch import DEFAULT_LAUNCH, LaunchOptions
from .presets import PRESETS
from .spec import Epilogue, GemmSpec, TileConfig

FAMILY = KernelFamily(
    name="gemm",
    spec_type=GemmSpec,
    abi=PROBLEM,
    template=render.template,
    context=render.context,
    presets=PRESETS,
    op="fused_gemm.gemm.op:GemmOp",
    cli=cli,
)

__all__ = ["DEFAULT_LAUNCH", "Epilogue", "FAMILY", "GemmSpec", "LaunchOptions", "PROBLEM", "TileConfig"]
