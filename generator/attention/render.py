"""The attention family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.spec import DTYPES
from .spec import KV_STAGES, AttentionSpec


def template(spec: AttentionSpec) -> str:
    return f"attention/fmha_{spec.arch[:4]}.cu.j2"


def context(spec: AttentionSpec) -> Dict[str, Any]:
    if spec.arch != "sm90a":
        return dict(element=DTYPES[spec.dtype][0])
    return dict(element=DTYPES[spec.dtype][0], consumers=spec.block_m // 64,   # 64 Q rows a warpgroup
                kv_stages=spec.kv_stages, default_kv_stages=KV_STAGES, ctas_per_sm=spec.ctas_per_sm)
