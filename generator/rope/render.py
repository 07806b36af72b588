"""The rope family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.render import KERNEL_SCHEDULES, TILE_SCHEDULERS, kernel_operands
from ..gemm.spec import DTYPES, GemmSpec
from .spec import RopeSpec


def template(spec: RopeSpec) -> str:
    return f"rope/rope_{spec.arch[:4]}.cu.j2"


def context(spec: RopeSpec) -> Dict[str, Any]:
    a, b, _ = kernel_operands(GemmSpec(spec.dtype, config=spec.config))   # the GEMM family's mainloop
    return dict(cfg=spec.config, kernel_a=a, kernel_b=b, element_d=DTYPES[spec.dtype][0],
                kernel_schedule=KERNEL_SCHEDULES[spec.config.schedule][0],
                tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
                l1_reserve=spec.l1_reserve_kb << 10)
