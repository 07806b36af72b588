// Split-K with a separate reduction (CUTLASS 2.x's "parallel split-K"): K is cut into S equal slices that
// one batched CUTLASS 3.x launch multiplies as S independent GEMMs (batch l reads columns [l K/S, (l+1) K/S)
// of A and B through the batch strides, no copy), each writing its fp32 partial of D to the workspace; a
// second kernel sums the S partials and applies the fused epilogue.
//
// Why not CUTLASS 3.x's own split-K (the stream-K scheduler's split decomposition): it needs the cooperative
// schedule, so 128-row tiles, and its in-kernel fixup makes every split wait for its peers.  Narrow weights
// with a long K at M <= 256 (Llama-3-70B TP8's 1280 x 8192 qkv shard) want cuBLAS's recipe: a small 64x64
// tile, enough splits to fill the GPU, and a short reduction kernel behind it (H200, CUPTI at 64 x 1280 x
// 8192: cuBLAS 6.3 us + 2.2 us; our 128x64 stream-K kernel 12 us; perf/results/h200_split_k.txt).
//
// The partials are [S][M][N] fp32 in the caller's terms, whatever swap-AB does in the GEMM, so the reduction
// reads every slice's row m contiguously.  The reduction is deterministic (a fixed order of S adds).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "fused_gemm/common/grid_dependency.hpp"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/gemm/sm90_arguments.hpp"

namespace fused_gemm::split_k_parallel {

constexpr int kMaxSplits = 64;            // LaunchOptions.splits' range
constexpr int kSliceAlign = 8;            // K/S a multiple of 8 elements: each slice's TMA base 16-byte aligned
constexpr int kMinSliceK = 256;           // automatic splits keep at least this much K a slice
constexpr int kVector = 4;                // outputs a reduction thread owns (one 16-byte load a partial)
constexpr int kReduceThreads = 256;

// Whether S slices of K are each a whole number of 8-element (16-byte) groups.
inline bool slices_fit(int64_t k, int64_t s) { return s >= 1 && k % s == 0 && (k / s) % kSliceAlign == 0; }

// The split count a launch uses: the caller's (LaunchOptions.splits > 1), or, for splits 0 or 1, the most slices
// (at least kMinSliceK of K each) whose CTAs still fit one wave of `sms` next to `tiles` output tiles.
inline int resolve_splits(int64_t k, int64_t tiles, int sms, int requested) {
  if (requested > 1) return requested;
  int best = 1;
  for (int s = 2; s <= kMaxSplits && tiles * s <= sms && k / s >= kMinSliceK; ++s) {
    if (slices_fit(k, s)) best = s;
  }
  return best;
}

inline size_t partial_bytes(int64_t m, int64_t n, int s) { return size_t(s) * size_t(m) * size_t(n) * sizeof(float); }

// Batch l of an operand starts slice * (its K mode's stride) elements further: slice for a K-contiguous operand
// (x, an [N, K] weight), slice rows for a [K, N] weight.
template <class Stride>
void slice_along_k(Stride &stride, int64_t slice) {
  cute::get<2>(stride) = slice * int64_t(cute::get<1>(stride));
}

// The batched GEMM's CUTLASS arguments: the family's whole-K ones (swap-AB applied there), cut into S slices of K,
// D the workspace's fp32 partials and no C (the residual is the reduction's).  Kernel provides what
// gemm_arguments needs; its fusion_arguments(Problem) is alpha * acc.
template <class Kernel>
auto arguments(typename Kernel::Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using GemmKernel = typename Kernel::GemmKernel;
  auto args = gemm_arguments<Kernel>(p, hw_info);
  int64_t const s = p.splits, slice = p.k / s;
  args.mode = cutlass::gemm::GemmUniversalMode::kBatched;
  cute::get<2>(args.problem_shape) = static_cast<int>(slice);
  cute::get<3>(args.problem_shape) = static_cast<int>(s);
  slice_along_k(args.mainloop.dA, slice);
  slice_along_k(args.mainloop.dB, slice);
  args.epilogue.ptr_C = nullptr;
  args.epilogue.ptr_D = static_cast<float *>(p.workspace);
  args.epilogue.dD = leading_dim_stride<typename GemmKernel::StrideD>(p.n);   // [S][M][N] in the caller's terms
  cute::get<2>(args.epilogue.dD) = p.m * p.n;
  return args;
}

// What the reduction reads and writes (the caller's problem, the resolved split count).
struct ReduceParams {
  float const *partials;
  int64_t m, n, splits;
  void *d;
  int64_t ldd;
  void const *c;
  int64_t ldc;
  void const *bias, *row_scale, *col_scale;
  float beta;
};

// The reduction's epilogue: the kernel's types and steps.
template <class ElementD_, class ElementBias_, class ElementC_, class Activation_, bool kBias_, bool kRowScale_,
          bool kColScale_, bool kResidual_>
struct Output {
  using ElementD = ElementD_;
  using ElementBias = ElementBias_;
  using ElementC = ElementC_;
  using Activation = Activation_;
  static constexpr bool kBias = kBias_, kRowScale = kRowScale_, kColScale = kColScale_, kResidual = kResidual_;
};

// D[m, n..n+3] = act(row_scale[m] * col_scale[n] * sum_s P[s][m][n] + bias[n]) + beta * C[m, n]: the GEMM
// family's epilogue order (alpha was applied to each partial).  Output: an Output<...> above.
template <class Output>
__global__ void __launch_bounds__(kReduceThreads) reduce(ReduceParams const p) {
  wait_for_previous_grid();   // the GEMM's partials (and, through it, whatever wrote C, bias and the scales)
  allow_next_grid();
  int64_t const first = (int64_t(blockIdx.x) * kReduceThreads + threadIdx.x) * kVector;
  int64_t const mn = p.m * p.n;
  if (first >= mn) return;
  int64_t const m = first / p.n, n = first % p.n;   // N % 4 == 0: a thread's outputs share a row
  float4 sum = *reinterpret_cast<float4 const *>(p.partials + first);
  for (int64_t s = 1; s < p.splits; ++s) {
    float4 const v = *reinterpret_cast<float4 const *>(p.partials + s * mn + first);
    sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
  }
  float v[kVector] = {sum.x, sum.y, sum.z, sum.w};
  float const row = Output::kRowScale ? static_cast<float const *>(p.row_scale)[m] : 1.f;
  auto *d = static_cast<typename Output::ElementD *>(p.d) + m * p.ldd + n;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kVector; ++i) {
    float x = v[i];
    if constexpr (Output::kRowScale) x *= row;
    if constexpr (Output::kColScale) x *= static_cast<float const *>(p.col_scale)[n + i];
    if constexpr (Output::kBias) x += static_cast<float>(static_cast<typename Output::ElementBias const *>(p.bias)[n + i]);
    x = typename Output::Activation{}(x);
    if constexpr (Output::kResidual) {
      x += p.beta * static_cast<float>(static_cast<typename Output::ElementC const *>(p.c)[m * p.ldc + n + i]);
    }
    d[i] = static_cast<typename Output::ElementD>(x);
  }
}

