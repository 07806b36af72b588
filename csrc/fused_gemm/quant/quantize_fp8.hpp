// Dynamic per-token fp8 quantisation, one kernel: for each row m of x [M, K] (bf16/fp16),
//   scale[m] = max_k |x[m, k]| / 448          (448: the largest finite e4m3)
//   q[m, k]  = e4m3(x[m, k] / scale[m])       (round to nearest, saturated to +-448)
// so that x ~= q * scale[m] with e4m3's 3-bit mantissa, and a W8A8 GEMM can take q with per-token
// scales in its epilogue.
//
// Memory-bound: one CTA per row reads it once for the absmax, keeping up to kCached 16-element
// chunks per thread in registers (K <= 16384 at 256 threads: every Llama-sized hidden dim), so the
// cast pass reads global memory again only for longer rows (then from L1/L2).  Loads are 16-byte
// vectors, each chunk stores 16 bytes of e4m3.  A row of zeros gets the smallest normal fp32 as its
// scale (positive, so 1/scale is finite) and quantises to zeros.  No workspace, no host sync: the
// launch is CUDA-graph capturable.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cfloat>
#include <cstdint>
#include <string>

#include "cutlass/array.h"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/numeric_types.h"
#include "fused_gemm/common/status.h"

namespace fused_gemm {

struct QuantParams {
  void const *x;     // [rows, cols], rows ldx elements apart
  void *q;           // [rows, cols] e4m3, rows ldq bytes apart
  float *scale;      // [rows]
  int64_t ldx, ldq;
  int cols;
};

template <class Element, int kCached>
struct QuantizeRows {
  static constexpr int kMaxThreads = 256;
  static constexpr int kChunk = 16;                      // elements: two 16-byte loads in, one 16-byte store out
  static constexpr float kMax = 448.f;                   // largest finite float_e4m3_t
  using In = cutlass::Array<Element, kChunk>;
  using Out = cutlass::Array<cutlass::float_e4m3_t, kChunk>;
  static_assert(sizeof(In) == 32 && sizeof(Out) == 16, "16 elements of a 16-bit input");

  CUTLASS_DEVICE static In load(uint4 const *row, int chunk) {
    In v;
    uint4 *dst = reinterpret_cast<uint4 *>(&v);
    dst[0] = row[2 * chunk];
    dst[1] = row[2 * chunk + 1];
    return v;
  }

  CUTLASS_DEVICE static float absmax(In const &v) {
    auto const f = cutlass::NumericArrayConverter<float, Element, kChunk>{}(v);
    float m = 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kChunk; ++i) {
      m = fmaxf(m, fabsf(f[i]));
    }
    return m;
  }

  CUTLASS_DEVICE static void store(uint4 *row, int chunk, In const &v, float inv_scale) {
    auto f = cutlass::NumericArrayConverter<float, Element, kChunk>{}(v);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kChunk; ++i) {
      f[i] *= inv_scale;
    }
    // cvt.rn.satfinite: |x| * (448 / absmax) may round a hair above 448; it saturates there.
    Out const q = cutlass::NumericArrayConverter<cutlass::float_e4m3_t, float, kChunk,
                                                 cutlass::FloatRoundStyle::round_to_nearest>{}(f);
    row[chunk] = reinterpret_cast<uint4 const &>(q);
  }

  // The block's maximum of `value`, returned to every thread.
  CUTLASS_DEVICE static float block_max(float value) {
    __shared__ float warp_max[kMaxThreads / 32];
    CUTLASS_PRAGMA_UNROLL
    for (int offset = 16; offset > 0; offset /= 2) {
      value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
    }
    int const warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) warp_max[warp] = value;
    __syncthreads();
    value = lane < warps ? warp_max[lane] : 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int offset = 16; offset > 0; offset /= 2) {
      value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
    }
    return value;
  }

  CUTLASS_DEVICE static void run(QuantParams const &p) {
    int64_t const m = blockIdx.x;
    auto const *x = reinterpret_cast<uint4 const *>(static_cast<Element const *>(p.x) + m * p.ldx);
    auto *q = reinterpret_cast<uint4 *>(static_cast<uint8_t *>(p.q) + m * p.ldq);
    int const chunks = p.cols / kChunk;
    int const stride = blockDim.x;

    In cached[kCached];
    float amax = 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kCached; ++j) {
      int const c = threadIdx.x + j * stride;
      if (c < chunks) {
        cached[j] = load(x, c);
        amax = fmaxf(amax, absmax(cached[j]));
      }
    }
    for (int c = threadIdx.x + kCached * stride; c < chunks; c += stride) {
      amax = fmaxf(amax, absmax(load(x, c)));
    }
    amax = block_max(amax);

    float const scale = fmaxf(amax / kMax, FLT_MIN);   // all zeros: FLT_MIN, so 1/scale stays finite
    float const inv_scale = 1.f / scale;
    if (threadIdx.x == 0) p.scale[m] = scale;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kCached; ++j) {
      int const c = threadIdx.x + j * stride;
      if (c < chunks) store(q, c, cached[j], inv_scale);
    }
    for (int c = threadIdx.x + kCached * stride; c < chunks; c += stride) {
      store(q, c, load(x, c), inv_scale);
    }
  }
};

