"""The quant family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.spec import DTYPES
from .spec import CACHED_CHUNKS, QuantSpec


def template(spec: QuantSpec) -> str:
    return f"quant/quant_{spec.arch[:4]}.cu.j2"


def context(spec: QuantSpec) -> Dict[str, Any]:
    return dict(element=DTYPES[spec.dtype][0], cached=CACHED_CHUNKS)
