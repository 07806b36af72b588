"""Errors the generator raises (torch-free, so the runtime re-exports them as they are)."""


class SpecError(ValueError):
    """A spec, or a string meant to become one, is not valid."""


class ToolchainError(RuntimeError):
    """nvcc, the CUDA headers or CUTLASS cannot be found or used."""


class BuildError(RuntimeError):
    """nvcc failed; the message carries the log tail and the source path."""


class BuildWarning(UserWarning):
    """A kernel built, but with a known performance bug (wgmma serialised, spills, ...)."""

