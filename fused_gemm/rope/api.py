"""``fused_gemm.qkv_rope``: the QKV projection with rotary embeddings in its epilogue, and its op.

    fused_gemm::qkv_rope(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, head_dim,
                         rotary_dim, style, check_positions=True) -> (Tensor q, Tensor k, Tensor v)
``weight``/``bias`` are pack_qkv_rope's permuted ones.  A plain eager call skips the dispatcher.
"""
from __future__ import annotations

import warnings
from typing import Optional, Tuple

import torch

from .. import checks, jit
from ..generator import LaunchOptions
from ..generator.gemm import tuned
from ..generator.gemm.tuned import bucket_of, gpu_key
from ..gemm.linear import gemm_rule
from ..generator.rope import RopeSpec
from ..generator.rope import heuristics as rope_heuristics
from ..kernel_op import DTYPE_NAMES
from ..torch_ops import _dispatch_modes, _is_compiling, define
from .op import PackedQKV, RopeOp, pack_qkv_rope

Tensor = torch.Tensor
_selection = jit.Selection("qkv_rope")


def select(x, bias, head_dim, rotary_dim, style, m, n: int = -1) -> Tuple[RopeOp, LaunchOptions]:
    """The kernel and launch options for this call (generator/rope/heuristics.choose, with qkv_rope's
    and the GEMM's tuned rules for this GPU, weight shape and M bucket); memoised per device."""
    bucket = bucket_of(m)
    k = x.shape[-1] if x.dim() else -1

    def choose():
        dtype = DTYPE_NAMES[x.dtype]
        gemm = gemm_rule(x, dtype, n, k, bucket)
        base = RopeSpec(dtype, head_dim, rotary_dim, style, bias is not None)
        gpu = gpu_key(torch.cuda.get_device_name(x.device)) if tuned.tables_enabled() else None
        own = tuned.rule_for(gpu, dtype, n, k, m, "qkv_rope") if gpu else None   # choose() checks its geometry
        spec, launch = rope_heuristics.choose(base, gemm, m, gpu, n, k, own)
        return jit.compile(spec), launch
    key = (x.dtype, bias is not None, head_dim, rotary_dim, style, n, k, bucket, rope_heuristics.l1_row(m),
           x.get_device())
    return _selection.get(key, "x", x, choose)


def _qkv_rope(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, head_dim, rotary_dim, style,
              check_positions=True):
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be [T, K], got shape {tuple(x.shape)}")
    op, launch = select(x, bias, head_dim, rotary_dim or head_dim, style, x.shape[0],
                        weight.shape[0] if isinstance(weight, Tensor) and weight.dim() == 2 else -1)
    return op.run(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, None, None, None, launch,
                  check_positions)


_warned_unpacked = False


def qkv_rope(x: Tensor, w_qkv, bias: Optional[Tensor] = None, *, positions: Tensor, cos_sin_cache: Tensor,
             num_heads: Optional[int] = None, num_kv_heads: Optional[int] = None, head_dim: Optional[int] = None,
             rotary_dim: Optional[int] = None, style: Optional[str] = None, check_positions: bool = True):
    """q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] of ``x @ W_qkv^T + bias`` with the rotary embedding
    applied to q and k at ``positions`` (int32/int64 [T]), in one kernel.

    w_qkv: a ``pack_qkv_rope(...)`` result (pack once, at load time: it carries the head geometry and
    the bias), or a plain [(Hq + 2 Hkv) * D, K] weight with ``bias``, num_heads, num_kv_heads, head_dim
    given (then packed on every call).  cos_sin_cache: fp32 [max_position, rotary_dim], cos then sin
    (``rope_cos_sin_cache``).  style: 'neox' (Hugging Face rotate_half) or 'gptj' (interleaved pairs).
    Positions are checked against the cache when that needs no sync inside a graph capture (eager
    calls read them back; check_positions=False skips it).
    """
    global _warned_unpacked
    if isinstance(w_qkv, PackedQKV):
        if bias is not None:
            raise ValueError("bias belongs in pack_qkv_rope(...) when w_qkv is packed")
        packed = w_qkv
        for name, given, have in (("num_heads", num_heads, packed.num_heads),
                                  ("num_kv_heads", num_kv_heads, packed.num_kv_heads),
                                  ("head_dim", head_dim, packed.head_dim), ("rotary_dim", rotary_dim, packed.rotary_dim)):
            if given is not None and given != have:
                raise ValueError(f"{name}={given} disagrees with the packed weight's {have}")
        if style is not None and style != packed.style:
            raise ValueError(f"style={style!r} disagrees with the packed weight's {packed.style!r}")
    else:
        if None in (num_heads, num_kv_heads, head_dim):
            raise ValueError("an unpacked w_qkv needs num_heads, num_kv_heads and head_dim")
        if not _warned_unpacked:
            _warned_unpacked = True
            warnings.warn("qkv_rope with an unpacked w_qkv permutes it on every call; pack it once with "
                          "fused_gemm.pack_qkv_rope and pass the result", stacklevel=2)
        packed = pack_qkv_rope(w_qkv, bias, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                               rotary_dim=rotary_dim, style=style or "neox")
    args = (x, packed.weight, packed.bias, positions, cos_sin_cache, packed.num_heads, packed.num_kv_heads,
            packed.head_dim, packed.rotary_dim, packed.style)
    if (type(x) is Tensor and not _is_compiling() and not _dispatch_modes()) or not isinstance(x, Tensor):
        return _qkv_rope(*args, check_positions=check_positions)
    checks.refuse_grad("qkv_rope", x, packed.weight, packed.bias)
    return torch.ops.fused_gemm.qkv_rope(*args, check_positions)


def _impl(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, head_dim, rotary_dim, style,
          check_positions=True):
    # The same check as an eager call: skipped inside a CUDA-graph capture (it needs a sync there).
    return _qkv_rope(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, head_dim, rotary_dim, style,
                     check_positions=check_positions)


def _fake(x, weight, bias, positions, cos_sin_cache, num_heads, num_kv_heads, head_dim, rotary_dim, style,
          check_positions=True):
    t = x.shape[0]
    return (x.new_empty((t, num_heads, head_dim)), x.new_empty((t, num_kv_heads, head_dim)),
            x.new_empty((t, num_kv_heads, head_dim)))


define("qkv_rope", "(Tensor x, Tensor weight, Tensor? bias, Tensor positions, Tensor cos_sin_cache, int num_heads, "
       "int num_kv_heads, int head_dim, int rotary_dim, str style, bool check_positions=True) -> (Tensor, Tensor, Tensor)", _impl, _fake)
