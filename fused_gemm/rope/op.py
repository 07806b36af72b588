"""RopeOp: one compiled QKV projection with rotary embeddings in its epilogue.

    q, k, v = split(x @ W_qkv^T + bias);  q, k rotated at each token's position

``pack_qkv_rope`` permutes W_qkv's rows (and the bias) per head so that each rotation pair is 8
rows apart and each epilogue thread's pairs are consecutive dims; the kernel writes q/k/v back in the natural head layout, so nothing downstream sees
the permutation.  One validation path, before any launch; graph-capturable like GemmOp.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .. import checks
from ..checks import ALIGN_BYTES
from ..generator import LaunchOptions
from ..generator.rope import PROBLEM, RopeSpec
from ..kernel_op import TORCH_DTYPES, KernelOp, raw_stream
from ..library import KernelLibrary

Tensor = torch.Tensor
# The order RopeOp packs its fields in; tests/test_families.py checks it against the ABI table.
PACK_ORDER = ("m", "n", "k", "a", "lda", "b", "ldb", "bias", "q", "k_out", "v", "ldq", "ldk", "ldv", "positions",
              "cos_sin", "max_pos", "num_heads", "num_kv_heads", "positions_int64", "swizzle", "raster", "pdl",
              "device", "reserved", "workspace", "workspace_bytes", "stream")


def _region_order(blocks: int, g: int, first, second) -> list:
    """Packed order of a region of 16-row blocks in chunks of g blocks: in block b, rows c < 8 hold pair
    j = 8g (b // g) + 2g (c // 2) + 2 (b % g) + c % 2 and rows 8 + c their partners, so that the thread
    owning rows 2l, 2l + 1 of a chunk's blocks owns 2g consecutive pairs, in lane order."""
    order = []
    for b in range(blocks):
        pairs = [8 * g * (b // g) + 2 * g * (c // 2) + 2 * (b % g) + c % 2 for c in range(8)]
        order += [first(j) for j in pairs] + [second(j) for j in pairs]
    return order


def head_permutation(head_dim: int, rotary_dim: int, style: str, rotated: bool = True) -> list:
    """Natural dims of a head in packed order (csrc/fused_gemm/rope/sm90_rope.hpp): a q/k head's R
    rotated dims as rotation pairs (NeoX: j and j + R/2; GPT-J: 2j and 2j + 1), then its D - R other
    dims as neighbouring pairs; a v head (``rotated=False``) all as neighbouring pairs."""
    g = RopeSpec(head_dim=head_dim, rotary_dim=rotary_dim).chunk_blocks
    r = rotary_dim if rotated else 0
    neox = style == "neox"
    order = _region_order(r // 16, g, (lambda j: j) if neox else (lambda j: 2 * j),
                          (lambda j: j + r // 2) if neox else (lambda j: 2 * j + 1))
    return order + _region_order((head_dim - r) // 16, g, lambda j: r + 2 * j, lambda j: r + 2 * j + 1)


@dataclass(frozen=True)
class PackedQKV:
    """A QKV projection's weight (and bias) permuted for ``qkv_rope``, with the head geometry it was
    permuted for.  Make one with ``pack_qkv_rope`` at load time."""
    weight: Tensor                 # [(Hq + 2 Hkv) * D, K]
    bias: Optional[Tensor]         # [(Hq + 2 Hkv) * D] or None
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rotary_dim: int
    style: str


def pack_qkv_rope(w_qkv: Tensor, bias: Optional[Tensor] = None, *, num_heads: int, num_kv_heads: int,
                  head_dim: int, rotary_dim: Optional[int] = None, style: str = "neox") -> PackedQKV:
    """W_qkv ([(Hq + 2 Hkv) * D, K], q heads then k heads then v heads, as nn.Linear holds it) and
    its bias, rows permuted per q/k head for the rope kernels."""
    rotary_dim = rotary_dim or head_dim
    RopeSpec(head_dim=head_dim, rotary_dim=rotary_dim, style=style)   # the same checks as the kernels'
    if num_heads < 1 or num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} must be a positive multiple of num_kv_heads {num_kv_heads}")
    n = (num_heads + 2 * num_kv_heads) * head_dim
    if not isinstance(w_qkv, Tensor) or w_qkv.dim() != 2 or w_qkv.shape[0] != n:
        raise ValueError(f"w_qkv must be [(num_heads + 2 * num_kv_heads) * head_dim, K] = [{n}, K], got "
                         f"{tuple(w_qkv.shape) if isinstance(w_qkv, Tensor) else type(w_qkv).__name__}")
    if bias is not None and (not isinstance(bias, Tensor) or tuple(bias.shape) != (n,)):
        raise ValueError(f"bias must be [{n}]")
    qk_head = torch.tensor(head_permutation(head_dim, rotary_dim, style), device=w_qkv.device)
    v_head = torch.tensor(head_permutation(head_dim, rotary_dim, style, rotated=False), device=w_qkv.device)
    rotated = num_heads + num_kv_heads
    perm = torch.cat([h * head_dim + (qk_head if h < rotated else v_head) for h in range(rotated + num_kv_heads)])
    return PackedQKV(w_qkv[perm].contiguous(), None if bias is None else bias[perm].contiguous(), num_heads,
                     num_kv_heads, head_dim, rotary_dim, style)


def rope_cos_sin_cache(max_position: int, rotary_dim: int, base: float = 10000.0, scaling: Optional[dict] = None,
                       device=None) -> Tensor:
    """fp32 [max_position, rotary_dim]: cos(pos * inv_freq_j) for the R/2 pairs, then their sin,
    with Hugging Face's inv_freq = base^(-2j/R) and, given ``scaling={"rope_type": "llama3", "factor",
    "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}``, Llama 3's
    frequency scaling (or {"rope_type": "linear", "factor"})."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        factor = float(scaling["factor"])
        if kind == "linear":
            inv_freq = inv_freq / factor
        elif kind == "llama3":
            low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
            old = float(scaling["original_max_position_embeddings"])
            wavelen = 2 * math.pi / inv_freq
            smooth = ((old / wavelen) - low) / (high - low)
            scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
            mid = (wavelen <= old / low) & (wavelen >= old / high)
            inv_freq = torch.where(mid, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)
        else:
            raise ValueError(f"rope scaling {kind!r}: supported 'linear', 'llama3'")
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat((angles.cos(), angles.sin()), dim=1).float().to(device)


# How a model's own cos/sin tables hold the R/2 angles of a position: once each, or twice, as Hugging
# Face's rotary embeddings do (NeoX: cat(freqs, freqs); GPT-J: repeat_interleave(freqs, 2)).
_TABLE_ANGLES = {"pairs": lambda t: (t, None), "neox": lambda t: (t[:, : t.shape[1] // 2], t[:, t.shape[1] // 2:]),
                 "gptj": lambda t: (t[:, 0::2], t[:, 1::2])}


def rope_cos_sin_cache_from(cos: Tensor, sin: Tensor, layout: str = "neox", device=None) -> Tensor:
    """The fp32 [max_position, rotary_dim] cache ``qkv_rope`` reads (cos of the R/2 pairs, then their
    sin), from a model's own cos and sin tables, [max_position, R] in ``layout`` "neox" or "gptj" (every
    angle twice, as Hugging Face holds them), or [max_position, R/2] ("pairs").  Build it once, at load."""
    if layout not in _TABLE_ANGLES:
        raise ValueError(f"layout {layout!r} is not one of {tuple(_TABLE_ANGLES)}")
    angles = []
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor) or t.dim() != 2 or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point [max_position, columns] tensor, got "
                             f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
        if layout != "pairs" and t.shape[1] % 2:
            raise ValueError(f"{name} has {t.shape[1]} columns: a {layout!r} table holds every angle twice")
        once, twice = _TABLE_ANGLES[layout](t)
        if twice is not None and not torch.equal(once, twice):
            raise ValueError(f"{name} does not hold every angle twice the {layout!r} way; check layout=")
        angles.append(once.float())
    if angles[0].shape != angles[1].shape:
        raise ValueError(f"cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must have the same shape")
    return torch.cat(angles, dim=1).contiguous().to(device or cos.device)


class RopeOp(KernelOp):
    """A compiled rope kernel: ``op(x, weight, bias, positions, cos_sin, num_heads, num_kv_heads, q, k, v,
    launch)`` with the packed weight and bias of ``pack_qkv_rope``; q/k/v outputs optional."""

    def __init__(self, spec: RopeSpec, library: KernelLibrary):
        assert library.packer.format == PROBLEM.format
        super().__init__(spec, library)
        self._dtype = TORCH_DTYPES[spec.dtype]
        self._size = self._dtype.itemsize

    def __call__(self, x, weight, bias, positions, cos_sin, num_heads, num_kv_heads, q=None, k=None, v=None, *,
                 launch: Optional[LaunchOptions] = None, check_positions: bool = True):
        return self.run(x, weight, bias, positions, cos_sin, num_heads, num_kv_heads, q, k, v, launch,
                        check_positions)

    def _output(self, name, t, shape, dev):
        """A given q/k/v ([T, H, D], heads and dims contiguous, any aligned token stride) or a new one:
        (tensor, token stride)."""
        if t is None:
            return self.new_output(shape, self._dtype, dev), shape[1] * shape[2]
        checks.tensor(name, t, self._dtype, dev)
        checks.shape(name, t, shape)
        stride = t.stride()
        if stride[1:] != (shape[2], 1):
            raise ValueError(f"{name} must have contiguous heads and dims (strides (*, {shape[2]}, 1)), got {stride}")
        if (stride[0] * self._size) % ALIGN_BYTES or t.data_ptr() % ALIGN_BYTES:
            raise ValueError(f"{name}'s token stride and data pointer must be 16-byte aligned")
        return t, stride[0]

    def _check_overlaps(self, x, a_ptr, lda, weight, b_ptr, ldb, bias_ptr, positions, cos_sin, *outputs) -> None:
        """Caller-given q/k/v must not overlap an input or each other."""
        T, K = x.shape
        N, D = weight.shape[0], self.spec.head_dim
        inputs = [("x", a_ptr, a_ptr + (lda * (T - 1) + K) * self._size),
                  ("weight", b_ptr, b_ptr + (ldb * (N - 1) + K) * self._size),
                  ("positions", positions.data_ptr(), positions.data_ptr() + T * positions.element_size()),
                  ("cos_sin_cache", cos_sin.data_ptr(), cos_sin.data_ptr() + cos_sin.numel() * 4)]
        if bias_ptr:
            inputs.append(("bias", bias_ptr, bias_ptr + N * self._size))
        outs = [(name, t.data_ptr(), t.data_ptr() + (ld * (T - 1) + t.shape[1] * D) * self._size)
                for name, (t, ld) in zip("qkv", outputs)]
        for name, lo, hi in outs:
            hit = checks.overlapping(inputs + [o for o in outs if o[0] != name], (lo, hi))
            if hit is not None:
                raise ValueError(f"{name} overlaps {hit}")

    def run(self, x, weight, bias, positions, cos_sin, num_heads, num_kv_heads, q, k, v, launch,
            check_positions=True) -> Tuple[Tensor, Tensor, Tensor]:
        spec = self.spec
        checks.tensor("x", x, self._dtype, None)
        dev = x.get_device()
        if dev not in self._ready:
            self._first_use(x, dev)
        if x.dim() != 2:
            raise ValueError(f"x must be [T, K], got shape {tuple(x.shape)}")
        T, K = x.shape
        D = spec.head_dim
        if not (isinstance(num_heads, int) and isinstance(num_kv_heads, int)) or num_kv_heads < 1 or \
                num_heads < num_kv_heads or num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads!r} must be a positive multiple of num_kv_heads {num_kv_heads!r}")
        N = (num_heads + 2 * num_kv_heads) * D
        checks.tensor("weight", weight, self._dtype, dev)
        if tuple(weight.shape) != (N, K):
            raise ValueError(f"weight has shape {tuple(weight.shape)}, expected [(num_heads + 2 * num_kv_heads) * "
                             f"head_dim, K] = [{N}, {K}] (the packed weight of pack_qkv_rope)")
        checks.dims_fit(T, N, K)
        if spec.bias and bias is None:
            raise ValueError("bias is required: this kernel was built with a QKV bias")
        if not spec.bias and bias is not None:
            raise ValueError("bias was given, but this kernel was built without one")
        bias_ptr = 0 if bias is None else checks.vector("bias", bias, N, self._dtype, dev)
        if not isinstance(positions, Tensor) or positions.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"positions must be an int32 or int64 tensor, got "
                            f"{positions.dtype if isinstance(positions, Tensor) else type(positions).__name__}")
        checks.vector("positions", positions, T, positions.dtype, dev)
        checks.tensor("cos_sin_cache", cos_sin, torch.float32, dev)
        if cos_sin.dim() != 2 or cos_sin.shape[1] != spec.rotary_dim or not cos_sin.is_contiguous():
            raise ValueError(f"cos_sin_cache must be a contiguous fp32 [max_position, rotary_dim={spec.rotary_dim}] "
                             f"tensor (cos then sin, see rope_cos_sin_cache), got {tuple(cos_sin.shape)}")
        max_pos = cos_sin.shape[0]
        if max_pos == 0 or max_pos >= 1 << 31:
            raise ValueError(f"cos_sin_cache has {max_pos} positions (1 to 2^31 - 1 supported)")
        if cos_sin.data_ptr() % ALIGN_BYTES:   # the kernel reads cos/sin pairs as 8-byte vectors
            raise ValueError("cos_sin_cache's data pointer must be 16-byte aligned; pass a fresh or .contiguous() "
                             "tensor")
        if check_positions and T and not torch.cuda.is_current_stream_capturing():
            lo, hi = torch.aminmax(positions)   # a sync: qkv_rope(check_positions=False) skips it
            if int(lo) < 0 or int(hi) >= max_pos:
                raise ValueError(f"positions hold values in [{int(lo)}, {int(hi)}], outside the cos/sin cache's "
                                 f"{max_pos} positions")
        launch = self.checked_launch(launch)
        checks.refuse_grad("qkv_rope", x, weight, bias)
        given = q is not None or k is not None or v is not None   # fresh outputs overlap nothing
        q, ldq = self._output("q", q, (T, num_heads, D), dev)
        k, ldk = self._output("k", k, (T, num_kv_heads, D), dev)
        v, ldv = self._output("v", v, (T, num_kv_heads, D), dev)
        if T == 0:
            return q, k, v
        if K == 0:
            raise ValueError("x has K = 0 columns")
        lda, a_ptr = checks.matrix("x", x, T, K, self._size)
        ldb, b_ptr = checks.matrix("weight", weight, N, K, self._size)
        if given:
            self._check_overlaps(x, a_ptr, lda, weight, b_ptr, ldb, bias_ptr, positions, cos_sin, (q, ldq),
                                 (k, ldk), (v, ldv))
        _, swizzle, raster, _, _, pdl = launch.abi
        problem = self._pack(T, N, K, a_ptr, lda, b_ptr, ldb, bias_ptr, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                             ldq, ldk, ldv, positions.data_ptr(), cos_sin.data_ptr(), max_pos, num_heads,
                             num_kv_heads, int(positions.dtype == torch.int64), swizzle, raster, pdl, dev, 0, 0, 0,
                             raw_stream(dev))
        self.launch(problem, dev, T, N, K)
        return q, k, v
