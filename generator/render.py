"""Renders one CUDA translation unit per spec, for any registered family."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from .paths import templates_dir
from .registry import family_of


@lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render(spec) -> str:
    """The complete .cu source for ``spec`` (deterministic: same spec, same bytes)."""
    family = family_of(spec)
    return _environment().get_template(family.template(spec)).render(
        spec=spec, abi=family.abi, **family.context(spec))


def render_abi_header(family) -> str:
    """A C header declaring ``family``'s ABI struct, for C++ callers of `fused-gemm codegen` output."""
    return _environment().get_template("common/abi_header.h.j2").render(family=family, abi=family.abi)
