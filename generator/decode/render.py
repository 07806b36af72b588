"""The decode family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.spec import DTYPES
from .spec import BLOCK_N, DecodeSpec


def template(spec: DecodeSpec) -> str:
    return f"decode/decode_{spec.arch[:4]}.cu.j2"


def context(spec: DecodeSpec) -> Dict[str, Any]:
    return dict(element=DTYPES[spec.dtype][0], block_n=BLOCK_N)
