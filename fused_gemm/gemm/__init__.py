"""The GEMM family's runtime: GemmOp (one compiled kernel) and linear (a kernel per call shape)."""
