"""fused-gemm's generator: spec -> Jinja template -> nvcc -> cached shared library."""
from .build import BuildError, BuildResult, BuildWarning, build, build_many, locate
from .render import render
from .spec import Epilogue, GemmSpec, SpecError, TileConfig
from .toolchain import Toolchain, ToolchainError

__all__ = [
    "BuildError", "BuildResult", "BuildWarning", "Epilogue", "GemmSpec", "SpecError", "TileConfig",
    "Toolchain", "ToolchainError", "build", "build_many", "locate", "render",
]