template <class Rows>
__global__ void __launch_bounds__(Rows::kMaxThreads) quantize_rows_kernel(QuantParams const p) {
  Rows::run(p);
}

// The launcher behind the C exports (same interface as Sm90Launcher): Kernel (generated) provides
// Problem, Element and kCached.
template <class Kernel>
struct QuantLauncher {
  using Problem = typename Kernel::Problem;
  using Rows = QuantizeRows<typename Kernel::Element, Kernel::kCached>;

  static int can_implement(Problem const &p) {
    int64_t const in_bytes = sizeof(typename Kernel::Element);
    if (p.rows < 0 || p.rows >= (int64_t(1) << 31) || p.cols < 0 || p.cols >= (int64_t(1) << 31)) {
      return fail(FG_ERR_INVALID, "rows and cols must lie in [0, 2^31)");
    }
    if (p.cols % Rows::kChunk) return fail(FG_ERR_INVALID, "cols must be a multiple of 16");
    if ((p.ldx * in_bytes) % 16 || p.ldq % 16 || reinterpret_cast<uintptr_t>(p.x) % 16 ||
        reinterpret_cast<uintptr_t>(p.q) % 16) {
      return fail(FG_ERR_INVALID, "x and q rows must be 16-byte aligned");
    }
    if (p.rows > 0 && p.scale == nullptr) return fail(FG_ERR_INVALID, "no scale output");
    return FG_OK;
  }

  static int workspace_size(Problem const &, size_t *bytes) {
    *bytes = 0;
    return FG_OK;
  }

  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) return fail(FG_ERR_INVALID, "device ordinal out of range");
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    cudaFuncAttributes attributes;   // loads the kernel's module now, not inside a graph capture
    cudaError_t err = cudaFuncGetAttributes(&attributes, quantize_rows_kernel<Rows>);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("preparing the quantize kernel: ") + cudaGetErrorString(err));
    }
    prepared[device].store(true, std::memory_order_release);
    return FG_OK;
  }

  static int run(Problem const &p) {
    if (int rc = can_implement(p)) return rc;
    if (p.rows == 0) return FG_OK;
    if (int rc = prepare_device(p.device)) return rc;
    QuantParams d{};
    d.x = p.x, d.q = p.q, d.scale = static_cast<float *>(p.scale);
    d.ldx = p.ldx, d.ldq = p.ldq, d.cols = static_cast<int>(p.cols);
    // One chunk per thread where the row is short (a warp at least), up to 256 threads.
    int64_t const chunks = p.cols / Rows::kChunk;
    int const threads = static_cast<int>(chunks >= Rows::kMaxThreads ? Rows::kMaxThreads : ((chunks + 31) / 32) * 32);
    quantize_rows_kernel<Rows><<<static_cast<unsigned>(p.rows), threads < 32 ? 32 : threads, 0,
                                 static_cast<cudaStream_t>(p.stream)>>>(d);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return fail(FG_ERR_CUDA, std::string("launch: ") + cudaGetErrorString(err));
    return FG_OK;
  }
};

}  // namespace fused_gemm
