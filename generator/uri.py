"""The one way a family's spec comes back from its URI: the family's pattern, its constructor, and a
check that the spec spells the URI again (so two URIs never name one kernel)."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional

from .errors import SpecError


def parse(cls, pattern: "re.Pattern[str]", uri: str, kind: str, build: Callable[[Dict[str, Any]], Any]):
    """``build(groups)`` for a URI that ``pattern`` matches and that the built spec spells back;
    ``kind`` names the family in the error ('a GEMM', 'an int4')."""
    m = pattern.match(uri)
    if not m:
        raise SpecError(f"{uri!r} is not {kind} kernel URI (like {cls().uri!r})")
    spec = build(m.groupdict())
    if spec.uri != uri:
        raise SpecError(f"{uri!r} is not in canonical form (it reads as {spec.uri!r})")
    return spec


def operand_dtypes(residual_dtype: Optional[str], bias_dtype: Optional[str]) -> str:
    """The URI part naming the optional residual (C) and bias operands' dtypes."""
    return (f"_c-{residual_dtype}" if residual_dtype else "") + (f"_bias-{bias_dtype}" if bias_dtype else "")
