"""Quantized GEMMs: W8A8 fp8 (``fp8_linear``, ``quantize_fp8``, ``quantize_fp8_weight``) and the
quant family's runtime op (QuantOp: the fused per-token activation quantiser)."""
