"""Errors of the runtime (torch-free).  The generator's own errors are re-exported by the package."""


class FusedGemmError(RuntimeError):
    """A kernel refused the problem or its launch failed (after Python-side validation)."""


class KernelNotReadyError(FusedGemmError):
    """A kernel would have to be built, loaded or prepared where that is not allowed: inside a
    CUDA-graph capture, or with FUSED_GEMM_NO_JIT=1 set.  The message names the command or call
    that prepares it ahead of time."""
