// Launch glue for one generated sm90 kernel of any family: the family's `Kernel` turns its
// Problem into CUTLASS arguments (Kernel::arguments); this launches with the fewest host calls we
// can (the launch path runs every decode step).  A family's Problem has, besides its own fields:
// device, pdl, workspace, workspace_bytes and stream (the last field: it is not part of the key).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
#include "fused_gemm/common/driver_entry.hpp"
#include "fused_gemm/common/params_cache.hpp"
#include "fused_gemm/common/status.h"

namespace fused_gemm {

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

// The tile-scheduler knobs every family's Problem carries (swizzle, raster).
template <class SchedulerArguments, class Problem>
void set_scheduler_arguments(SchedulerArguments &sched, Problem const &p) {
  sched.max_swizzle_size = p.swizzle > 0 ? p.swizzle : 1;
  sched.raster_order = static_cast<std::remove_reference_t<decltype(sched.raster_order)>>(p.raster);
}

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

// The device-level adapter a launcher asks for can_implement, workspace size and grid: the
// Kernel's own `Adapter` if it names one (families not built on GemmUniversal), else CUTLASS's
// GemmUniversalAdapter.
template <class Kernel, class = void>
struct AdapterOf {
  using type = cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>;
};
template <class Kernel>
struct AdapterOf<Kernel, std::void_t<typename Kernel::Adapter>> {
  using type = typename Kernel::Adapter;
};

// Clears a kernel's workspace before a launch; kernels whose workspace is always empty have none.
template <class GemmKernel, class Arguments>
auto initialize_workspace(Arguments const &args, void *workspace, cudaStream_t stream, int)
    -> decltype(GemmKernel::initialize_workspace(args, workspace, stream, nullptr)) {
  return GemmKernel::initialize_workspace(args, workspace, stream, nullptr);
}
template <class GemmKernel, class Arguments>
cutlass::Status initialize_workspace(Arguments const &, void *, cudaStream_t, long) {
  return cutlass::Status::kSuccess;
}

// Kernel (generated) provides: Problem, GemmKernel (the device kernel), optionally Adapter, and
//   static Arguments arguments(Problem const &, cutlass::KernelHardwareInfo const &).
template <class Kernel>
struct Sm90Launcher {
  using Problem = typename Kernel::Problem;
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = typename AdapterOf<Kernel>::type;
  using Arguments = typename GemmKernel::Arguments;

  static Arguments arguments(Problem const &p, int device) {
    cutlass::KernelHardwareInfo hw_info;
    hw_info.device_id = device;
    hw_info.sm_count = sm_count(device);
    return Kernel::arguments(p, hw_info);
  }

  static int check_device(Problem const &p) {
    if (p.device < 0 || p.device >= kMaxDevices) {
      return fail(FG_ERR_INVALID, "device ordinal " + std::to_string(p.device) + " out of range");
    }
    return FG_OK;
  }

  static int can_implement(Problem const &p) {
    if (int rc = check_device(p)) return rc;
    cutlass::Status status = Gemm::can_implement(arguments(p, p.device));
    if (status != cutlass::Status::kSuccess) {
      return fail(FG_ERR_INVALID, std::string("CUTLASS can_implement: ") + cutlassGetStatusString(status) +
                                      " (check M/N/K alignment: rows must be 16-byte aligned)");
    }
    return FG_OK;
  }

  static int workspace_size(Problem const &p, size_t *bytes) {
    if (int rc = check_device(p)) return rc;
    *bytes = Gemm::get_workspace_size(arguments(p, p.device));
    return FG_OK;
  }

