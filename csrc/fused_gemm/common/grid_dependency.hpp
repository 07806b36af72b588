// Programmatic dependent launch (PDL) on the device side, for our own kernels.  CUTLASS has
// wrappers (cutlass/arch/grid_dependency_control.h) without "memory" clobbers: the compiler may then
// move plain loads above griddepcontrol.wait, where they could read what the previous kernel has not
// written yet.  Both are no-ops unless the kernel is compiled with CUTLASS_ENABLE_GDC_FOR_SM90.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cutlass/cutlass.h"

namespace fused_gemm {

// Blocks until the previous kernel in the stream has completed and its writes are visible: before
// this, a kernel launched with PDL may touch no global memory the previous one could write.
CUTLASS_DEVICE void wait_for_previous_grid() {
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel (launched with PDL) start its CTAs early; it still waits for this one to end.
CUTLASS_DEVICE void allow_next_grid() {
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) in clusters of `cluster_x` CTAs along x (1: none),
// with programmatic stream serialization when `pdl` (a build with grid-dependency control:
// kFeatures & FG_FEATURE_PDL): the kernel must then call wait_for_previous_grid() before its first
// global access.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                          int cluster_x, Args &&...args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (cluster_x > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = unsigned(cluster_x);
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace fused_gemm
