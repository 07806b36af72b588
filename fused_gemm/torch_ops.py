"""fused-gemm's ops in PyTorch's op registry (torch.library), so torch.compile, export and graph
capture see them as single ops with fake (meta) kernels, plus the test that lets a plain eager
call skip the dispatcher (a few microseconds a call on a decode step's host thread).

Every op is registered for CPU and CUDA tensors with the same implementation: a CPU tensor gets
the op's own clear error, not a missing-kernel message from the dispatcher.
"""
from __future__ import annotations

import torch

LIBRARY = torch.library.Library("fused_gemm", "DEF")

try:  # depth of the TorchDispatchMode stack (FakeTensorMode, proxy tracing, ...): a C call
    _dispatch_modes = torch._C._len_torch_dispatch_stack
except AttributeError:  # pragma: no cover - older torch
    def _dispatch_modes() -> int:
        return 1

_is_compiling = torch.compiler.is_compiling


def eager_direct(x) -> bool:
    """True when a call may run its implementation directly: not traced by torch.compile/export,
    no dispatch mode active, ``x`` not a tensor subclass (a non-tensor goes direct, to its
    TypeError).  Anything else goes through torch.ops."""
    if type(x) is torch.Tensor:
        return not _is_compiling() and not _dispatch_modes()
    return not isinstance(x, torch.Tensor)


def define(name: str, schema: str, impl, fake) -> None:
    """Registers ``fused_gemm::<name><schema>`` with ``impl`` for CPU and CUDA and its fake kernel."""
    LIBRARY.define(name + schema)
    qualname = f"fused_gemm::{name}"
    torch.library.impl(qualname, ("cpu", "cuda"), impl, lib=LIBRARY)
    torch.library.register_fake(qualname, fake, lib=LIBRARY)
