"""The decode family's C ABI: new tokens' attention over a KV cache, in flash-attn's terms."""
from ..abi import AbiStruct, Field

PROBLEM = AbiStruct("FgDecodeProblem", version=2, fields=(
    Field("q", "cptr", "[B, T, Hq, D]"), Field("k", "cptr", "cache [B, S_max, Hkv, D]"), Field("v", "cptr"),
    Field("o", "ptr", "[B, T, Hq, D]"), Field("lse", "ptr", "fp32 [B, Hq, T] or null"),
    Field("seqlens", "cptr", "int32 [B]: keys in each sequence's cache; null: every cache holds max_len"),
    Field("q_batch", "i64", "strides in elements; D is contiguous"), Field("q_token", "i64"), Field("q_head", "i64"),
    Field("k_batch", "i64"), Field("k_row", "i64"), Field("k_head", "i64"),
    Field("v_batch", "i64"), Field("v_row", "i64"), Field("v_head", "i64"),
    Field("o_batch", "i64"), Field("o_token", "i64"), Field("o_head", "i64"),
    Field("lse_batch", "i64"), Field("lse_head", "i64"),
    Field("batch", "i32"), Field("tokens", "i32", "new tokens per sequence (T)"),
    Field("num_heads", "i32"), Field("num_kv_heads", "i32"),
    Field("max_len", "i32", "S_max: lengths are clamped to it"), Field("splits", "i32", "key ranges per sequence"),
    Field("scale", "f32"), Field("device", "i32"),
    Field("workspace", "ptr", "splits > 1: partial O and LSE"), Field("workspace_bytes", "u64"),
    Field("stream", "ptr", "cudaStream_t"),
))
