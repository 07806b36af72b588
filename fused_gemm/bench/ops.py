"""What the sweep can time: per op, one row's inputs (rotated past the L2), our call, each baseline
that applies, the work it does (FLOPs, minimum HBM bytes) and a float64 check of our output.

An op is a function (shape, M, dtype, options) -> Case; fused_gemm.bench.catalog names them for the CLI.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

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
    extra: dict = field(default_factory=dict)   # "best_of": {column: baseline names}: the fastest that ran fills it
    graph: Optional[bool] = None    # timed in CUDA graphs (None: by M and FLOPs, as the sweep decides)
    floor_every_m: bool = False     # memory-bound at every M: the HBM floor ratio is reported beyond decode


def poison(*shapes, dtype) -> None:
    """NaN-filled blocks of these shapes handed back to the caching allocator, so that the outputs an
    op allocates next (of the same sizes) land on them: an element it never writes stays NaN."""
    blocks = [torch.full(shape, float("nan"), dtype=dtype, device="cuda") for shape in shapes]
    del blocks


def written(*outs: torch.Tensor) -> bool:
    return all(not torch.isnan(t).any() for t in outs)


def spread_e4m3(*shape: int) -> torch.Tensor:
    """e4m3 values spread over most of the format's range (randn x 64, clamped to +-448), as quantised
    activations and weights are, not randn's few small codes: what fp8 GEMMs are timed and tuned on."""
    return (torch.randn(*shape, device="cuda") * 64).clamp_(-448, 448).to(torch.float8_e4m3fn)


def fp8_scaled_operands(m: int, n: int, k: int):
    """x [M, K] and w [N, K] spread over e4m3's range, with per-token scales [M, 1] and per-channel
    scales [1, N] in [0.5, 1.5): torch._scaled_mm's layout; `.view(-1)` gives fp8_linear's."""
    return (spread_e4m3(m, k), spread_e4m3(n, k), torch.rand(m, 1, device="cuda") + 0.5,
            torch.rand(1, n, device="cuda") + 0.5)


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    got = got.double()
    if not torch.isfinite(got).all():
        return float("nan")
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


def _compiled(fn):
    return torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)


def _torch_baselines(sets, mm_operands: Callable, eager_fn: Callable, eager_args: Callable,
                     with_compile: bool) -> Dict[str, Calls]:
    """Per input set: torch.mm(x, w.t()) on mm_operands(set) = (x, w), the eager PyTorch code on
    eager_args(set), and (with_compile) that code under torch.compile."""
    baselines: Dict[str, Calls] = {
        "mm": [(lambda xw=mm_operands(s): torch.mm(xw[0], xw[1].t())) for s in sets],
        "eager": [(lambda a=eager_args(s): eager_fn(*a)) for s in sets],
    }
    if with_compile:
        compiled = _compiled(eager_fn)
        baselines["compile"] = [(lambda a=eager_args(s): compiled(*a)) for s in sets]
    return baselines


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
                kernel=f"{op.spec.config.name} {launch.label}")


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

    baselines = _torch_baselines(sets, lambda s: (s[0], s[4]), eager_fn, lambda s: s[:3], with_compile)

    def check() -> float:
        x, wg, wu = make()
        out = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        fused_gemm.gated_linear(x, fused_gemm.pack_gate_up(wg, wu), activation=epilogue, out=out)
        return rel_error(out, eager_fn(x.double(), wg.double(), wu.double()))

    ours = [(lambda s=s: fused_gemm.gated_linear(s[0], s[3], activation=epilogue)) for s in sets]
    from ..gated.api import select as gated_select
    op, launch = gated_select(sets[0][0], None, None, epilogue, None, dtype, m, 2 * n, k)
    return Case(ours, baselines, 4.0 * m * n * k, 2.0 * (m * k + 2 * n * k + m * n), 4.0 * n * k, check,
                kernel=f"{op.spec.config.name} {launch.label}")


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

    from ..generator.gemm.spec import FP8_PROMOTION
    from ..quant.fp8 import select as fp8_select
    op, launch = fp8_select(sets[0][2], False, False, None, None, None, torch.bfloat16, False, m, n, k)
    promo = f"_promo{op.spec.promotion}" if op.spec.promotion != FP8_PROMOTION else ""
    return Case(ours, baselines, 2.0 * m * n * k, m * k + n * k + 2.0 * m * n, 1.0 * n * k, check,
                kernel=f"{op.spec.config.name}{promo} {launch.label}", extra={"baseline": "scaled_mm"})


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


