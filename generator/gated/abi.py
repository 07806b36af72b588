"""The gated family's C ABI: one launch in the caller's terms, out[M, N] with N = I (the packed
weight has 2N rows).  Field names shared with other families (device, pdl, workspace, stream,
swizzle, raster) are what the common sm90 launcher reads."""
from ..abi import AbiStruct, Field

PROBLEM = AbiStruct("FgGatedProblem", version=1, fields=(
    Field("m", "i64"), Field("n", "i64", "I: output columns; the packed weight has 2I rows"), Field("k", "i64"),
    Field("a", "cptr", "activations [M,K] row-major"), Field("lda", "i64", "row stride in elements"),
    Field("b", "cptr", "packed gate/up weight [2I,K] row-major"), Field("ldb", "i64"),
    Field("c", "cptr", "residual [M,I] (may equal d)"), Field("ldc", "i64"),
    Field("d", "ptr", "output [M,I]"), Field("ldd", "i64"),
    Field("bias_gate", "cptr", "[I] or null"), Field("bias_up", "cptr", "[I] or null"),
    Field("alpha", "f32"), Field("beta", "f32"),
    Field("swizzle", "i32", "tile swizzle 1/2/4/8"),
    Field("raster", "i32", "0 heuristic, 1 along M, 2 along N"),
    Field("pdl", "i32", "programmatic dependent launch"),
    Field("device", "i32", "CUDA ordinal the pointers live on (the current device)"),
    Field("workspace", "ptr"), Field("workspace_bytes", "u64"),
    Field("stream", "ptr", "cudaStream_t; everything before it keys the Params cache"),
))
