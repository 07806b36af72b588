// The C ABI every generated fused-gemm library exports.  Python loads it with ctypes, so the
// library works with any torch build; bump FG_ABI_VERSION whenever a signature changes.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define FG_ABI_VERSION 3

// Status codes returned by fg_can_implement / fg_run (0 is success).
#define FG_OK 0
#define FG_ERR_INVALID 1   // the problem does not fit this kernel (alignment, shape, workspace)
#define FG_ERR_CUTLASS 2   // CUTLASS refused or failed; fg_last_error() has its status string
#define FG_ERR_CUDA 3      // a CUDA runtime call failed; fg_last_error() has the CUDA message

// One launch, in the caller's terms (never swapped): D[M,N] = epi(A[M,K] @ B^T).  Passed by
// pointer so that Python fills it with one struct.pack_into instead of converting ~30 ctypes
// arguments per call; fused_gemm/library.py mirrors this layout (natural alignment, no gaps).
typedef struct FgProblem {
  int64_t m, n, k;
  const void *a; int64_t lda;     // activations [M,K] row-major, row stride in elements
  const void *b; int64_t ldb;     // weight [N,K] ('nk') or [K,N] ('kn'), row stride
  const void *c; int64_t ldc;     // residual [M,N] (may equal d)
  void *d; int64_t ldd;           // output [M,N]
  const void *bias;               // [N]
  const void *row_scale;          // [M] fp32
  const void *col_scale;          // [N] fp32
  float alpha, beta;
  // Launch options: runtime knobs of CUTLASS's tile schedulers (no recompile).
  int32_t splits;                 // split-K factor (stream-K kernels; 1 = let the scheduler decide)
  int32_t swizzle;                // tile swizzle 1/2/4/8
  int32_t raster;                 // 0 heuristic, 1 along M, 2 along N
  int32_t decomposition;          // stream-K: 0 heuristic, 1 data-parallel, 2 split-K, 3 stream-K
  int32_t reduction;              // stream-K: 0 deterministic (turnstile), 1 nondeterministic
  int32_t pdl;                    // programmatic dependent launch: prologue overlaps the previous kernel
  int32_t device;                 // CUDA ordinal the pointers live on (the current device)
  int32_t reserved;
  void *workspace; uint64_t workspace_bytes;
  void *stream;                   // cudaStream_t
} FgProblem;

#ifdef __cplusplus
extern "C" {
#endif
int fg_abi_version(void);
const char *fg_spec_uri(void);
const char *fg_last_error(void);
int fg_can_implement(const FgProblem *problem);
size_t fg_workspace_size(const FgProblem *problem);
int fg_run(const FgProblem *problem);
#ifdef __cplusplus
}
#endif
