"""Decode attention over a KV cache (flash-decoding: split keys, LSE merge)."""
