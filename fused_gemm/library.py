"""Loads a generated shared library with ctypes and exposes its C ABI (csrc/fused_gemm/abi.h)."""
from __future__ import annotations

import ctypes
import struct
import threading
from pathlib import Path

ABI_VERSION = 3
# FgProblem, field by field (natural alignment; the C header lays it out with no gaps):
#   m n k | a lda | b ldb | c ldc | d ldd | bias row_scale col_scale | alpha beta |
#   splits swizzle raster decomposition reduction pdl | device reserved | workspace bytes | stream
PROBLEM = struct.Struct("<qqq" + "Qq" * 4 + "QQQ" + "ff" + "iiiiii" + "ii" + "QQ" + "Q")
assert PROBLEM.size == 176
STATUS_NAMES = {1: "invalid problem", 2: "CUTLASS error", 3: "CUDA error"}


class KernelLibrary:
    """One loaded kernel library.  ``run(*fields)`` packs an FgProblem and launches it."""

    def __init__(self, path: Path, expected_uri: str):
        self.path = Path(path)
        try:
            lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise RuntimeError(f"could not load kernel library {self.path}: {exc}") from exc
        lib.fg_abi_version.restype = ctypes.c_int
        lib.fg_spec_uri.restype = ctypes.c_char_p
        lib.fg_last_error.restype = ctypes.c_char_p
        for name, restype in (("fg_can_implement", ctypes.c_int), ("fg_workspace_size", ctypes.c_size_t),
                              ("fg_run", ctypes.c_int)):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_void_p]
            fn.restype = restype
        if lib.fg_abi_version() != ABI_VERSION:
            raise RuntimeError(f"{self.path}: ABI version {lib.fg_abi_version()}, expected {ABI_VERSION} "
                               "(a stale cache entry? `fused-gemm cache clear`)")
        uri = lib.fg_spec_uri().decode()
        if uri != expected_uri:
            raise RuntimeError(f"{self.path} holds {uri}, expected {expected_uri}")
        self._lib = lib
        self._fg_run = lib.fg_run
        self._buffers = threading.local()   # one FgProblem buffer per thread: C reads it during the call

    def thread_buffer(self):
        """This thread's FgProblem buffer and its address (C reads it during the call)."""
        try:
            return self._buffers.slot
        except AttributeError:
            buf = ctypes.create_string_buffer(PROBLEM.size)
            self._buffers.slot = (buf, ctypes.addressof(buf))
            return self._buffers.slot

    def _pack(self, fields) -> int:
        buf, addr = self.thread_buffer()
        PROBLEM.pack_into(buf, 0, *fields)
        return addr

    def run(self, *fields) -> int:
        return self._fg_run(self._pack(fields))

    def can_implement(self, *fields) -> int:
        return self._lib.fg_can_implement(self._pack(fields))

    def workspace_size(self, *fields) -> int:
        return self._lib.fg_workspace_size(self._pack(fields))

    def last_error(self) -> str:
        return self._lib.fg_last_error().decode(errors="replace")
