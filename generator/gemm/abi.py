"""The GEMM family's C ABI: one launch, in the caller's terms (never swapped):
D[M,N] = epi(A[M,K] @ B^T).  Passed by pointer so that Python fills it with one
struct.pack instead of converting ~30 ctypes arguments per call."""
from ..abi import AbiStruct, Field

# The tail every family on the GEMM's sm90 launcher and stream-K scheduler glue ends its struct with:
# the runtime knobs of CUTLASS's tile schedulers (LaunchOptions.abi, in this order), the device, the
# stream-K workspace and the stream.
LAUNCH_FIELDS = (
    Field("splits", "i32", "split-K factor (stream-K kernels; 1 = let the scheduler decide)"),
    Field("swizzle", "i32", "tile swizzle 1/2/4/8"),
    Field("raster", "i32", "0 heuristic, 1 along M, 2 along N"),
    Field("decomposition", "i32", "stream-K: 0 heuristic, 1 data-parallel, 2 split-K, 3 stream-K"),
    Field("reduction", "i32", "stream-K: 0 deterministic (turnstile), 1 nondeterministic"),
    Field("pdl", "i32", "programmatic dependent launch"),
    Field("device", "i32", "CUDA ordinal the pointers live on (the current device)"),
    Field("reserved", "i32"),
    Field("workspace", "ptr"), Field("workspace_bytes", "u64"),
    Field("stream", "ptr", "cudaStream_t; everything before it keys the Params cache"),
)

PROBLEM = AbiStruct("FgGemmProblem", version=4, fields=(
    Field("m", "i64"), Field("n", "i64"), Field("k", "i64"),
    Field("a", "cptr", "activations [M,K] row-major"), Field("lda", "i64", "row stride in elements"),
    Field("b", "cptr", "weight [N,K] ('nk') or [K,N] ('kn')"), Field("ldb", "i64"),
    Field("c", "cptr", "residual [M,N] (may equal d)"), Field("ldc", "i64"),
    Field("d", "ptr", "output [M,N]"), Field("ldd", "i64"),
    Field("bias", "cptr", "[N]"),
    Field("row_scale", "cptr", "[M] fp32"),
    Field("col_scale", "cptr", "[N] fp32"),
    Field("alpha", "f32"), Field("beta", "f32"),
) + LAUNCH_FIELDS)
