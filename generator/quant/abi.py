"""The quant family's C ABI: one row-wise quantisation, x [rows, cols] -> q [rows, cols], scale [rows]."""
from ..abi import AbiStruct, Field

PROBLEM = AbiStruct("FgQuantProblem", version=1, fields=(
    Field("x", "cptr", "[rows, cols] bf16/fp16"), Field("ldx", "i64", "row stride in elements"),
    Field("q", "ptr", "[rows, cols] e4m3"), Field("ldq", "i64", "row stride in elements (bytes)"),
    Field("scale", "ptr", "fp32 [rows]: absmax / 448"),
    Field("rows", "i64"), Field("cols", "i64", "a multiple of 16"),
    Field("device", "i32"), Field("reserved", "i32"),
    Field("stream", "ptr", "cudaStream_t"),
))
