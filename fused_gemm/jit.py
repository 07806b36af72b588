"""Specs to callable ops: build if missing (unless FUSED_GEMM_NO_JIT=1), load, and prepare ahead.

Building and loading happen at most once per spec and process.  Threads asking for different
specs build in parallel; threads asking for the same one wait for the first.  Nothing here runs
inside a CUDA-graph capture: a kernel first needed there raises KernelNotReadyError naming
``fused_gemm.warmup`` (or the `fused-gemm build` command) that prepares it ahead.
"""
from __future__ import annotations

import importlib
import os
import threading
from typing import Dict, Iterable, Optional, Union

import torch

from .errors import KernelNotReadyError
from .generator import SpecError, build, build_command, build_many, family_of, preset, spec_from_uri
from .generator.cache import cache_root, find_built, find_prebuilt
from .generator.registry import FAMILIES
from .library import KernelLibrary

_ops: Dict[object, object] = {}
_spec_locks: Dict[object, threading.Lock] = {}
_registry_lock = threading.Lock()     # held only to find a spec's own lock, never while building


def no_jit() -> bool:
    return os.environ.get("FUSED_GEMM_NO_JIT", "") not in ("", "0")


def not_ready(spec, why: str) -> KernelNotReadyError:
    return KernelNotReadyError(
        f"kernel {spec.uri} is not ready: {why}. Prepare it ahead of time with "
        f"fused_gemm.warmup({spec.uri!r}) in this process, or build it with `{build_command(spec)}`")


def _op_class(family):
    module, _, name = family.op.partition(":")
    return getattr(importlib.import_module(module), name)


def compile(spec):
    """The op of ``spec`` (any registered family): built if the cache lacks it, loaded once."""
    op = _ops.get(spec)
    if op is not None:
        return op
    if not isinstance(spec, tuple(f.spec_type for f in FAMILIES.values())):
        raise TypeError(f"spec must be a kernel spec such as fused_gemm.GemmSpec, got {type(spec).__name__}")
    family = family_of(spec)
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise not_ready(spec, "it was first needed inside a CUDA-graph capture, where it cannot be built or loaded")
    with _registry_lock:
        lock = _spec_locks.setdefault(spec, threading.Lock())
    with lock:
        op = _ops.get(spec)
        if op is None:
            library = find_prebuilt(spec)   # an AOT (CMake) build: no toolchain, no cache
            if library is None and no_jit():   # a serving host may have only a copied cache
                library = find_built(spec)
                if library is None:
                    raise not_ready(spec, f"FUSED_GEMM_NO_JIT is set and neither the cache ({cache_root()}) "
                                          "nor $FUSED_GEMM_PREBUILT_DIR has it")
            elif library is None:
                library = build(spec).library
            op = _op_class(family)(spec, KernelLibrary(library, family, spec.uri))
            _ops[spec] = op
    return op


Item = Union[str, object]


def _specs(items: Iterable[Item]):
    for item in items:
        if isinstance(item, str):
            name = item.split("_", 1)[0]
            yield from ([spec_from_uri(item)] if name in FAMILIES else preset(item))
        else:
            family_of(item)     # raises SpecError for anything that is not a registered spec
            yield item


def warmup(*items: Item, device: Optional[Union[int, torch.device]] = None, jobs: Optional[int] = None):
    """Builds (in parallel), loads and prepares kernels on ``device`` (default: the current one), so
    that their first call may happen inside a CUDA-graph capture.  Items are specs, kernel URIs or
    preset names.  Returns the ops."""
    specs = list(dict.fromkeys(_specs(items)))
    if not no_jit():   # what $FUSED_GEMM_PREBUILT_DIR holds needs no toolchain
        build_many([s for s in specs if find_prebuilt(s) is None], jobs=jobs, progress=False)
    ops = [compile(s) for s in specs]
    if device is None:
        index = torch.cuda.current_device()
    else:
        index = torch.device("cuda", device).index if isinstance(device, int) else torch.device(device).index
        if index is None:     # "cuda": the current one
            index = torch.cuda.current_device()
    with torch.cuda.device(index):
        for op in ops:
            op.prepare(index)
    return ops


class Selection:
    """An op's memo of kernel choices: key -> whatever ``choose`` returns for it (an op, or an op and
    its launch options), made once per key.  A miss first checks what every choice needs of the
    call's leading tensor (a CUDA device, a 16-bit dtype) and turns a refused spec into a ValueError."""

    def __init__(self, op_name: str):
        self.op_name = op_name
        self._memo: Dict[object, object] = {}
        self._lock = threading.Lock()

    def get(self, key, name: str, t: torch.Tensor, choose):
        hit = self._memo.get(key)
        if hit is None:
            if t.get_device() < 0:
                raise ValueError(f"{name} is on {t.device}; fused-gemm kernels run on CUDA devices")
            if t.dtype not in (torch.bfloat16, torch.float16):
                raise TypeError(f"{name} has dtype {t.dtype}; {self.op_name} takes bfloat16 or float16")
            try:
                hit = choose()
            except SpecError as exc:
                raise ValueError(str(exc)) from None
            with self._lock:
                self._memo[key] = hit
        return hit

    def peek(self, key):
        """The choice made for ``key``, or None if none is made yet (nothing is chosen or built)."""
        return self._memo.get(key)

    def clear(self) -> None:
        with self._lock:
            self._memo.clear()
