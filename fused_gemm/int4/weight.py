"""Int4 weights for ``fused_gemm.int4_linear``: the kernel-ready ``Int4Weight``, the quantiser
``quantize_int4`` and importers of the GPTQ and AWQ checkpoint formats.  Pure torch (CPU or GPU
tensors), for load time: nothing here runs per call.

Layout the kernel reads (generator/int4/spec.py, csrc/fused_gemm/int4/sm90_int4.hpp):
  packed  uint8 [N, K/2]: the int4 codes of W [N, K], two per byte (low nibble first), in CUTLASS's
          reordered order (16x16 blocks of (n, k), N-blocks first, each thread's 8 codes in one
          32-bit word in the order the converter extracts them): opaque, see ``codes()``.
  scales  [K/group, N] in the activation dtype (row-major: one row per group, as GPTQ/AWQ store them).
  zeros   None (symmetric: signed codes in [-8, 7]) or [K/group, N] additive offsets in the activation
          dtype (asymmetric: unsigned codes in [0, 15], zeros = -scale * zero_point).
  dequant(W)[n, k] = scales[k // group, n] * codes[n, k] (+ zeros[k // group, n]).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

Tensor = torch.Tensor
SCALE_DTYPES = (torch.bfloat16, torch.float16)
BLOCK = 16                   # the reorder atom is 16 x 16 codes (N x K)
K_MULTIPLE = 32              # 32 int4 codes = 16 bytes: TMA's unit along K
GROUP_MULTIPLE = 64          # a group is whole k-tiles, and CUTLASS's mixed-input mainloop needs k-tiles of >= 64
                             # (four k-blocks of 16: its static_assert "Consider increasing TileShapeK")
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)                     # AWQ packs column 8c + AWQ_ORDER[i] into nibble i
AWQ_REVERSE_ORDER = tuple(AWQ_ORDER.index(j) for j in range(8))   # nibble holding column 8c + j


def _reorder_atom() -> Tensor:
    """Offset of code (n, k) of a 16x16 block inside its 256 nibbles: the table CUTLASS's
    compute_memory_reordering_atom<bf16/fp16, 1, [0,2,4,6,1,3,5,7]> prints (thread t = 4 (n % 8) +
    k % 8 / 2 owns offsets 8t..8t+7; tests/test_int4.py checks the printed table)."""
    n = torch.arange(BLOCK).view(BLOCK, 1)
    k = torch.arange(BLOCK).view(1, BLOCK)
    return (32 * (n % 8) + n // 8 + 4 * (k % 8) + 2 * (k // 8)).reshape(-1)


REORDER_ATOM = _reorder_atom()        # [256]: block position nn * 16 + kk -> nibble offset


def pack_codes(codes: Tensor) -> Tensor:
    """int4 codes [N, K] (any integer dtype; signed [-8, 7] or unsigned [0, 15]) -> packed uint8
    [N, K/2] in the kernel's order.  N and K multiples of 16."""
    n, k = codes.shape
    nibbles = (codes.to(torch.int16) & 0xF).to(torch.uint8)
    blocks = nibbles.view(n // BLOCK, BLOCK, k // BLOCK, BLOCK).permute(2, 0, 1, 3).reshape(k // BLOCK, n // BLOCK, -1)
    stream = torch.empty_like(blocks)
    stream[:, :, REORDER_ATOM.to(codes.device)] = blocks
    stream = stream.view(-1, 2)
    return (stream[:, 0] | (stream[:, 1] << 4)).view(n, k // 2)


def unpack_codes(packed: Tensor, signed: bool) -> Tensor:
    """Inverse of ``pack_codes``: int8 codes [N, K]."""
    n, k = packed.shape[0], packed.shape[1] * 2
    stream = torch.stack((packed & 0xF, packed >> 4), dim=-1).view(k // BLOCK, n // BLOCK, BLOCK * BLOCK)
    blocks = stream[:, :, REORDER_ATOM.to(packed.device)].view(k // BLOCK, n // BLOCK, BLOCK, BLOCK)
    codes = blocks.permute(1, 2, 0, 3).reshape(n, k).to(torch.int8)
    return codes - ((codes >= 8).to(torch.int8) << 4) if signed else codes


def check_group_size(group_size: int, k: int, name: str = "group_size") -> None:
    """A group size the kernels take: the whole K (per channel), or a multiple of 64 dividing K."""
    if type(group_size) is not int:
        raise TypeError(f"{name} must be an int, got {type(group_size).__name__}")
    if group_size == k:
        return
    if group_size <= 0 or group_size % GROUP_MULTIPLE:
        raise ValueError(f"{name} {group_size} is not supported: use a multiple of {GROUP_MULTIPLE} (64, 128, "
                         f"...) or K = {k} (per channel)")
    if k % group_size:
        raise ValueError(f"K = {k} is not a multiple of {name} {group_size}")


def check_shape(n: int, k: int, name: str = "weight") -> None:
    if n <= 0 or n % BLOCK:
        raise ValueError(f"{name} has N = {n} output features, which must be a positive multiple of {BLOCK} "
                         "(the kernel's weight blocks are 16 x 16)")
    if k <= 0 or k % K_MULTIPLE:
        raise ValueError(f"{name} has K = {k}, which must be a positive multiple of {K_MULTIPLE} (32 int4 codes "
                         "are 16 bytes, the unit the kernel loads)")


@dataclass(eq=False)
class Int4Weight:
    """A W4A16 weight as ``int4_linear`` reads it (see the module docstring for the layout).  Make
    one with ``quantize_int4``, ``int4_from_gptq``, ``int4_from_awq`` or ``Int4Weight.from_codes``."""
    packed: Tensor
    scales: Tensor
    zeros: Optional[Tensor]
    group_size: int
    N: int
    K: int
    symmetric: bool = field(default=True)

    def __post_init__(self):
        for name in ("packed", "scales"):
            if not isinstance(getattr(self, name), Tensor):
                raise TypeError(f"Int4Weight.{name} must be a torch.Tensor, got {type(getattr(self, name)).__name__}")
        n, k = self.N, self.K
        check_shape(n, k, "Int4Weight")
        check_group_size(self.group_size, k, "Int4Weight.group_size")
        if self.packed.dtype is not torch.uint8 or tuple(self.packed.shape) != (n, k // 2):
            raise ValueError(f"Int4Weight.packed must be uint8 [N, K/2] = [{n}, {k // 2}], got {self.packed.dtype} "
                             f"{tuple(self.packed.shape)}")
        groups = k // self.group_size
        if self.scales.dtype not in SCALE_DTYPES:
            raise TypeError(f"Int4Weight.scales has dtype {self.scales.dtype}; scales are bfloat16 or float16 "
                            "(the activations' dtype)")
        if tuple(self.scales.shape) != (groups, n):
            raise ValueError(f"Int4Weight.scales must be [K/group_size, N] = [{groups}, {n}], got "
                             f"{tuple(self.scales.shape)}")
        if self.symmetric != (self.zeros is None):
            raise ValueError("Int4Weight: a symmetric weight has no zeros, an asymmetric one has them")
        if self.zeros is not None:
            if not isinstance(self.zeros, Tensor) or self.zeros.dtype is not self.scales.dtype or \
                    tuple(self.zeros.shape) != (groups, n):
                raise ValueError(f"Int4Weight.zeros must be a {self.scales.dtype} tensor [{groups}, {n}] like scales")
        for t in (self.packed, self.scales, self.zeros):
            if t is not None and t.device != self.packed.device:
                raise ValueError("Int4Weight's tensors must be on one device")

    @classmethod
    def from_codes(cls, codes: Tensor, scales: Tensor, zero_points: Optional[Tensor] = None, *,
                   group_size: Optional[int] = None) -> "Int4Weight":
        """From int4 codes [N, K] (signed [-8, 7] without zero points; unsigned [0, 15] with integer
        zero_points [K/group, N]) and scales [K/group, N] (bf16/fp16): dequant = scale * (code - zero).
        The additive offsets the kernel reads are -scale * zero, rounded to the scales' dtype."""
        n, k = codes.shape
        groups = scales.shape[0]
        group_size = group_size or (k // groups if groups and k % groups == 0 else 0)
        check_shape(n, k)
        check_group_size(group_size, k)
        if scales.dtype not in SCALE_DTYPES:
            raise TypeError(f"scales has dtype {scales.dtype}; pass bfloat16 or float16 scales (the activations' dtype)")
        zeros = None
        if zero_points is not None:
            zeros = (-(scales.float() * zero_points.float())).to(scales.dtype).contiguous()
        return cls(pack_codes(codes), scales.contiguous(), zeros, group_size, n, k, symmetric=zero_points is None)

    @property
    def dtype(self) -> torch.dtype:
        """The activation dtype this weight serves (its scales')."""
        return self.scales.dtype

    @property
    def device(self) -> torch.device:
        return self.packed.device

    def to(self, device) -> "Int4Weight":
        move = (lambda t: None if t is None else t.to(device))
        return Int4Weight(move(self.packed), move(self.scales), move(self.zeros), self.group_size, self.N, self.K,
                          self.symmetric)

    def codes(self) -> Tensor:
        """The int4 codes [N, K] as int8 (signed if symmetric, else unsigned)."""
        return unpack_codes(self.packed, self.symmetric)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """dequant(W) [N, K], computed in ``dtype`` from the stored codes, scales and offsets (what the
        kernel multiplies by, up to its rounding to the activation dtype)."""
        g = self.group_size
        w = self.codes().to(dtype).view(self.N, self.K // g, g) * self.scales.to(dtype).t()[:, :, None]
        if self.zeros is not None:
            w = w + self.zeros.to(dtype).t()[:, :, None]
        return w.view(self.N, self.K)


def _scale_dtype(name: str, given: Optional[torch.dtype], default: torch.dtype) -> torch.dtype:
    dtype = given if given is not None else default
    if dtype not in SCALE_DTYPES:
        raise TypeError(f"{name}: scales are stored in the activations' dtype, bfloat16 or float16; got {dtype} "
                        "(pass dtype=torch.bfloat16 or torch.float16)")
    return dtype


def quantize_int4(w: Tensor, group_size: Optional[int] = 128, symmetric: bool = True, *,
                  dtype: Optional[torch.dtype] = None) -> Int4Weight:
    """Round-to-nearest int4 quantisation of an nn.Linear weight ``w`` [N, K] in groups of
    ``group_size`` along K (None, -1 or K: per output channel).  symmetric: code = round(w / s) in
    [-8, 7], s = max|w| / 7 per group.  asymmetric: codes in [0, 15] with a zero point, s =
    (max - min) / 15.  Scales (and offsets) in ``dtype``, default w's (bf16/fp16; pass it for an fp32
    w): the activation dtype int4_linear will see.  Codes are chosen against the rounded scales, so
    ``dequantize()`` is the weight the kernel multiplies by."""
    if not isinstance(w, Tensor):
        raise TypeError(f"w must be a torch.Tensor, got {type(w).__name__}")
    if w.dim() != 2:
        raise ValueError(f"w must be 2-D [N, K] (an nn.Linear weight), got shape {tuple(w.shape)}")
    if not w.is_floating_point() or w.dtype.itemsize == 1:
        raise TypeError(f"w has dtype {w.dtype}; quantize_int4 takes a 16- or 32-bit float weight")
    n, k = w.shape
    check_shape(n, k, "w")
    g = k if group_size in (None, -1) else group_size
    check_group_size(g, k)
    dtype = _scale_dtype("quantize_int4", dtype, w.dtype if w.dtype in SCALE_DTYPES else None)
    with torch.no_grad():
        wg = w.float().view(n, k // g, g)
        if symmetric:
            s = (wg.abs().amax(-1) / 7).clamp_min_(torch.finfo(dtype).tiny).to(dtype)
            codes = torch.round(wg / s.float()[..., None]).clamp_(-8, 7)
            zeros = None
        else:
            lo, hi = wg.amin(-1).clamp(max=0), wg.amax(-1).clamp(min=0)   # the range holds 0: zeros stay exact-ish
            s = ((hi - lo) / 15).clamp_min_(torch.finfo(dtype).tiny).to(dtype)
            zp = torch.round(-lo / s.float()).clamp_(0, 15)
            zeros = (-(s.float() * zp)).to(dtype)
            codes = torch.round((wg - zeros.float()[..., None]) / s.float()[..., None]).clamp_(0, 15)
        codes = codes.view(n, k).to(torch.int8)
        return Int4Weight(pack_codes(codes), s.t().contiguous(), None if zeros is None else zeros.t().contiguous(),
                          g, n, k, symmetric=symmetric)


# -- checkpoint formats ------------------------------------------------------------------------
def _int32(name: str, t, rows: int, cols: int) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype is not torch.int32:
        raise TypeError(f"{name} has dtype {t.dtype}; packed int4 checkpoints store int32 words")
    if tuple(t.shape) != (rows, cols):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected ({rows}, {cols})")
    return t


def _nibbles(words: Tensor, order=tuple(range(8))) -> Tensor:
    """int32 [R, C] -> int16 [R, C, 8]: entry j is the nibble at bits 4 * order[j]."""
    shifts = torch.tensor([4 * i for i in order], dtype=torch.int32, device=words.device)
    return ((words.unsqueeze(-1) >> shifts) & 0xF).to(torch.int16)


def _from_zero_points(codes_kn: Tensor, scales: Tensor, zero_points: Tensor, group_size: int,
                      dtype: torch.dtype) -> Int4Weight:
    """Codes [K, N] unsigned with integer zero points [K/g, N]: symmetric s4 if every zero point is
    8 (a symmetric checkpoint: exact, and the kernel skips the offsets), else u4 with offsets."""
    scales = scales.to(dtype)
    if bool((zero_points == 8).all()):
        return Int4Weight.from_codes((codes_kn - 8).t(), scales, group_size=group_size)
    return Int4Weight.from_codes(codes_kn.t(), scales, zero_points, group_size=group_size)


def _checkpoint_scales(name: str, scales, groups_hint: Optional[int], n: int) -> Tensor:
    if not isinstance(scales, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(scales).__name__}")
    if not scales.is_floating_point():
        raise TypeError(f"{name} has dtype {scales.dtype}; expected float scales")
    if scales.dim() != 2 or scales.shape[1] != n or (groups_hint is not None and scales.shape[0] != groups_hint):
        raise ValueError(f"{name} has shape {tuple(scales.shape)}, expected [K/group_size, N = {n}]")
    return scales


def int4_from_gptq(qweight: Tensor, scales: Tensor, qzeros: Tensor, g_idx: Optional[Tensor] = None, *,
                   zero_offset: int = 1, dtype: Optional[torch.dtype] = None) -> Int4Weight:
    """An Int4Weight from a 4-bit GPTQ layer: qweight int32 [K/8, N] (code of row k at bits 4 (k % 8) of
    word k // 8), scales [K/g, N], qzeros int32 [K/g, N/8] (zero point of column n at bits 4 (n % 8)
    of word n // 8), dequant = scale * (code - (stored zero + zero_offset)): the classic format's +1
    (``zero_offset=0`` for checkpoint_format 'gptq_v2').  g_idx (act-order) must be the identity
    k // g; desc_act checkpoints are refused.  Scales in ``dtype`` (default: the checkpoint's)."""
    if not isinstance(qweight, Tensor) or qweight.dim() != 2:
        raise ValueError("qweight must be a 2-D int32 tensor [K/8, N]")
    k, n = qweight.shape[0] * 8, qweight.shape[1]
    _int32("qweight", qweight, k // 8, n)
    scales = _checkpoint_scales("scales", scales, None, n)
    groups = scales.shape[0]
    if groups == 0 or k % groups:
        raise ValueError(f"scales has {groups} groups, which do not divide K = {k}")
    g = k // groups
    _int32("qzeros", qzeros, groups, n // 8)
    if g_idx is not None:
        expect = torch.arange(k, device=g_idx.device) // g
        if g_idx.shape != (k,) or not torch.equal(g_idx.to(torch.int64), expect):
            raise ValueError("g_idx is not k // group_size: act-order (desc_act=True) GPTQ checkpoints permute K and "
                             "are not supported; re-quantize without act-order or with static groups")
    dtype = _scale_dtype("int4_from_gptq", dtype, scales.dtype)
    codes = _nibbles(qweight.t()).reshape(n, k).t()                 # [K, N]
    zero_points = _nibbles(qzeros).reshape(groups, n) + zero_offset
    return _from_zero_points(codes, scales, zero_points, g, dtype)


def int4_from_awq(qweight: Tensor, scales: Tensor, qzeros: Tensor, *,
                  dtype: Optional[torch.dtype] = None) -> Int4Weight:
    """An Int4Weight from a 4-bit AWQ (GEMM version) layer: qweight int32 [K, N/8] and qzeros int32
    [K/g, N/8] packed along N in AWQ's order (column 8c + AWQ_ORDER[i] at bits 4i of word c), scales
    [K/g, N]; dequant = scale * (code - zero).  Scales in ``dtype`` (default: the checkpoint's)."""
    if not isinstance(qweight, Tensor) or qweight.dim() != 2:
        raise ValueError("qweight must be a 2-D int32 tensor [K, N/8]")
    k, n = qweight.shape[0], qweight.shape[1] * 8
    _int32("qweight", qweight, k, n // 8)
    scales = _checkpoint_scales("scales", scales, None, n)
    groups = scales.shape[0]
    if groups == 0 or k % groups:
        raise ValueError(f"scales has {groups} groups, which do not divide K = {k}")
    _int32("qzeros", qzeros, groups, n // 8)
    dtype = _scale_dtype("int4_from_awq", dtype, scales.dtype)
    codes = _nibbles(qweight, AWQ_REVERSE_ORDER).reshape(k, n)
    zero_points = _nibbles(qzeros, AWQ_REVERSE_ORDER).reshape(groups, n)
    return _from_zero_points(codes, scales, zero_points, k // groups, dtype)
