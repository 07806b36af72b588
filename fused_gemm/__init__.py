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
    from .generator import (AttentionSpec, BuildError, DecodeSpec, BuildWarning, Epilogue, GatedSpec, GemmSpec, Int4Spec, LaunchOptions, QuantSpec,
                            RopeSpec, SpecError, TileConfig, ToolchainError)
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
    "qkv_rope": "fused_gemm.rope.api",
    "pack_qkv_rope": "fused_gemm.rope.op",
    "rope_cos_sin_cache": "fused_gemm.rope.op",
    "rope_cos_sin_cache_from": "fused_gemm.rope.op",
    "PackedQKV": "fused_gemm.rope.op",
    "RopeOp": "fused_gemm.rope.op",
    "attention": "fused_gemm.attention.api",
    "AttentionOp": "fused_gemm.attention.op",
    "decode_attention": "fused_gemm.decode.api",
    "DecodeOp": "fused_gemm.decode.op",
    "fp8_linear": "fused_gemm.quant.fp8",
    "quantize_fp8": "fused_gemm.quant.fp8",
    "quantize_fp8_weight": "fused_gemm.quant.fp8",
    "QuantOp": "fused_gemm.quant.op",
    "int4_linear": "fused_gemm.int4.api",
    "int4_gated_linear": "fused_gemm.int4.api",
    "Int4Op": "fused_gemm.int4.op",
    "Int4Weight": "fused_gemm.int4.weight",
    "quantize_int4": "fused_gemm.int4.weight",
    "int4_from_gptq": "fused_gemm.int4.weight",
    "int4_from_awq": "fused_gemm.int4.weight",
    "fp8_weight_linear": "fused_gemm.int4.w8a16",
    "Fp8Weight": "fused_gemm.quant.fp8_weight",
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
    "AttentionOp", "AttentionSpec", "BuildError", "DecodeOp", "DecodeSpec", "BuildWarning", "Epilogue", "Fp8Weight", "FusedGemmError", "GatedOp", "GatedSpec", "GemmOp", "GemmSpec",
    "Int4Op", "Int4Spec", "Int4Weight", "KernelNotReadyError", "LaunchOptions", "PackedQKV", "QuantOp", "QuantSpec", "RopeOp", "RopeSpec", "SpecError", "TileConfig",
    "ToolchainError", "attention", "compile", "decode_attention", "fp8_linear", "fp8_weight_linear", "gated_linear", "int4_from_awq", "int4_from_gptq", "int4_gated_linear", "int4_linear", "linear", "pack_gate_up", "pack_qkv_rope", "qkv_rope",
    "quantize_fp8", "quantize_fp8_weight", "quantize_int4", "rope_cos_sin_cache", "rope_cos_sin_cache_from",
    "unpack_gate_up", "warmup",
]
