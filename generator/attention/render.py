"""The attention family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.spec import DTYPES
from .spec import BLOCK_M, AttentionSpec


def template(spec: AttentionSpec) -> str:
    return f"attention/fmha_{spec.arch[:4]}.cu.j2"


def context(spec: AttentionSpec) -> Dict[str, Any]:
    return dict(element=DTYPES[spec.dtype][0], block_m=BLOCK_M)
