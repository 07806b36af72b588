"""fused-gemm's generator: spec -> Jinja template -> nvcc -> cached shared library.

Imports no torch: the codegen CLI and build machines need only Python, Jinja2, CUTLASS and nvcc.
"""
from .attention import AttentionSpec
from .decode import DecodeSpec
from .build import BuildResult, build, build_command, build_many, default_jobs, locate
from .errors import BuildError, BuildWarning, SpecError, ToolchainError
from .family import KernelFamily
from .gated import GatedSpec
from .rope import RopeSpec
from .gemm import DEFAULT_LAUNCH, Epilogue, GemmSpec, LaunchOptions, TileConfig
from .int4 import Int4Spec
from .quant import QuantSpec
from .registry import FAMILIES, family_of, preset, spec_from_uri
from .render import render
from .toolchain import Toolchain

__all__ = [
    "AttentionSpec", "BuildError", "DecodeSpec", "BuildResult", "BuildWarning", "DEFAULT_LAUNCH", "Epilogue", "FAMILIES", "GatedSpec", "GemmSpec",
    "Int4Spec", "KernelFamily", "LaunchOptions", "QuantSpec", "RopeSpec", "SpecError", "TileConfig", "Toolchain", "ToolchainError", "build",
    "build_command", "build_many", "default_jobs", "family_of", "locate", "preset", "render", "spec_from_uri",
]
