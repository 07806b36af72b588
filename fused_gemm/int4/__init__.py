"""The int4 family's ops: W4A16 (Int4Weight, quantize_int4, GPTQ/AWQ importers, int4_linear) and W8A16
(fp8_weight_linear on an Fp8Weight, w8a16.py), one Int4Op and one kernel choice (select.py) for both."""
