"""Turns an ``Epilogue`` recipe into an epilogue visitor tree (EVT) that the templates render.

The tree is data: leaves fetch the accumulator, the source C, a runtime scalar (times scalars
read on the GPU: per-tensor scales) or a broadcast vector; inner nodes apply a compute functor to
their children.  ``templates/evt.j2`` renders the same tree twice, once as the CUTLASS type and
once as its (matching) nested argument list.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .spec import DTYPES, GemmSpec

# activation name -> CUTLASS functor template (cutlass/epilogue/thread/activation.h)
ACTIVATION_FUNCTORS = {
    "relu": "cutlass::epilogue::thread::ReLu",
    "gelu": "cutlass::epilogue::thread::GELU",
    "gelu_tanh": "cutlass::epilogue::thread::GELU_taylor",
    "silu": "cutlass::epilogue::thread::SiLu",
    "sigmoid": "cutlass::epilogue::thread::Sigmoid",
}
# Every activation as a CUTLASS thread functor (kernels that apply it outside an EVT tree).
THREAD_FUNCTORS = {"identity": "cutlass::epilogue::thread::Identity", **ACTIVATION_FUNCTORS}


@dataclass(frozen=True)
class Node:
    kind: str                       # acc | src | scalar | device_scalar | row_vec | col_vec | compute
    children: Tuple["Node", ...] = ()
    fn: Optional[str] = None        # compute: CUTLASS functor template
    element: Optional[str] = None   # compute: output element; vectors: input element
    operand: Optional[str] = None   # scalar / vector: the Problem field it reads
    pointers: Tuple[str, ...] = ()  # device_scalar: Problem fields pointing at one fp32 each, multiplied in
    ahead: bool = False             # vectors: read ahead by the epilogue's load warp (GemmSpec.vectors_ahead)


def _compute(fn: str, *children: Node, element: str = "float") -> Node:
    return Node("compute", tuple(children), fn=fn, element=element)


def build_tree(spec: GemmSpec) -> Node:
    """D = act(alpha * row_scale[m] * col_scale[n] * acc + bias[n]) + beta * C.

    Vectors are named by the caller's axes; under swap-AB the caller's N is the kernel's M, so a
    per-column (n) vector becomes a column broadcast (one value per kernel row) and vice versa.
    Per-tensor scales (a_scale, b_scale) join alpha in one scalar node, which reads them from the
    row_scale / col_scale pointers on the GPU: they cost the epilogue nothing beyond alpha's multiply.
    """
    ep = spec.epilogue
    swap = spec.config.swap_ab
    n_vec = "col_vec" if swap else "row_vec"   # one value per output feature n
    m_vec = "row_vec" if swap else "col_vec"   # one value per token m
    fp32 = DTYPES["fp32"][0]
    ahead = spec.vectors_ahead

    x = Node("acc")
    if ep.row_scale:
        x = _compute("cutlass::multiplies", Node(m_vec, element=fp32, operand="row_scale", ahead=ahead), x)
    if ep.col_scale:
        x = _compute("cutlass::multiplies", Node(n_vec, element=fp32, operand="col_scale", ahead=ahead), x)
    pointers = tuple(field for field, on in (("row_scale", ep.a_scale), ("col_scale", ep.b_scale)) if on)
    alpha = Node("device_scalar", operand="alpha", pointers=pointers) if pointers else Node("scalar", operand="alpha")
    if ep.bias:
        bias = Node(n_vec, element=DTYPES[spec.bias_dtype][0], operand="bias", ahead=ahead)
        x = _compute("cutlass::homogeneous_multiply_add", alpha, x, bias)
    else:
        x = _compute("cutlass::multiplies", alpha, x)
    if ep.activation != "identity":
        x = _compute(ACTIVATION_FUNCTORS[ep.activation], x)
    if ep.residual:
        x = _compute("cutlass::homogeneous_multiply_add", Node("scalar", operand="beta"), Node("src"), x)
    # The root converts to the output type as it stores.
    return Node(x.kind, x.children, fn=x.fn, element="ElementD")