// The GEMM family's launcher for a split-K-parallel kernel: the batched GEMM through Sm90Launcher (its
// Params cache, prepare and launch), then the reduction, launched with PDL where the library has it (it
// waits for the GEMM before it reads anything).  Kernel (generated) provides what Sm90Launcher needs, with
// arguments() = split_k_parallel::arguments, and Output (the reduction's epilogue).
template <class Kernel>
struct Launcher {
  using Problem = typename Kernel::Problem;
  using Gemm = Sm90Launcher<Kernel>;
  using TileShape = typename Kernel::GemmKernel::TileShape;
  // Named here, not as Kernel::Output at the kernel's use: nvcc's host stub spells the latter through the
  // generated file's anonymous namespace unqualified, which CuTe's own anonymous namespace makes ambiguous.
  using Output = typename Kernel::Output;

  // The caller's problem with its split count resolved (the GEMM's Params cache keys on it).
  static Problem resolved(Problem const &p) {
    Problem q = p;
    int64_t const rows = Kernel::kSwapAB ? p.n : p.m, cols = Kernel::kSwapAB ? p.m : p.n;
    int64_t const tiles = ((rows + cute::size<0>(TileShape{}) - 1) / cute::size<0>(TileShape{})) *
                          ((cols + cute::size<1>(TileShape{}) - 1) / cute::size<1>(TileShape{}));
    q.splits = resolve_splits(p.k, tiles, sm_count(p.device), p.splits);
    return q;
  }

  static int check(Problem const &p) {
    if (int rc = Gemm::check_device(p)) return rc;
    if (p.splits < 0 || p.splits > kMaxSplits) {   // 0 and 1: the kernel's own count (resolve_splits)
      return fail(FG_ERR_INVALID, "splits " + std::to_string(p.splits) + " out of range [0, " +
                                      std::to_string(kMaxSplits) + "]");
    }
    if (p.splits > 1 && !slices_fit(p.k, p.splits)) {
      return fail(FG_ERR_INVALID, "splits " + std::to_string(p.splits) + " must divide K = " + std::to_string(p.k) +
                                      " into slices of a multiple of 8 elements");
    }
    if (p.n % kVector) return fail(FG_ERR_INVALID, "N must be a multiple of 4 (the reduction's vectors)");
    return FG_OK;
  }

  // The GEMM's set-up, and the reduction's module loaded now: never inside a graph capture.
  static int prepare_device(int device) {
    if (int rc = Gemm::prepare_device(device)) return rc;
    cudaFuncAttributes attributes;
    cudaError_t err = cudaFuncGetAttributes(&attributes, reduce<Output>);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("loading the split-K reduction: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }

  static int can_implement(Problem const &p) {
    if (int rc = check(p)) return rc;
    return Gemm::can_implement(resolved(p));
  }

  static int workspace_size(Problem const &p, size_t *bytes) {
    if (int rc = check(p)) return rc;
    Problem const q = resolved(p);
    *bytes = partial_bytes(q.m, q.n, int(q.splits));
    return FG_OK;
  }

  static int run(Problem const &p) {
    if (int rc = check(p)) return rc;
    Problem const q = resolved(p);
    if (p.workspace_bytes < partial_bytes(q.m, q.n, int(q.splits))) {
      return fail(FG_ERR_INVALID, "workspace too small for " + std::to_string(q.splits) + " fp32 partials of " +
                                      std::to_string(q.m) + " x " + std::to_string(q.n));
    }
    if (int rc = Gemm::run(q)) return rc;
    ReduceParams const params{static_cast<float const *>(p.workspace), q.m, q.n, q.splits, p.d, p.ldd, p.c, p.ldc,
                              p.bias, p.row_scale, p.col_scale, p.beta};
    int64_t const threads = (q.m * q.n + kVector - 1) / kVector;
    dim3 const grid(unsigned((threads + kReduceThreads - 1) / kReduceThreads), 1, 1);
    cudaError_t err = launch_kernel(reduce<Output>, grid, dim3(kReduceThreads, 1, 1), 0,
                                    static_cast<cudaStream_t>(p.stream), (kFeatures & FG_FEATURE_PDL) != 0, 1, params);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("split-K reduction launch: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm::split_k_parallel
