// The C ABI every generated fused-gemm library exports.  Python loads it with ctypes, so the
// library works with any torch build; bump FG_ABI_VERSION whenever a signature changes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define FG_ABI_VERSION 2

// Status codes returned by fg_can_implement / fg_run (0 is success).
#define FG_OK 0
#define FG_ERR_INVALID 1   // the problem does not fit this kernel (alignment, shape, workspace)
#define FG_ERR_CUTLASS 2   // CUTLASS refused or failed; fg_last_error() has its status string
#define FG_ERR_CUDA 3      // a CUDA runtime call failed; fg_last_error() has the CUDA message

// One problem, in the caller's terms (never swapped): D[M,N] = epi(A[M,K] @ B^T).
//   a: activations [M,K] row-major, row stride lda (elements)
//   b: weight [N,K] (ldb = its row stride) or [K,N], as the kernel's spec says
//   c: residual [M,N] (may equal d), d: output [M,N]; row strides ldc, ldd
//   bias / col_scale: [N] vectors; row_scale: [M] vector (fp32 scales)
// Launch options (runtime knobs of CUTLASS's tile schedulers; no recompile):
//   splits: split-K factor (stream-K kernels; 1 = let the scheduler decide)
//   swizzle: tile swizzle 1/2/4/8; raster: 0 heuristic, 1 along M, 2 along N
//   decomposition (stream-K): 0 heuristic, 1 data-parallel, 2 split-K, 3 stream-K
//   reduction (stream-K): 0 deterministic (turnstile), 1 nondeterministic
//   pdl: launch with programmatic dependent launch (prologue overlaps the previous kernel)
#define FG_PROBLEM_PARAMS                                                     \
  int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b, \
      int64_t ldb, const void *c, int64_t ldc, void *d, int64_t ldd,          \
      const void *bias, const void *row_scale, const void *col_scale,         \
      float alpha, float beta, int32_t splits, int32_t swizzle,               \
      int32_t raster, int32_t decomposition, int32_t reduction, int32_t pdl
#define FG_PROBLEM_INIT                                                       \
  {m, n, k, a, lda, b, ldb, c, ldc, d, ldd, bias, row_scale, col_scale,       \
   alpha, beta, splits, swizzle, raster, decomposition, reduction, pdl}

#ifdef __cplusplus
extern "C" {
#endif
int fg_abi_version(void);
const char *fg_spec_uri(void);
const char *fg_last_error(void);
int fg_can_implement(FG_PROBLEM_PARAMS);
size_t fg_workspace_size(FG_PROBLEM_PARAMS);
int fg_run(FG_PROBLEM_PARAMS, void *workspace, size_t workspace_bytes, void *stream);
#ifdef __cplusplus
}
#endif
