"""Attention on CUTLASS's FMHA (sm90: example 88's kernel with our masks, loads and epilogue)."""
