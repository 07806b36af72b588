"""The attention family's C ABI: one flash-attention forward in flash-attn's terms."""
from ..abi import AbiStruct, Field

PROBLEM = AbiStruct("FgAttentionProblem", version=1, fields=(
    Field("q", "cptr", "[B, Sq, Hq, D] or packed [total_q, Hq, D]"),
    Field("k", "cptr", "[B, Sk, Hkv, D] or packed [total_k, Hkv, D]"), Field("v", "cptr", "like k"),
    Field("o", "ptr", "like q"), Field("lse", "ptr", "fp32 [B, Hq, Sq] or [Hq, total_q]; null: not written"),
    Field("q_row", "i64", "strides in elements (token, batch, head); D is contiguous"),
    Field("q_batch", "i64"), Field("q_head", "i64"),
    Field("k_row", "i64"), Field("k_batch", "i64"), Field("k_head", "i64"),
    Field("v_row", "i64"), Field("v_batch", "i64"), Field("v_head", "i64"),
    Field("o_row", "i64"), Field("o_batch", "i64"), Field("o_head", "i64"),
    Field("lse_batch", "i64"), Field("lse_head", "i64"),
    Field("cu_q", "cptr", "int32 [B + 1] (varlen) or null"), Field("cu_k", "cptr", "int32 [B + 1] or null"),
    Field("batch", "i32"), Field("num_heads", "i32"), Field("num_kv_heads", "i32"), Field("head_dim", "i32"),
    Field("max_q", "i32", "Sq, or the longest sequence (varlen)"), Field("max_k", "i32"),
    Field("total_q", "i32", "varlen: tokens in q/o"), Field("total_k", "i32"),
    Field("scale", "f32", "softmax scale"), Field("pdl", "i32", "unused (kept for the shared launcher)"),
    Field("device", "i32"), Field("reserved", "i32"),
    Field("workspace", "ptr"), Field("workspace_bytes", "u64"),
    Field("stream", "ptr", "cudaStream_t; everything before it keys the Params cache"),
))
