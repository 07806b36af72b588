"""The int4 family's C ABI: one launch in the caller's terms (never swapped),
D[M,N] = epi(X[M,K] @ dequant(W)^T).  The field names it shares with the GEMM family (swizzle,
raster, splits, decomposition, reduction, pdl, device, workspace, stream) are what the common sm90
launcher and the stream-K scheduler glue read.

An e4m3 (W8A16) kernel reads w as e4m3 [N, K] row-major and scales as fp32 [N] (its epilogue's
per-channel scale); zeros is null and group_size K.  The field comments below are rendered into every
int4 kernel's source, so they keep the int4 wording: rewording them would rebuild those kernels."""
from ..abi import AbiStruct, Field
from ..gemm.abi import LAUNCH_FIELDS

PROBLEM = AbiStruct("FgInt4Problem", version=1, fields=(
    Field("m", "i64"), Field("n", "i64"), Field("k", "i64"),
    Field("a", "cptr", "activations [M,K] row-major"), Field("lda", "i64", "row stride in elements"),
    Field("w", "cptr", "int4 codes [N,K], reordered by fused_gemm.quantize_int4 (N, K multiples of 16)"),
    Field("scales", "cptr", "[K/group, N] row-major, the activation dtype"),
    Field("zeros", "cptr", "[K/group, N] additive zero offsets (u4 weights), or null"),
    Field("group_size", "i64", "a multiple of the tile's K, or K (per channel)"),
    Field("c", "cptr", "residual [M,N] (may equal d)"), Field("ldc", "i64"),
    Field("d", "ptr", "output [M,N]"), Field("ldd", "i64"),
    Field("bias", "cptr", "[N]"),
    Field("alpha", "f32"), Field("beta", "f32"),
) + LAUNCH_FIELDS)
