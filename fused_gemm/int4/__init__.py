"""W4A16: int4 weights (Int4Weight, quantize_int4, GPTQ/AWQ importers) and int4_linear."""
