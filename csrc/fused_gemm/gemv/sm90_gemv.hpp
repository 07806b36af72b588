// What the weight-streaming decode kernels share (M <= 16 tokens; the int4 family's and the GEMM
// family's dense one): a CTA owns 16 * kBlocks output features (rows of W) and a slice of K, its
// warps split the slice again, and a cluster of `splits` CTAs (grid x) splits K further.  Each warp
// ends with mma.m16n8k16 C fragments, acc[block][token tile][4]; SplitK sums them over the warps
// (shared memory) and over the cluster (distributed shared memory: no workspace, no second kernel,
// nothing to zero), then hands each CTA its share of the outputs to store.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "cutlass/cutlass.h"
#include "fused_gemm/common/grid_dependency.hpp"
#include "fused_gemm/common/status.h"

namespace fused_gemm::gemv {

// PTX.  CUTLASS and CuTe have wrappers for most of these, without "memory" clobbers: the compiler
// may then move plain loads and stores across them (the remote stores of the reduction above the
// cluster wait, the epilogue's reads above griddepcontrol.wait).
CUTLASS_DEVICE void prefetch_to_l2(void const *ptr, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
}

using ::fused_gemm::allow_next_grid;          // common/grid_dependency.hpp
using ::fused_gemm::wait_for_previous_grid;

CUTLASS_DEVICE void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory"); }
CUTLASS_DEVICE void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

constexpr int kMaxRanks = 8;   // the largest portable cluster: K-slices per row group
constexpr int kSplitChoices = 4;   // K splits 1, 2, 4, 8
static_assert(1 << (kSplitChoices - 1) == kMaxRanks, "the split choices end at the largest cluster");

// The sums of a CTA's kTokens x (16 kBlocks) outputs, over its kWarps warps and its cluster.
template <int kTokens, int kBlocks, int kWarps>
struct SplitK {
  static_assert(kTokens == 8 || kTokens == 16, "one or two 8-token MMA tiles");
  static constexpr int kRows = 16 * kBlocks;
  static constexpr int kTiles = kTokens / 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kPitch = kRows + 4;       // floats: a quad's four tokens land in different banks
  static constexpr int kEntries = kTokens * kRows;
  using Acc = float[kBlocks][kTiles][4];

  // The warps' partials: may share memory with the mainloop's buffers (finish() syncs first).
  struct Partials {
    float v[kWarps][kTokens * kPitch];
  };
  // Where the cluster's CTAs put their partial sums of this CTA's share of the outputs: written by
  // other CTAs at any time after the start, so it shares memory with nothing.
  struct Inbox {
    float v[kEntries + kMaxRanks];
  };

  // Where output entry e (token-major: e = token * kRows + row) sits in a partial-sum array.
  CUTLASS_DEVICE static int slot(int e) { return (e / kRows) * kPitch + e % kRows; }

  // Half of a cluster barrier, at the kernel's start: the wait before the first remote store (that
  // every CTA of the cluster has started, so its inbox exists) then costs nothing.
  CUTLASS_DEVICE static void start() {
    if (cooperative_groups::this_cluster().num_blocks() > 1) cluster_arrive_relaxed();
  }