# -- QKV projection with the rotary embedding (Llama-style, NeoX) ----------------------------------------
def rotary_neox(qkv, positions, cache, heads: int, kv_heads: int, head_dim: int):
    """A QKV projection's output [T, (Hq + 2 Hkv) D] -> q, k, v with the rotary embedding on q and k
    (NeoX / Hugging Face rotate_half, full rotary): the unfused baseline, in torch."""
    t, d = qkv.shape[0], head_dim
    q, k, v = qkv.split((heads * d, kv_heads * d, kv_heads * d), dim=1)
    cs = cache[positions]
    cos, sin = cs[:, None, : d // 2], cs[:, None, d // 2:]

    def rot(x):
        x1, x2 = x[..., : d // 2].to(cs.dtype), x[..., d // 2:].to(cs.dtype)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
    return rot(q.reshape(t, heads, d)), rot(k.reshape(t, kv_heads, d)), v.reshape(t, kv_heads, d)


def packed_positions(m: int, max_position: int, run: int = 2048, device="cuda"):
    """A packed prefill batch's positions: sequences of up to ``run`` tokens, each starting at a random
    offset (a prefix already cached), so a sequence's positions are consecutive."""
    starts = torch.randint(0, max_position - run, ((m + run - 1) // run,), device=device)
    return (starts[:, None] + torch.arange(run, device=device)[None, :]).flatten()[:m].contiguous()


ROPE_MAX_POSITION = 32768


def rope_error(got, x, w, positions, cache, heads: int, kv_heads: int, head_dim: int, rows: int) -> float:
    """qkv_rope's (q, k, v) against F.linear + NeoX rotary in float64 on the first ``rows`` tokens (NaN if
    any output element was never written)."""
    if not written(*got):
        return float("nan")
    ref = rotary_neox(x[:rows].double() @ w.double().T, positions[:rows], cache.double(), heads, kv_heads, head_dim)
    return rel_error(torch.cat([g[:rows].reshape(rows, -1) for g in got], 1),
                     torch.cat([e.reshape(rows, -1) for e in ref], 1))


def qkv_rope_case(n: int, k: int, m: int, dtype: torch.dtype, epilogue: str = "neox", with_compile: bool = False,
                  *, heads: int, kv_heads: int, head_dim: int) -> Case:
    """fused_gemm.qkv_rope (packed weight, no bias) against torch.mm alone (no rotary: what the fusion
    must stay near) and F.linear + the rotary embedding in torch (eager, and compiled with --compile)."""
    import fused_gemm
    if epilogue != "neox":
        raise ValueError(f"the qkv_rope sweep times the NeoX style ('neox'), not {epilogue!r}")
    cache = fused_gemm.rope_cos_sin_cache(ROPE_MAX_POSITION, head_dim, device="cuda")

    def make():
        x = torch.randn(m, k, dtype=dtype, device="cuda")
        w = torch.randn(n, k, dtype=dtype, device="cuda") / k ** 0.5
        packed = fused_gemm.pack_qkv_rope(w, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim)
        return x, w, packed, packed_positions(m, ROPE_MAX_POSITION)

    sets = [make() for _ in range(rotation_count(2 * (n * k + m * (k + n))))]

    def eager_fn(x, w, pos):
        return rotary_neox(F.linear(x, w), pos, cache, heads, kv_heads, head_dim)

    baselines = _torch_baselines(sets, lambda s: (s[0], s[1]), eager_fn, lambda s: (s[0], s[1], s[3]), with_compile)

    def check() -> float:   # the whole M (the row's own kernel), NaN-poisoned; float64 on the first 256 tokens
        x, w, packed, pos = make()
        rows = min(m, 256)
        poison((m, heads, head_dim), (m, kv_heads, head_dim), (m, kv_heads, head_dim), dtype=dtype)
        got = fused_gemm.qkv_rope(x, packed, positions=pos, cos_sin_cache=cache)
        return rope_error(got, x, w, pos, cache, heads, kv_heads, head_dim, rows)

    ours = [(lambda s=s: fused_gemm.qkv_rope(s[0], s[2], positions=s[3], cos_sin_cache=cache, check_positions=False))
            for s in sets]
    from ..rope.api import select
    op, launch = select(sets[0][0], None, head_dim, head_dim, "neox", m, n)
    return Case(ours, baselines, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n), 2.0 * n * k, check,
                kernel=f"{op.spec.uri} {launch.label}")
