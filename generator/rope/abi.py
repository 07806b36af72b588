"""The rope family's C ABI: one QKV projection in the caller's terms (N = (Hq + 2 Hkv) * D)."""
from ..abi import AbiStruct, Field

PROBLEM = AbiStruct("FgRopeProblem", version=1, fields=(
    Field("m", "i64", "tokens"), Field("n", "i64", "(Hq + 2 Hkv) * head_dim"), Field("k", "i64"),
    Field("a", "cptr", "activations [T,K] row-major"), Field("lda", "i64"),
    Field("b", "cptr", "packed QKV weight [N,K] row-major (pack_qkv_rope)"), Field("ldb", "i64"),
    Field("bias", "cptr", "packed bias [N] or null"),
    Field("q", "ptr", "[T, Hq, D]"), Field("k_out", "ptr", "[T, Hkv, D]"), Field("v", "ptr", "[T, Hkv, D]"),
    Field("ldq", "i64", "token strides in elements"), Field("ldk", "i64"), Field("ldv", "i64"),
    Field("positions", "cptr", "[T] int32 or int64"),
    Field("cos_sin", "cptr", "[max_pos, rotary_dim] fp32: cos then sin"),
    Field("max_pos", "i64"),
    Field("num_heads", "i32"), Field("num_kv_heads", "i32"),
    Field("positions_int64", "i32"),
    Field("swizzle", "i32"), Field("raster", "i32"), Field("pdl", "i32"),
    Field("device", "i32"), Field("reserved", "i32"),
    Field("workspace", "ptr"), Field("workspace_bytes", "u64"),
    Field("stream", "ptr", "cudaStream_t; everything before it keys the Params cache"),
))
