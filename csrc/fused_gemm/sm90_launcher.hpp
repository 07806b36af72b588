// Launch glue for one generated sm90 kernel: turns an fg Problem into CUTLASS arguments and
// launches with the fewest host calls we can (the launch path runs every decode step).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "fused_gemm/abi.h"
#include "fused_gemm/driver_entry.hpp"
#include "fused_gemm/sm90_stream_k.hpp"

namespace fused_gemm {

struct Problem {
  int64_t m, n, k;
  const void *a; int64_t lda;
  const void *b; int64_t ldb;
  const void *c; int64_t ldc;
  void *d; int64_t ldd;
  const void *bias, *row_scale, *col_scale;
  float alpha, beta;
  int32_t splits, swizzle, raster, decomposition, reduction, pdl;
};

inline std::string &last_error() {
  static thread_local std::string message;
  return message;
}

inline int fail(int code, std::string message) {
  last_error() = std::move(message);
  return code;
}

// A packed rank-2 stride with one unit mode and one dynamic leading dimension, batch stride 0.
template <class Stride>
Stride leading_dim_stride(int64_t ld) {
  Stride s{};
  if constexpr (cute::is_static_v<std::remove_reference_t<decltype(cute::get<0>(s))>>) {
    cute::get<1>(s) = ld;
  } else {
    cute::get<0>(s) = ld;
  }
  return s;
}

constexpr int kMaxDevices = 64;

// Multiprocessor counts never change; the persistent schedulers need one per launch.
inline int sm_count(int device) {
  static std::atomic<int> counts[kMaxDevices] = {};
  int count = counts[device].load(std::memory_order_relaxed);
  if (count == 0) {
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Kernel (generated) provides: GemmKernel, kSwapAB, kStreamK, fusion_arguments(Problem).
template <class Kernel>
struct Sm90Launcher {
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using Arguments = typename Gemm::Arguments;
  using ElementA = typename Gemm::ElementA;
  using ElementB = typename Gemm::ElementB;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;
  using ElementCPtr = std::conditional_t<std::is_void_v<ElementC>, void, ElementC>;

  static Arguments arguments(Problem const &p, int device) {
    // swap-AB runs D^T[N,M] = B[N,K] . A[M,K]^T: the weight becomes the kernel's A operand.
    int64_t const M = Kernel::kSwapAB ? p.n : p.m;
    int64_t const N = Kernel::kSwapAB ? p.m : p.n;
    void const *ptr_a = Kernel::kSwapAB ? p.b : p.a;
    void const *ptr_b = Kernel::kSwapAB ? p.a : p.b;
    int64_t const ld_a = Kernel::kSwapAB ? p.ldb : p.lda;
    int64_t const ld_b = Kernel::kSwapAB ? p.lda : p.ldb;

    cutlass::KernelHardwareInfo hw_info;
    hw_info.device_id = device;
    hw_info.sm_count = sm_count(device);

    Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {static_cast<int>(M), static_cast<int>(N), static_cast<int>(p.k), 1},
        {static_cast<ElementA const *>(ptr_a), leading_dim_stride<typename GemmKernel::StrideA>(ld_a),
         static_cast<ElementB const *>(ptr_b), leading_dim_stride<typename GemmKernel::StrideB>(ld_b)},
        {Kernel::fusion_arguments(p),
         static_cast<ElementCPtr const *>(p.c), leading_dim_stride<typename GemmKernel::StrideC>(p.ldc),
         static_cast<ElementD *>(p.d), leading_dim_stride<typename GemmKernel::StrideD>(p.ldd)},
        hw_info};
    auto &sched = args.scheduler;
    sched.max_swizzle_size = p.swizzle > 0 ? p.swizzle : 1;
    sched.raster_order = static_cast<std::remove_reference_t<decltype(sched.raster_order)>>(p.raster);
    if constexpr (Kernel::kStreamK) {
      sched.splits = p.splits > 0 ? p.splits : 1;
      sched.decomposition_mode =
          static_cast<std::remove_reference_t<decltype(sched.decomposition_mode)>>(p.decomposition);
      sched.reduction_mode = static_cast<std::remove_reference_t<decltype(sched.reduction_mode)>>(p.reduction);
    }
    return args;
  }

  static int current_device(int *device) {
    cudaError_t err = cudaGetDevice(device);
    if (err != cudaSuccess) return fail(FG_ERR_CUDA, std::string("cudaGetDevice: ") + cudaGetErrorString(err));
    if (*device < 0 || *device >= kMaxDevices) return fail(FG_ERR_CUDA, "device ordinal out of range");
    return FG_OK;
  }

  static int can_implement(Problem const &p) {
    int device = 0;
    if (int rc = current_device(&device)) return rc;
    cutlass::Status status = Gemm::can_implement(arguments(p, device));
    if (status != cutlass::Status::kSuccess) {
      return fail(FG_ERR_INVALID, std::string("CUTLASS can_implement: ") + cutlassGetStatusString(status) +
                                      " (check M/N/K alignment: rows must be 16-byte aligned)");
    }
    return FG_OK;
  }

  static size_t workspace_size(Problem const &p) {
    int device = 0;
    if (current_device(&device)) return 0;
    return Gemm::get_workspace_size(arguments(p, device));
  }

  // Raise the dynamic shared-memory limit once per device, not once per launch.
  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    int smem = GemmKernel::SharedStorageSize;
    if (smem >= (48 << 10)) {
      cudaError_t err = cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (err != cudaSuccess) {
        cudaGetLastError();
        return fail(FG_ERR_CUDA, std::string("cudaFuncSetAttribute(max dynamic smem): ") + cudaGetErrorString(err));
      }
    }
    prepared[device].store(true, std::memory_order_release);
    return FG_OK;
  }

  static int run(Problem const &p, void *workspace, size_t workspace_bytes, cudaStream_t stream) {
    int device = 0;
    if (int rc = current_device(&device)) return rc;
    if (int rc = prepare_device(device)) return rc;
    Arguments args = arguments(p, device);
    cutlass::Status status = Gemm::can_implement(args);
    if (status != cutlass::Status::kSuccess) {
      return fail(FG_ERR_INVALID, std::string("CUTLASS can_implement: ") + cutlassGetStatusString(status));
    }
    size_t needed = Gemm::get_workspace_size(args);
    if (needed > workspace_bytes) {
      return fail(FG_ERR_INVALID, "workspace too small: need " + std::to_string(needed) + " bytes, got " +
                                      std::to_string(workspace_bytes));
    }
    status = GemmKernel::initialize_workspace(args, workspace, stream, nullptr);
    if (status != cutlass::Status::kSuccess) {
      return fail(FG_ERR_CUTLASS, std::string("initialize_workspace: ") + cutlassGetStatusString(status));
    }
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, workspace);
    status = Gemm::run(params, stream, nullptr, /*launch_with_pdl=*/p.pdl != 0);
    if (status != cutlass::Status::kSuccess) {
      cudaError_t err = cudaGetLastError();
      return fail(FG_ERR_CUTLASS, std::string("launch: ") + cutlassGetStatusString(status) + " / " +
                                      cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm
