"""The rope family's template variables."""
from __future__ import annotations

from typing import Any, Dict

from ..gemm.render import KERNEL_SCHEDULES, TILE_SCHEDULERS, kernel_operands
from ..gemm.spec import DTYPES, GemmSpec
from .spec import RopeSpec


def template(spec: RopeSpec) -> str:
    return f"rope/rope_{spec.arch[:4]}.cu.j2"


# Shared memory kept for L1 on prefill tiles.  The epilogue reads each token's cos/sin row and stores
# q/k/v through L1; with every other byte given to mainloop stages (7 on 128x128x64) L1 is left ~25 KB.
# Nsight Compute on an H100, Llama-3-8B QKV at M = 16384: 7 stages ran 1.07x the plain GEMM's time
# with 30% more DRAM traffic, 5 stages (this reserve) 1.02x with the GEMM's DRAM traffic.  Decode
# (swap-AB) tiles keep every stage: streaming the weight wants them, and their epilogue is small.
L1_RESERVE_BYTES = 64 << 10


def context(spec: RopeSpec) -> Dict[str, Any]:
    a, b, _ = kernel_operands(GemmSpec(spec.dtype, config=spec.config))   # the GEMM family's mainloop
    return dict(cfg=spec.config, kernel_a=a, kernel_b=b, element_d=DTYPES[spec.dtype][0],
                kernel_schedule=KERNEL_SCHEDULES[spec.config.schedule][0],
                tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
                l1_reserve=0 if spec.config.swap_ab else L1_RESERVE_BYTES)