  // Once per device, before the first launch (and never inside a CUDA-graph capture): load the
  // kernel's module (lazy loading would do it at the first launch) and raise its dynamic
  // shared-memory limit.  The Python runtime calls this through fg_prepare.
  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) {
      return fail(FG_ERR_INVALID, "device ordinal " + std::to_string(device) + " out of range");
    }
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device) {
      return fail(FG_ERR_INVALID, "prepare: device " + std::to_string(device) + " is not the current device (" +
                                      std::to_string(current) + ")");
    }
    cudaFuncAttributes attributes;
    cudaError_t loaded = cudaFuncGetAttributes(&attributes, cutlass::device_kernel<GemmKernel>);
    if (loaded != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("loading the kernel: ") + cudaGetErrorString(loaded));
    }
    if constexpr (kClusterSize > 1) {  // CUTLASS's launcher would set this on every launch
      cudaError_t err = cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>,
                                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (err != cudaSuccess) {
        cudaGetLastError();
        return fail(FG_ERR_CUDA, std::string("cudaFuncSetAttribute(cluster size): ") + cudaGetErrorString(err));
      }
    }
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

  // Prepared Params per problem, per thread, keyed by every FgGemmProblem byte before `stream`.
  // A decode loop repeats the same pointers and shapes (the caching allocator hands the same
  // buffers back), so a hit skips can_implement and the TMA descriptor encoding.
  struct Prepared {
    typename GemmKernel::Params params;
    size_t workspace_bytes = 0;
    dim3 grid;
  };

  using ClusterShape = typename GemmKernel::ClusterShape;
  static constexpr int kClusterSize = cute::size(ClusterShape{});

  // What Gemm::run does for sm90, minus the per-launch work a cached problem does not need: the
  // grid comes from the cache and the cluster attribute was set once in prepare_device.
  static cudaError_t launch(Prepared &prepared, cudaStream_t stream, bool pdl) {
    cudaLaunchAttribute attributes[2];
    unsigned n = 0;
    if constexpr (kClusterSize > 1) {
      attributes[n].id = cudaLaunchAttributeClusterDimension;
      attributes[n].val.clusterDim.x = cute::size<0>(ClusterShape{});
      attributes[n].val.clusterDim.y = cute::size<1>(ClusterShape{});
      attributes[n].val.clusterDim.z = cute::size<2>(ClusterShape{});
      ++n;
    }
    if (pdl) {
      attributes[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attributes[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = prepared.grid;
    config.blockDim = GemmKernel::get_block_shape();
    config.dynamicSmemBytes = GemmKernel::SharedStorageSize;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = n;
    void *args[] = {&prepared.params};
    return cudaLaunchKernelExC(&config, reinterpret_cast<void const *>(&cutlass::device_kernel<GemmKernel>), args);
  }
  using Cache = ParamsCache<Problem, offsetof(Problem, stream), Prepared>;

  // The launch path: no device query, no allocation, no sync.  A cache miss runs CUTLASS's own
  // checks (host arithmetic) after Python has validated every argument.
  static int run(Problem const &p) {
    if (p.pdl && !(kFeatures & FG_FEATURE_PDL)) {
      return fail(FG_ERR_INVALID, "launch with pdl=True, but this library was built without grid-dependency "
                                  "control (GemmSpec(pdl=False)); launch without PDL or use a pdl=True build");
    }
    auto *entry = Cache::for_this_thread().find(p);
    if (!entry->valid) {
      if (int rc = check_device(p)) return rc;
      if (int rc = prepare_device(p.device)) return rc;
      Arguments args = arguments(p, p.device);
      cutlass::Status status = Gemm::can_implement(args);
      if (status != cutlass::Status::kSuccess) {
        return fail(FG_ERR_INVALID, std::string("CUTLASS can_implement: ") + cutlassGetStatusString(status));
      }
      size_t needed = Gemm::get_workspace_size(args);  // 0 unless stream-K
      if (needed > p.workspace_bytes) {
        return fail(FG_ERR_INVALID, "workspace too small: need " + std::to_string(needed) + " bytes, got " +
                                        std::to_string(p.workspace_bytes));
      }
      entry->value.params = GemmKernel::to_underlying_arguments(args, p.workspace);
      entry->value.workspace_bytes = needed;
      entry->value.grid = Gemm::get_grid_shape(entry->value.params);
      Cache::store_key(entry, p);
      if (needed) {  // stream-K clears its tile barriers before every launch (a memset on the stream)
        status = initialize_workspace<GemmKernel>(args, p.workspace, static_cast<cudaStream_t>(p.stream), 0);
        if (status != cutlass::Status::kSuccess) {
          entry->valid = false;
          return fail(FG_ERR_CUTLASS, std::string("initialize_workspace: ") + cutlassGetStatusString(status));
        }
      }
    } else if (entry->value.workspace_bytes) {
      Arguments args = arguments(p, p.device);
      cutlass::Status status =
          initialize_workspace<GemmKernel>(args, p.workspace, static_cast<cudaStream_t>(p.stream), 0);
      if (status != cutlass::Status::kSuccess) {
        return fail(FG_ERR_CUTLASS, std::string("initialize_workspace: ") + cutlassGetStatusString(status));
      }
    }
    cudaError_t err = launch(entry->value, static_cast<cudaStream_t>(p.stream), p.pdl != 0);
    if (err != cudaSuccess) {
      entry->valid = false;
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("launch: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm
