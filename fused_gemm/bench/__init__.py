"""Sweeps, tuning and the timing helpers they share (the runtime layer: they run on the GPU)."""
