"""Attention on CUTLASS's FMHA (sm90: example 88's mainloop with our kernel, masks, loads and epilogue)."""
