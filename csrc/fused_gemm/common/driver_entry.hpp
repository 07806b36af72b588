// CUTLASS encodes a TMA descriptor per operand per launch.  By default it looks the driver's
// cuTensorMapEncodeTiled up by name every time (cudaGetDriverEntryPoint), a cost paid on every
// decode step.  We build with CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, so CUTLASS calls the symbol
// directly, and define that symbol here: it resolves the driver's entry point once and caches it.
// This also spares the library a link-time dependency on libcuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

extern "C" __attribute__((visibility("hidden"))) CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap *tensor_map, CUtensorMapDataType data_type, cuuint32_t rank, void *address,
    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
    const cuuint32_t *element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill) {
  using Fn = CUresult(CUDAAPI *)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static Fn driver_fn = [] {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                        &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<Fn>(fn);
  }();
  if (driver_fn == nullptr) return CUDA_ERROR_NOT_FOUND;
  return driver_fn(tensor_map, data_type, rank, address, dims, strides, box, element_strides,
                   interleave, swizzle, l2_promotion, oob_fill);
}