  // Sums every warp's acc into the CTA's, then the cluster's, and calls store(first, last, sum) for
  // this CTA's share [first, last) of the m x kRows entries, sum(e) giving entry e's total.  The
  // shares are whole multiples of 16 rows when kRows * ranks allows it (a gated weight's pairs).
  template <class Store>
  CUTLASS_DEVICE static void finish(Acc const &acc, Partials &partial, Inbox &inbox, int m, Store const &store) {
    namespace cg = cooperative_groups;
    int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();   // the partials may reuse the mainloop's memory
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {   // C fragment: values 0, 1 row n; 2, 3 row n + 8; tokens 2q, 2q + 1
          int const row = 16 * b + lane / 4 + 8 * (i / 2);
          int const token = 8 * t + 2 * (lane % 4) + i % 2;
          partial.v[warp][token * kPitch + row] = acc[b][t][i];
        }
      }
    }
    __syncthreads();
    int const entries = (m < kTokens ? m : kTokens) * kRows;
    // Each thread sums the warps' partials of entries e = threadIdx.x + j * kThreads, and only it
    // reads them again below (a push or a store): no barrier between.
    for (int e = threadIdx.x; e < entries; e += kThreads) {
      int const at = slot(e);
      float sum = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < kWarps; ++v) sum += partial.v[v][at];
      partial.v[0][at] = sum;
    }
    cg::cluster_group cluster = cg::this_cluster();
    int const ranks = int(cluster.num_blocks());
    if (ranks == 1) {
      __syncthreads();   // a store may read an entry another thread summed (a gate's up)
      store(0, entries, [&](int e) { return partial.v[0][slot(e)]; });
      return;
    }
    // Each CTA pushes its partials of every other CTA's share into that CTA's inbox, one barrier,
    // and each sums its own inbox.  (Pulling would need a second barrier, so that no CTA leaves
    // while another still reads its shared memory.)
    int const rank = int(cluster.block_rank());
    int const slice = (entries + ranks - 1) / ranks;
    cluster_wait();
    for (int e = threadIdx.x; e < entries; e += kThreads) {
      int const owner = e / slice;
      float *remote = cluster.map_shared_rank(inbox.v, owner);
      remote[rank * slice + e - owner * slice] = partial.v[0][slot(e)];
    }
    cluster.sync();
    int const first = rank * slice;
    store(first, min(entries, first + slice), [&](int e) {
      float sum = 0.f;
      for (int q = 0; q < ranks; ++q) sum += inbox.v[q * slice + e - first];
      return sum;
    });
  }
};

// One output of a decode kernel's epilogue: D[token, n] = act(v + bias[n]) + beta * C[token, n], v the
// scaled sum.  Kernel (generated) names ElementD, ElementBias, ElementC, Activation, kBias and
// kResidual; Params has d, bias, c, ldd, ldc and beta.
template <class Kernel, class Params>
CUTLASS_DEVICE void store_output(Params const &p, int token, int n, float v) {
  if constexpr (Kernel::kBias) v += static_cast<float>(static_cast<typename Kernel::ElementBias const *>(p.bias)[n]);
  v = typename Kernel::Activation{}(v);
  if constexpr (Kernel::kResidual) {
    v += p.beta * static_cast<float>(static_cast<typename Kernel::ElementC const *>(p.c)[token * p.ldc + n]);
  }
  static_cast<typename Kernel::ElementD *>(p.d)[token * p.ldd + n] = static_cast<typename Kernel::ElementD>(v);
}

// Every decode kernel's entry: Decode::run on its dynamic shared memory.
template <class Decode>
__global__ void __launch_bounds__(Decode::kThreads) kernel(typename Decode::Params const p) {
  extern __shared__ __align__(16) char smem[];
  Decode::run(p, *reinterpret_cast<typename Decode::SharedStorage *>(smem));
}

// What every decode launcher checks first: the device ordinal (its per-device state is indexed by it)
// and M against the kernel's token count (its MMA tiles).  FG_OK, or the refusal.
inline int check_device_and_tokens(int device, int64_t m, int tokens) {
  if (device < 0 || device >= kMaxDevices) return fail(FG_ERR_INVALID, "device ordinal out of range");
  if (m >= 1 && m <= tokens) return FG_OK;
  return fail(FG_ERR_INVALID, "M = " + std::to_string(m) + " tokens: this decode kernel takes 1 to " +
                                  std::to_string(tokens));
}

