"""Named lists of decode specs (`fused-gemm build --preset ...`)."""
from __future__ import annotations

from typing import Callable, Dict, List

from .heuristics import pick
from .spec import DecodeSpec

PRESETS: Dict[str, Callable[[], List[DecodeSpec]]] = {
    "decode-tests": lambda: [pick(d, hd) for d in ("bf16", "fp16") for hd in (64, 128)] + [pick("bf16", 256)],
    "decode-bench": lambda: [pick("bf16", 128)],
    "decode-compile-ci": lambda: [pick("fp16", 128)],
}
