"""fused-gemm: CUTLASS GEMMs with fused epilogues, generated, JIT-compiled and cached.

    import fused_gemm
    y = fused_gemm.linear(x, w, bias=b, activation="gelu_tanh")      # picks, builds, runs
    op = fused_gemm.compile(fused_gemm.GemmSpec("bf16", epilogue="bias+silu+residual"))
    y = op(x, w, b, residual=r)

The generator (specs, rendering, builds, the codegen CLI) imports no torch; the runtime names
below load torch on first use.
"""
from importlib import import_module as _import_module

from .errors import FusedGemmError, KernelNotReadyError

try:
    from .generator import (BuildError, BuildWarning, Epilogue, GatedSpec, GemmSpec, LaunchOptions, SpecError,
                            TileConfig, ToolchainError)
except ModuleNotFoundError as _exc:  # the source folder itself, imported from a checkout's root
    if _exc.name != f"{__name__}.generator":
        raise
    raise ImportError(f"{__path__[0]} is fused-gemm's source folder, which works only once installed: run "
                      "`pip install -e .` in the checkout (or import fused_gemm from another directory)") from None

__version__ = "0.2.0"

_RUNTIME = {  # name -> module that defines it (imported, with torch, on first access)
    "linear": "fused_gemm.gemm.linear",
    "GemmOp": "fused_gemm.gemm.op",
    "gated_linear": "fused_gemm.gated.api",
    "pack_gate_up": "fused_gemm.gated.op",
    "unpack_gate_up": "fused_gemm.gated.op",
    "GatedOp": "fused_gemm.gated.op",
    "compile": "fused_gemm.jit",
    "warmup": "fused_gemm.jit",
}


def __getattr__(name):
    if name in _RUNTIME:
        value = getattr(_import_module(_RUNTIME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fused_gemm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_RUNTIME))


__all__ = [
    "BuildError", "BuildWarning", "Epilogue", "FusedGemmError", "GatedOp", "GatedSpec", "GemmOp", "GemmSpec",
    "KernelNotReadyError", "LaunchOptions", "SpecError", "TileConfig", "ToolchainError", "compile", "gated_linear",
    "linear", "pack_gate_up", "unpack_gate_up", "warmup",
]
