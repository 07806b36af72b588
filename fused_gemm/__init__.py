"""fused-gemm: CUTLASS GEMMs with fused epilogues, generated, JIT-compiled and cached.

    import fused_gemm
    y = fused_gemm.linear(x, w, bias=b, activation="gelu_tanh")      # picks, builds, runs
    op = fused_gemm.compile(fused_gemm.GemmSpec("bf16", epilogue="bias+silu+residual"))
    y = op(x, w, bias=b, residual=r)
"""
from pathlib import Path as _Path

# In a source checkout generator/, templates/ and csrc/ sit beside this package (the layout the
# project is known by); an installed wheel carries them inside it.  Either way they are reached
# as fused_gemm.generator.
_checkout = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).parent / "generator").is_dir() and (_checkout / "generator" / "__init__.py").is_file():
    __path__.append(str(_checkout))

from .generator import BuildError, BuildWarning, Epilogue, GemmSpec, SpecError, TileConfig, ToolchainError  # noqa: E402
from .api import compile, linear  # noqa: E402
from .runtime import FusedGemmError, GemmOp, LaunchOptions  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "BuildError", "BuildWarning", "Epilogue", "FusedGemmError", "GemmOp", "GemmSpec", "LaunchOptions", "SpecError",
    "TileConfig", "ToolchainError", "compile", "linear",
]
