"""Loads a generated shared library with ctypes and binds its C ABI (any family: the exports are
the same, the problem struct is the family's; see csrc/fused_gemm/common/exports.inl)."""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path

from .errors import FusedGemmError

FEATURE_PDL = 1
STATUS_NAMES = {1: "invalid problem", 2: "CUTLASS error", 3: "CUDA error", 4: "C++ exception"}


class KernelLibrary:
    """One loaded kernel library of ``family``.  ``run(*fields)`` packs a problem and launches it."""

    def __init__(self, path: Path, family, expected_uri: str):
        self.path = Path(path)
        self.abi = family.abi
        self.packer = struct.Struct(self.abi.format)
        try:
            lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise FusedGemmError(f"could not load kernel library {self.path}: {exc}") from exc
        for name, restype, argtypes in (
                ("fg_abi_version", ctypes.c_int, []), ("fg_spec_uri", ctypes.c_char_p, []),
                ("fg_last_error", ctypes.c_char_p, []), ("fg_features", ctypes.c_uint, []),
                ("fg_problem_size", ctypes.c_size_t, []), ("fg_prepare", ctypes.c_int, [ctypes.c_int]),
                ("fg_can_implement", ctypes.c_int, [ctypes.c_void_p]),
                ("fg_workspace_size", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
                ("fg_run", ctypes.c_int, [ctypes.c_void_p])):
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise FusedGemmError(f"{self.path} does not export {name}: a library of an older ABI? "
                                     "(`fused-gemm cache clear` and rebuild)") from None
            fn.restype, fn.argtypes = restype, argtypes
        version = lib.fg_abi_version()
        if version != self.abi.version:
            raise FusedGemmError(f"{self.path}: {family.name} ABI version {version}, expected {self.abi.version} "
                                 "(a stale cache entry? `fused-gemm cache clear`)")
        size = lib.fg_problem_size()
        if size != self.packer.size:
            raise FusedGemmError(f"{self.path}: {self.abi.name} is {size} bytes in C, {self.packer.size} in Python")
        uri = lib.fg_spec_uri().decode()
        if uri != expected_uri:
            raise FusedGemmError(f"{self.path} holds {uri}, expected {expected_uri}")
        self._lib = lib
        self.features = lib.fg_features()
        self._fg_run = lib.fg_run
        # A problem is packed into a fresh bytes object that ctypes passes by pointer: C reads it
        # during the call only, so no buffer is shared between threads (and packing is cheapest).
        self.pack = self.packer.pack

    @property
    def supports_pdl(self) -> bool:
        return bool(self.features & FEATURE_PDL)

    def _pack(self, fields) -> bytes:
        return self.pack(*fields)

    def check(self, rc: int, what: str) -> None:
        if rc:
            raise FusedGemmError(f"{what}: {STATUS_NAMES.get(rc, rc)}: {self.last_error()}")

    def prepare(self, device: int) -> None:
        """Loads the kernel on ``device`` (the current one) and sets its launch attributes."""
        self.check(self._lib.fg_prepare(device), f"preparing {self.path.parent.parent.name} on cuda:{device}")

    def run(self, *fields) -> int:
        return self._fg_run(self._pack(fields))

    def can_implement(self, *fields) -> int:
        return self._lib.fg_can_implement(self._pack(fields))

    def workspace_size(self, *fields) -> int:
        size = ctypes.c_size_t(0)
        self.check(self._lib.fg_workspace_size(self._pack(fields), ctypes.byref(size)), "workspace size")
        return size.value

    def last_error(self) -> str:
        return self._lib.fg_last_error().decode(errors="replace")
