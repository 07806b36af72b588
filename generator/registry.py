"""Every kernel family fused-gemm knows: the one place a new family is registered."""
from __future__ import annotations

from typing import Dict, List

from .attention import FAMILY as ATTENTION
from .decode import FAMILY as DECODE
from .errors import SpecError
from .family import KernelFamily
from .gated import FAMILY as GATED
from .gemm import FAMILY as GEMM
from .int4 import FAMILY as INT4
from .quant import FAMILY as QUANT
from .rope import FAMILY as ROPE

FAMILIES: Dict[str, KernelFamily] = {f.name: f for f in (GEMM, GATED, ROPE, ATTENTION, DECODE, QUANT, INT4)}


def family_of(spec) -> KernelFamily:
    try:
        return FAMILIES[spec.family]
    except (AttributeError, KeyError):
        raise SpecError(f"{spec!r} is not a spec of a registered kernel family ({sorted(FAMILIES)})") from None


def spec_from_uri(uri: str):
    """Any family's spec back from its URI (the family is the URI's first word)."""
    name = uri.split("_", 1)[0]
    if name not in FAMILIES:
        raise SpecError(f"URI {uri!r}: no kernel family {name!r}; families: {sorted(FAMILIES)}")
    return FAMILIES[name].from_uri(uri)


def preset_names() -> List[str]:
    return sorted(name for f in FAMILIES.values() for name in f.presets)


def preset(name: str) -> list:
    for f in FAMILIES.values():
        if name in f.presets:
            return list(dict.fromkeys(f.presets[name]()))
    raise SpecError(f"unknown preset {name!r}; presets: {preset_names()}")
