"""fused-gemm's ops in PyTorch's op registry (torch.library), so torch.compile, export and graph
capture see them as single ops with fake (meta) kernels.  A plain eager call skips the
dispatcher (a few microseconds a call on a decode step's host thread): the ops' Python entry
points run their implementation directly when ``x`` is a plain tensor (or not a tensor at all,
to get its TypeError), torch.compile/export is not tracing (``_is_compiling``) and no dispatch
mode such as FakeTensorMode is active (``_dispatch_modes``); anything else goes through torch.ops.

Every op is registered for CPU and CUDA tensors with the same implementation: a CPU tensor gets
the op's own clear error, not a missing-kernel message from the dispatcher.
"""
from __future__ import annotations

import torch

from . import checks

LIBRARY = torch.library.Library("fused_gemm", "DEF")

try:  # depth of the TorchDispatchMode stack (FakeTensorMode, proxy tracing, ...): a C call
    _dispatch_modes = torch._C._len_torch_dispatch_stack
except AttributeError:  # pragma: no cover - older torch
    def _dispatch_modes() -> int:
        return 1

_is_compiling = torch.compiler.is_compiling


def define(name: str, schema: str, impl, fake) -> None:
    """Registers ``fused_gemm::<name><schema>`` with ``impl`` for CPU and CUDA and its fake kernel."""
    LIBRARY.define(name + schema)
    qualname = f"fused_gemm::{name}"
    torch.library.impl(qualname, ("cpu", "cuda"), impl, lib=LIBRARY)
    torch.library.register_fake(qualname, fake, lib=LIBRARY)


def no_output(*args) -> None:
    """The fake kernel of an ``_out`` op: it writes its ``out`` argument and returns nothing."""
    return None


def route(name: str, impl, args: tuple, out, *grad_inputs):
    """Runs op ``name`` on ``args`` (x first) and ``out`` (None: a new output) by the route above:
    ``impl(*args, out)`` directly for a plain eager call, else ``fused_gemm::<name>`` (or, given ``out``,
    ``fused_gemm::<name>_out``) through torch.ops, after refusing ``grad_inputs`` that want a gradient
    (on the direct route the kernel's op refuses them itself)."""
    x = args[0]
    if (type(x) is torch.Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, torch.Tensor):
        return impl(*args, out)
    checks.refuse_grad(name, *grad_inputs)
    if out is None:
        return getattr(torch.ops.fused_gemm, name)(*args)
    getattr(torch.ops.fused_gemm, name + "_out")(*args, out)
    return out
