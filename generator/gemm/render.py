"""The GEMM family's template variables: operands after swap-AB, schedules, the epilogue tree."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict

from .evt import THREAD_FUNCTORS, build_tree
from .spec import DTYPES, Epilogue, GemmSpec

ROW, COL = "cutlass::layout::RowMajor", "cutlass::layout::ColumnMajor"

KERNEL_SCHEDULES = {
    "cooperative": ("cutlass::gemm::KernelTmaWarpSpecializedCooperative",
                    "cutlass::epilogue::TmaWarpSpecializedCooperative"),
    "pingpong": ("cutlass::gemm::KernelTmaWarpSpecializedPingpong",
                 "cutlass::epilogue::TmaWarpSpecialized"),
    "warpspecialized": ("cutlass::gemm::KernelTmaWarpSpecialized", "cutlass::epilogue::TmaWarpSpecialized"),
    "auto": ("cutlass::gemm::collective::KernelScheduleAuto",
             "cutlass::epilogue::collective::EpilogueScheduleAuto"),
}
# fp8 with fast accumulation: the same schedules' FP8FastAccum variants, which leave the
# accumulation to wgmma (no promotion into fp32 registers every 4 MMAs: fewer instructions and
# registers, the precision of cuBLAS's fast-accumulation mode).
FP8_FAST_ACCUM = "FP8FastAccum"
TILE_SCHEDULERS = {
    "persistent": "cutlass::gemm::PersistentScheduler",
    "stream_k": "fused_gemm::StreamKScheduler",  # CUTLASS's, fixed for PDL (csrc/fused_gemm/gemm/sm90_stream_k.hpp)
    "split_k_parallel": "cutlass::gemm::PersistentScheduler",   # over the batch of K slices (GemmSpec.split_k_parallel)
}


@dataclass(frozen=True)
class KernelOperand:
    element: str
    layout: str


def kernel_operands(spec: GemmSpec):
    """(A, B, C/D layout) as the tensor cores see them, after swap-AB."""
    el_a, el_b = DTYPES[spec.a_dtype][0], DTYPES[spec.b_dtype][0]
    w_is_k_major = spec.b_layout == "nk"
    if spec.config.swap_ab:
        # A' = W as [N,K]; B' = X^T as [K,M] with K contiguous; D' = D^T, i.e. column-major.
        return KernelOperand(el_b, ROW if w_is_k_major else COL), KernelOperand(el_a, COL), COL
    return KernelOperand(el_a, ROW), KernelOperand(el_b, COL if w_is_k_major else ROW), ROW


def formula(spec: GemmSpec) -> str:
    ep = spec.epilogue
    x = "acc"
    if ep.col_scale:
        x = f"col_scale[n] * {x}"
    if ep.b_scale:
        x = f"b_scale * {x}"
    if ep.row_scale:
        x = f"row_scale[m] * {x}"
    if ep.a_scale:
        x = f"a_scale * {x}"
    x = f"alpha * {x}" + (" + bias[n]" if ep.bias else "")
    if ep.activation != "identity":
        x = f"{ep.activation}({x})"
    if ep.residual:
        x = f"{x} + beta * C[m,n]"
    return x


def template(spec: GemmSpec) -> str:
    kind = "decode_" if spec.decode else "split_k_parallel_" if spec.split_k_parallel else ""
    return f"gemm/gemm_{kind}{spec.arch[:4]}.cu.j2"


def _epilogue_context(spec: GemmSpec) -> Dict[str, Any]:
    """The epilogue's types and activation for kernels that apply it outside an EVT tree (the decode kernel, the
    split-K reduction)."""
    return dict(
        cfg=spec.config,
        formula=formula(spec),
        element=DTYPES[spec.a_dtype][0],
        element_d=DTYPES[spec.out_dtype][0],
        element_bias=DTYPES[spec.bias_dtype][0],
        element_c=DTYPES[spec.residual_dtype][0],
        activation=THREAD_FUNCTORS[spec.epilogue.activation],
    )


def context(spec: GemmSpec) -> Dict[str, Any]:
    if spec.decode:
        return _epilogue_context(spec)
    a, b, layout_cd = kernel_operands(spec)
    kernel_schedule, epilogue_schedule = KERNEL_SCHEDULES[spec.config.schedule]
    if spec.fast_accum:
        kernel_schedule += FP8_FAST_ACCUM
    if spec.split_k_parallel:   # the GEMM writes alpha * acc in fp32; the reduction kernel does the rest
        return dict(_wgmma_context(spec, replace(spec, epilogue=Epilogue(), out_dtype="fp32", residual_dtype=None,
                                                 bias_dtype=None), kernel_schedule, epilogue_schedule, a, b, layout_cd),
                    arguments="fused_gemm::split_k_parallel::arguments", output=_epilogue_context(spec))
    return _wgmma_context(spec, spec, kernel_schedule, epilogue_schedule, a, b, layout_cd)


def _wgmma_context(spec: GemmSpec, stored: GemmSpec, kernel_schedule, epilogue_schedule, a, b, layout_cd
                   ) -> Dict[str, Any]:
    """The CUTLASS kernel's variables; ``stored`` is what its epilogue computes and stores (the spec
    itself, or a split-K kernel's fp32 partials)."""
    return dict(
        cfg=spec.config,
        formula=formula(spec),
        tree=build_tree(stored),
        kernel_a=a,
        kernel_b=b,
        layout_cd=layout_cd,
        element_c=DTYPES[stored.residual_dtype][0] if stored.epilogue.residual else "void",
        element_d=DTYPES[stored.out_dtype][0],
        kernel_schedule=kernel_schedule,
        epilogue_schedule=epilogue_schedule,
        tile_scheduler=TILE_SCHEDULERS[spec.config.scheduler],
        extra_headers=spec.own_headers,
        vectors_ahead=spec.vectors_ahead,
        promotion_tiles=spec.promotion_tiles,
        epilogue_tile=("cutlass::epilogue::collective::EpilogueTileAuto" if spec.config.epilogue_tile is None else
                       "Shape<_{}, _{}>".format(*spec.config.epilogue_tile)),
        arguments="fused_gemm::gemm_arguments",
    )
