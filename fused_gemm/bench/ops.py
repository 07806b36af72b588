"""What the sweep can time: per op, one row's inputs (rotated past the L2), our call, each baseline
that applies, the work it does (FLOPs, minimum HBM bytes) and a float64 check of our output.

An op is a function (shape, M, dtype, options) -> Case; OPS names them for the CLI.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F

from .timing import rotation_count

Calls = List[Callable[[], object]]
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}

_ACT: Dict[str, Callable] = {
    "identity": lambda y: y, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "silu": F.silu, "sigmoid": torch.sigmoid,
}


@dataclass
class Case:
    ours: Calls
    baselines: Dict[str, Calls]
    flop: float
    min_bytes: float            # what one call must move through HBM at least (weights, x, out)
    weight_bytes: float         # the decode floor's numerator
    check: Callable[[], float]  # our relative error against float64 on fresh inputs (NaN if unwritten)
    kernel: str = ""
    extra: dict = field(default_factory=dict)


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    got = got.double()
    if not torch.isfinite(got).all():
        return float("nan")
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


def _compiled(fn):
    return torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)


# -- linear with any epilogue ------------------------------------------------------------------------
def _eager_linear(activation: str, scales: bool, residual: bool):
    act = _ACT[activation]

    def fn(x, w, b, r, rs, cs):
        y = F.linear(x, w) if scales else F.linear(x, w, b)
        if scales:
            y = y * rs[:, None] * cs
            if b is not None:
                y = y + b
        y = act(y)
        return y + r if residual else y
    return fn


def linear_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "bias+gelu_tanh",
                with_compile: bool = False) -> Case:
    import fused_gemm
    from ..gemm.linear import select
    ep = fused_gemm.Epilogue.parse(epilogue)
    scales = ep.row_scale or ep.col_scale
    if ep.row_scale != ep.col_scale:
        raise ValueError("the sweep times row_scale and col_scale together")

    def make(device="cuda"):
        x = torch.randn(m, k, dtype=dtype, device=device)
        w = torch.randn(n, k, dtype=dtype, device=device) / k ** 0.5
        b = torch.randn(n, dtype=dtype, device=device) if ep.bias else None
        r = torch.randn(m, n, dtype=dtype, device=device) if ep.residual else None
        rs = torch.rand(m, dtype=torch.float32, device=device) + 0.5 if scales else None
        cs = torch.rand(n, dtype=torch.float32, device=device) + 0.5 if scales else None
        return x, w, b, r, rs, cs

    per_set = 2 * (m * k + n * k + n + 2 * m * n)
    sets = [make() for _ in range(rotation_count(per_set))]
    act = ep.activation

    def ours(s):
        x, w, b, r, rs, cs = s
        return lambda: fused_gemm.linear(x, w, b, act, r, row_scale=rs, col_scale=cs)

    eager_fn = _eager_linear(act, scales, ep.residual)
    baselines: Dict[str, Calls] = {
        "mm": [(lambda s=s: torch.mm(s[0], s[1].t())) for s in sets],
        "eager": [(lambda s=s: eager_fn(*s)) for s in sets],
    }
    if ep.bias and not scales and not ep.residual and act in ("relu", "gelu_tanh"):
        # cuBLASLt's fused bias+ReLU / bias+GELU(tanh) epilogue
        baselines["cublaslt"] = [(lambda s=s: torch._addmm_activation(s[2], s[0], s[1].t(), use_gelu=act != "relu"))
                                 for s in sets]
    if with_compile:
        compiled = _compiled(eager_fn)
        baselines["compile"] = [(lambda s=s: compiled(*s)) for s in sets]

    def check() -> float:
        x, w, b, r, rs, cs = make()
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        fused_gemm.linear(x, w, b, act, r, row_scale=rs, col_scale=cs, out=out)
        d = [t.double() if t is not None else None for t in (x, w, b, r, rs, cs)]
        return rel_error(out, eager_fn(*d))

    x, w, b, r, rs, cs = sets[0]
    op, launch = select(x, b, act, r, rs, cs, dtype, m, n, k)
    return Case([ours(s) for s in sets], baselines, 2.0 * m * n * k,
                2.0 * (m * k + n * k + m * n * (2 if ep.residual else 1)), 2.0 * n * k, check,
                kernel=f"{op.spec.config.name} {_launch_name(launch)}")


def _launch_name(launch) -> str:
    import dataclasses
    diff = [f"{f.name}={getattr(launch, f.name)}" for f in dataclasses.fields(launch)
            if f.init and getattr(launch, f.name) != f.default]
    return ",".join(diff) or "default"


# -- the gated MLP (SwiGLU) ---------------------------------------------------------------------------
def gated_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "silu", with_compile: bool = False) -> Case:
    """n is the intermediate size I (the output width); the weights are [I, K] each."""
    import fused_gemm
    act = _ACT[epilogue]

    def make():
        x = torch.randn(m, k, dtype=dtype, device="cuda")
        wg = torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5
        wu = torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5
        return x, wg, wu

    per_set = 2 * (m * k + 2 * n * k + 3 * m * n)
    sets = []
    for _ in range(rotation_count(per_set)):
        x, wg, wu = make()
        sets.append((x, wg, wu, fused_gemm.pack_gate_up(wg, wu), torch.cat((wg, wu))))

    def eager_fn(x, wg, wu):
        return act(F.linear(x, wg)) * F.linear(x, wu)

    baselines: Dict[str, Calls] = {
        "mm": [(lambda s=s: torch.mm(s[0], s[4].t())) for s in sets],
        "eager": [(lambda s=s: eager_fn(s[0], s[1], s[2])) for s in sets],
    }
    if with_compile:
        compiled = _compiled(eager_fn)
        baselines["compile"] = [(lambda s=s: compiled(s[0], s[1], s[2])) for s in sets]

    def check() -> float:
        x, wg, wu = make()
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        fused_gemm.gated_linear(x, fused_gemm.pack_gate_up(wg, wu), activation=epilogue, out=out)
        return rel_error(out, eager_fn(x.double(), wg.double(), wu.double()))

    ours = [(lambda s=s: fused_gemm.gated_linear(s[0], s[3], activation=epilogue)) for s in sets]
    return Case(ours, baselines, 4.0 * m * n * k, 2.0 * (m * k + 2 * n * k + m * n), 4.0 * n * k, check,
                kernel="gated")


# -- fp8 W8A8 (per-token x per-channel scales) ---------------------------------------------------------
def fp8_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "row_scale+col_scale",
             with_compile: bool = False) -> Case:
    """fp8_linear on quantize_fp8'd activations and a per-channel fp8 weight, bf16 out, against
    torch._scaled_mm with the same scales (and bf16 torch.mm on the unquantised operands, for context).
    ``epilogue`` is informational: the sweep times the scales-only epilogue."""
    import fused_gemm

    def make():
        x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k ** 0.5
        xq, xs = fused_gemm.quantize_fp8(x)
        wq, ws = fused_gemm.quantize_fp8_weight(w)
        return x, w, xq, xs, wq, ws

    sets = [make() for _ in range(rotation_count(m * k + n * k + 2 * m * n + 2 * (m * k + n * k)))]
    ours = [(lambda s=s: fused_gemm.fp8_linear(s[2], s[4], s[3], s[5])) for s in sets]
    baselines: Dict[str, Calls] = {
        "scaled_mm": [(lambda s=s: torch._scaled_mm(s[2], s[4].t(), scale_a=s[3].view(-1, 1), scale_b=s[5].view(1, -1),
                                                    out_dtype=torch.bfloat16)) for s in sets],
        "mm": [(lambda s=s: torch.mm(s[0], s[1].t())) for s in sets],
    }

    def check() -> float:
        x, w, xq, xs, wq, ws = make()
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        fused_gemm.fp8_linear(xq, wq, xs, ws, out=out)
        ref = (xq.double() * xs.double()[:, None]) @ (wq.double() * ws.double()[:, None]).T
        return rel_error(out, ref)

    return Case(ours, baselines, 2.0 * m * n * k, m * k + n * k + 2.0 * m * n, 1.0 * n * k, check,
                kernel="fp8 precise", extra={"baseline": "scaled_mm"})


# -- int4 W4A16 (g = 128, symmetric) ---------------------------------------------------------------------
INT4_GROUP = 128


def int4_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "none", with_compile: bool = False) -> Case:
    """int4_linear (g = 128, symmetric) against torch._weight_int4pack_mm (tinygemm) on the same codes,
    where it runs, and bf16 torch.mm on the dequantised weight (what the int4 weight replaces)."""
    import fused_gemm
    from .baselines import tinygemm_available, tinygemm_weight
    with_tinygemm = tinygemm_available(INT4_GROUP) == ""

    def make():
        x = torch.randn(m, k, dtype=dtype, device="cuda")
        wq = fused_gemm.quantize_int4(torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5, INT4_GROUP)
        return x, wq, wq.dequantize(dtype)

    sets = []
    for _ in range(rotation_count(n * k // 2 + 2 * n * k // INT4_GROUP + 2 * (m * k + m * n))):
        x, wq, wd = make()
        sets.append((x, wq, wd, tinygemm_weight(wq) if with_tinygemm and dtype == torch.bfloat16 else None))
    ours = [(lambda s=s: fused_gemm.int4_linear(s[0], s[1])) for s in sets]
    baselines: Dict[str, Calls] = {"mm": [(lambda s=s: torch.mm(s[0], s[2].t())) for s in sets]}
    if sets[0][3] is not None:
        baselines["tinygemm"] = [(lambda s=s: torch._weight_int4pack_mm(s[0], s[3][0], INT4_GROUP, s[3][1]))
                                 for s in sets]

    def check() -> float:
        x, wq, _ = make()
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        fused_gemm.int4_linear(x, wq, out=out)
        return rel_error(out, x.double() @ wq.dequantize(torch.float64).T)

    weight_bytes = n * k / 2 + 2.0 * n * (k // INT4_GROUP)
    return Case(ours, baselines, 2.0 * m * n * k, weight_bytes + 2.0 * (m * k + m * n), weight_bytes, check,
                kernel=f"int4 g{INT4_GROUP}")


# -- fp8 weights W8A16 (per-channel scales) -----------------------------------------------------------
def fp8_weight_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "none",
                    with_compile: bool = False) -> Case:
    """fp8_weight_linear (e4m3 weight, per-channel fp32 scales, 16-bit x) against torch.mm in x's dtype on
    the dequantised weight (what the fp8 weight replaces)."""
    import fused_gemm

    def make():
        x = torch.randn(m, k, dtype=dtype, device="cuda")
        wq = fused_gemm.quantize_fp8_weight(torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5)
        return x, wq, wq.dequantize(dtype)

    sets = [make() for _ in range(rotation_count(n * k + 4 * n + 2 * (m * k + m * n)))]
    ours = [(lambda s=s: fused_gemm.fp8_weight_linear(s[0], s[1])) for s in sets]
    baselines: Dict[str, Calls] = {"mm": [(lambda s=s: torch.mm(s[0], s[2].t())) for s in sets]}

    def check() -> float:
        x, wq, _ = make()
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        fused_gemm.fp8_weight_linear(x, wq, out=out)
        return rel_error(out, x.double() @ wq.dequantize(torch.float64).T)

    weight_bytes = n * k + 4.0 * n
    return Case(ours, baselines, 2.0 * m * n * k, weight_bytes + 2.0 * (m * k + m * n), weight_bytes, check,
                kernel="fp8 weight")


@dataclass(frozen=True)
class SweepOp:
    make: Callable[..., Case]
    default_epilogue: str
    layers: Callable[[str], List[Tuple[str, int, int]]]   # preset -> (name, N, K)


def _linear_layers(preset: str):
    from .models import layers
    return layers(preset)


def _mlp_layers(preset: str):
    from .models import MODELS, layers
    if preset in MODELS:
        i, h = MODELS[preset].mlp()
        return [("mlp", i, h)]
    return [(name, n, k) for name, n, k in layers(preset)]


OPS: Dict[str, SweepOp] = {
    "linear": SweepOp(linear_case, "bias+gelu_tanh", _linear_layers),
    "gated": SweepOp(gated_case, "silu", _mlp_layers),
    "fp8": SweepOp(fp8_case, "row_scale+col_scale", _linear_layers),
    "int4": SweepOp(int4_case, "none", _linear_layers),
    "fp8_weight": SweepOp(fp8_weight_case, "none", _linear_layers),
}