// Once per device and kernel: the dynamic shared memory attribute (which also loads the module now,
// not inside a graph capture), the SM count, how many CTAs of the kernel an SM holds and how many
// clusters of 2, 4 and 8 of them the GPU holds.
template <class Tag>
struct DeviceSetup {
  template <class KernelFn>
  static int prepare(int device, KernelFn kernel, int threads, int smem_bytes, char const *what) {
    if (device < 0 || device >= kMaxDevices) return fail(FG_ERR_INVALID, "device ordinal out of range");
    if (state()[device].sms.load(std::memory_order_acquire)) return FG_OK;
    // The attribute and the occupancy are the current device's: make it `device` for the while.
    int current = -1;
    cudaError_t err = cudaGetDevice(&current);
    if (err == cudaSuccess && current != device) err = cudaSetDevice(device);
    if (err == cudaSuccess) err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
    int sms = 0, per_sm = 0;
    int clusters[kSplitChoices] = {};
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes);
    // A cluster's CTAs share a GPC: how many clusters of each size the GPU holds at once (a size the
    // query refuses counts as none: choose_splits never picks it, and a launch that asks for it fails there).
    for (int i = 1; i < kSplitChoices && err == cudaSuccess; ++i) {
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = 1u << i, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(1u << i, 1, 1);
      config.blockDim = dim3(threads, 1, 1);
      config.dynamicSmemBytes = size_t(smem_bytes);
      config.attrs = &attr;
      config.numAttrs = 1;
      if (cudaOccupancyMaxActiveClusters(&clusters[i], reinterpret_cast<void const *>(kernel), &config) != cudaSuccess) {
        cudaGetLastError();
        clusters[i] = 0;
      }
    }
    if (current >= 0 && current != device) {
      cudaError_t const restored = cudaSetDevice(current);
      if (err == cudaSuccess) err = restored;
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("preparing the ") + what + ": " + cudaGetErrorString(err));
    }
    state()[device].per_sm.store(per_sm > 0 ? per_sm : 1, std::memory_order_relaxed);
    for (int i = 1; i < kSplitChoices; ++i) state()[device].clusters[i].store(clusters[i], std::memory_order_relaxed);
    state()[device].sms.store(sms, std::memory_order_release);   // last: it marks the device prepared
    return FG_OK;
  }

  static int sms(int device) { return state()[device].sms.load(std::memory_order_relaxed); }
  // CTAs the whole GPU holds at once (without clusters: those of 2+ CTAs must also share a GPC, so a
  // clustered grid of this size may still spill into a second wave; see clusters()).
  static int resident(int device) {
    return sms(device) * state()[device].per_sm.load(std::memory_order_relaxed);
  }
  // Clusters of 2^i CTAs the GPU holds at once (i = 0: single CTAs, resident()).
  static int clusters(int device, int i) {
    return i == 0 ? resident(device) : state()[device].clusters[i].load(std::memory_order_relaxed);
  }

 private:
  struct State {
    std::atomic<int> sms{0};
    std::atomic<int> per_sm{0};
    std::atomic<int> clusters[kSplitChoices]{};
  };
  static State *state() {
    static State states[kMaxDevices];
    return states;
  }
};

// K-slices per row group (a power of two, up to a cluster of kMaxRanks) while every warp keeps at
// least `min_units` of the `k_units` units of K: the most whose grid is one wave (equal CTAs in more
// than one wave leave the last wave's SMs streaming alone), counted in CTAs and in clusters, since a
// cluster's CTAs must share a GPC: 64 clusters of two full-SM CTAs may not fit 132 SMs at once.
// (Counting clusters too took an H100's int4 decode at 4096 x 4096 from 10.6 to 6.3 us with 8-warp
// CTAs and at 2048 x 4096 from 8.1 to 5.1 with 16-warp ones; no shape got slower:
// perf/results/h100_int4_decode_launch.txt, 2026-11-26.)  `requested` > 1 (a launch option) overrides it.
template <class Setup>
inline int choose_splits(int device, int row_groups, int k_units, int warps, int min_units, int requested) {
  if (requested > 1) return requested < kMaxRanks ? requested : kMaxRanks;
  int const max_by_k = k_units / (min_units * warps);
  int s = 1;
  for (int i = 1; i < kSplitChoices && (1 << i) <= max_by_k && row_groups * (1 << i) <= Setup::resident(device) &&
                  row_groups <= Setup::clusters(device, i);
       ++i) {
    s = 1 << i;
  }
  return s;
}

// Grid (splits, row_groups), a cluster along x when splits > 1, PDL when asked.
template <class Params>
int launch(void (*kernel)(Params), Params const &params, int splits, int row_groups, int threads, int smem_bytes,
           void *stream, bool pdl, char const *what) {
  if (pdl && !(kFeatures & FG_FEATURE_PDL)) {   // the kernel would not wait for the previous one
    return fail(FG_ERR_INVALID, std::string(what) + ": launch with pdl=True, but this library was built without "
                                "grid-dependency control (pdl=False); launch without PDL or use a pdl=True build");
  }
  // Without a cluster (splits 1) every CTA is a cluster of its own.
  cudaError_t err = launch_kernel(kernel, dim3(splits, row_groups, 1), dim3(threads, 1, 1), size_t(smem_bytes),
                                  static_cast<cudaStream_t>(stream), pdl, splits, params);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(FG_ERR_CUDA, std::string(what) + " launch: " + cudaGetErrorString(err));
  }
  return FG_OK;
}

}  // namespace fused_gemm::gemv
