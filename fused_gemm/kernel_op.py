"""What every family's runtime op shares: loading a kernel on a device outside any graph capture,
fresh outputs, and the launch through the library's C ABI.  A family's op subclasses ``KernelOp``
and adds its one validation path (``run``).  The helpers here run on every call, so they are
module-level names bound once (torch's raw getters skip per-call object creation)."""
from __future__ import annotations

from typing import Dict, Optional

import torch
import torch.nn.functional as F

from .errors import FusedGemmError
from .generator import DEFAULT_LAUNCH, LaunchOptions
from .library import STATUS_NAMES, KernelLibrary

DECODE_MAX_SPLITS = 8   # gemv::kMaxRanks: the largest portable cluster

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "e4m3": torch.float8_e4m3fn}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}
ARCH_CAPABILITY = {"sm90a": (9, 0), "sm80": (8, 0)}
# sm80 libraries carry sm_80 and sm_90 SASS and compute_80 PTX: they run on any GPU from 8.0 on.
FORWARD_COMPATIBLE_ARCHES = ("sm80",)
# Only for K == 0, where no kernel runs and the epilogue is applied to zeros on the host side.
TORCH_ACTIVATIONS = {
    "identity": lambda t: t, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu, "sigmoid": torch.sigmoid,
}

try:  # the raw-stream getter skips building a torch.cuda.Stream object on every call
    raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older/newer torch
    def raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream

try:  # skips torch.cuda.current_device()'s lazy-init check on every call
    current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover
    current_device = torch.cuda.current_device

ONE_DEVICE = torch.cuda.device_count() <= 1   # then x's device is the current one: skip asking
DEVICES: Dict[int, torch.device] = {}         # ordinal -> device object, built once (not one per call)
_is_capturing = torch.cuda.is_current_stream_capturing
_empty_like = torch.empty_like


def dtype_name(arg: str, dtype: Optional[torch.dtype]) -> Optional[str]:
    """A spec's dtype name for a tensor dtype (None stays None); TypeError naming ``arg`` otherwise."""
    if dtype is None:
        return None
    if dtype not in DTYPE_NAMES:
        raise TypeError(f"{arg} has dtype {dtype}; supported: bfloat16, float16 (float32 for the output)")
    return DTYPE_NAMES[dtype]


class KernelOp:
    """One compiled kernel of any family, callable on torch tensors."""

    def __init__(self, spec, library: KernelLibrary):
        self.spec = spec
        self.library = library
        self._ready: set = set()                   # device ordinals checked and prepared
        self._templates: Dict[int, dict] = {}      # device -> {output shape: zero-stride template}
        self._supports_pdl = library.supports_pdl
        self._fg_run = library._fg_run
        self._pack = library.pack

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.uri})"

    def prepare(self, device: int) -> None:
        """Loads the kernel on ``device`` and sets its attributes: outside any graph capture."""
        want = ARCH_CAPABILITY[self.spec.arch]
        have = torch.cuda.get_device_capability(device)
        if have != want and not (self.spec.arch in FORWARD_COMPATIBLE_ARCHES and have >= want):
            raise ValueError(f"cuda:{device} is a {torch.cuda.get_device_name(device)} (sm_{have[0]}{have[1]}), "
                             f"but this kernel is built for {self.spec.arch}")
        with torch.cuda.device(device):
            self.library.prepare(device)
        DEVICES.setdefault(device, torch.device("cuda", device))
        self._templates.setdefault(device, {})
        self._ready.add(device)

    def ready_on(self, dev: int) -> bool:
        """Whether this op was prepared on cuda:``dev`` (so a CUDA-graph capture may launch it)."""
        return dev in self._ready

    def load_on(self, x: torch.Tensor, dev: int) -> None:
        """Prepares the op on cuda:``dev`` at its first use there (refused inside a CUDA-graph capture)."""
        if dev not in self._ready:
            self._first_use(x, dev)

    def _first_use(self, x: torch.Tensor, dev: int) -> None:
        if dev < 0:
            raise ValueError(f"x is on {x.device}; fused-gemm kernels run on CUDA devices")
        if _is_capturing():
            from .jit import not_ready
            raise not_ready(self.spec, f"its first call on cuda:{dev} is inside a CUDA-graph capture, where it "
                                       "cannot be loaded")
        self.prepare(dev)

    def checked_launch(self, launch):
        """``launch`` (default: DEFAULT_LAUNCH) if it is a LaunchOptions this library can run.
        (GemmOp.run inlines the same checks: its path is the decode hot path.)"""
        if launch is None:
            return DEFAULT_LAUNCH
        if type(launch) is not LaunchOptions:
            raise TypeError(f"launch must be a fused_gemm.LaunchOptions, got {type(launch).__name__}")
        if launch.pdl and not self._supports_pdl:
            raise ValueError(f"launch.pdl=True, but {self.spec.uri} was built without grid-dependency control")
        return launch

    def check_decode_launch(self, launch: LaunchOptions, power_of_two: bool = False) -> None:
        """What a weight-streaming decode kernel takes: launch.pdl and launch.splits (its K split over a
        cluster, at most DECODE_MAX_SPLITS CTAs; a power of two where the kernel needs whole 16-row
        shares), the tiling options at their defaults (compared in the ABI's encoding: no new
        LaunchOptions built on the launch path)."""
        splits = launch.splits
        if (launch.abi[1:5] != DEFAULT_LAUNCH.abi[1:5] or splits > DECODE_MAX_SPLITS
                or (power_of_two and splits & (splits - 1))):
            rule = "a power of two up to" if power_of_two else "1 to"
            raise ValueError(f"launch {launch}: {self.spec.uri} takes launch.pdl and launch.splits ({rule} "
                             f"{DECODE_MAX_SPLITS}: K split over a cluster of that many CTAs; 1 lets the kernel "
                             "choose) only")

    def new_output(self, out_shape, dtype: torch.dtype, dev: int) -> torch.Tensor:
        """A fresh contiguous output: empty_like of a cached zero-stride template (cheaper than
        torch.empty's argument parsing).  One template per shape seen, bounded: prefill shapes vary."""
        templates = self._templates[dev]
        template = templates.get(out_shape)
        if template is None:
            if len(templates) >= 1024:
                templates.clear()
            template = templates[out_shape] = torch.empty(1, dtype=dtype, device=DEVICES[dev]).expand(out_shape)
        return _empty_like(template)

    def launch(self, problem: bytes, dev: int, m: int, n: int, k: int) -> None:
        """Runs a packed problem on ``dev``'s current stream (the library launches on the current device)."""
        if ONE_DEVICE or dev == current_device():
            rc = self._fg_run(problem)
        else:
            with torch.cuda.device(dev):
                rc = self._fg_run(problem)
        if rc:
            raise FusedGemmError(f"{self.spec.uri}: {STATUS_NAMES.get(rc, rc)}: {self.library.last_error()} "
                                 f"(M={m}, N={n}, K={k})")
