"""Loads a generated shared library with ctypes and exposes its C ABI (csrc/fused_gemm/abi.h)."""
from __future__ import annotations

import ctypes
from pathlib import Path

ABI_VERSION = 2
_i64, _ptr, _f32, _i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float, ctypes.c_int32
# FG_PROBLEM_PARAMS: m n k, a lda, b ldb, c ldc, d ldd, bias row_scale col_scale, alpha beta,
# then the launch options: splits swizzle raster decomposition reduction pdl
PROBLEM_ARGTYPES = [_i64, _i64, _i64, _ptr, _i64, _ptr, _i64, _ptr, _i64, _ptr, _i64,
                    _ptr, _ptr, _ptr, _f32, _f32, _i32, _i32, _i32, _i32, _i32, _i32]
STATUS_NAMES = {1: "invalid problem", 2: "CUTLASS error", 3: "CUDA error"}


class KernelLibrary:
    """One loaded kernel library: fg_run and friends with their ctypes signatures set."""

    def __init__(self, path: Path, expected_uri: str):
        self.path = Path(path)
        try:
            lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise RuntimeError(f"could not load kernel library {self.path}: {exc}") from exc
        lib.fg_abi_version.restype = ctypes.c_int
        lib.fg_spec_uri.restype = ctypes.c_char_p
        lib.fg_last_error.restype = ctypes.c_char_p
        lib.fg_can_implement.argtypes = PROBLEM_ARGTYPES
        lib.fg_can_implement.restype = ctypes.c_int
        lib.fg_workspace_size.argtypes = PROBLEM_ARGTYPES
        lib.fg_workspace_size.restype = ctypes.c_size_t
        lib.fg_run.argtypes = PROBLEM_ARGTYPES + [_ptr, ctypes.c_size_t, _ptr]
        lib.fg_run.restype = ctypes.c_int
        if lib.fg_abi_version() != ABI_VERSION:
            raise RuntimeError(f"{self.path}: ABI version {lib.fg_abi_version()}, expected {ABI_VERSION}")
        uri = lib.fg_spec_uri().decode()
        if uri != expected_uri:
            raise RuntimeError(f"{self.path} holds {uri}, expected {expected_uri}")
        self._lib = lib
        self.run = lib.fg_run
        self.can_implement = lib.fg_can_implement
        self.workspace_size = lib.fg_workspace_size

    def last_error(self) -> str:
        return self._lib.fg_last_error().decode(errors="replace")
