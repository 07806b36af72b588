// The int4 family's decode kernel (M <= 16 tokens): D[M, N] = epi(X[M, K] . dequant(W)^T) as a
// weight-streaming GEMV on mma.sync, behind the family's C ABI (FgInt4Problem).
//
// Decode is bound by the weight's bytes: the kernel's job is to stream the codes once at HBM
// bandwidth from every SM, with few instructions per byte.  (The mixed-input wgmma kernels tile for
// reuse that a few tokens cannot give, and read int4 weights at a third of the bandwidth there.)
//   * A CTA owns kRows = 16 * kBlocks output features (rows of W) and a slice of K; its warps split
//     the slice again.  A cluster of `splits` CTAs (grid x) splits K further and sums its partials
//     through distributed shared memory: no workspace, no second kernel, nothing to zero.
//   * quantize_int4's order puts a thread's 8 codes of a 16x16 (N x K) block in one 32-bit word,
//     and they are exactly the A fragment of mma.m16n8k16 (rows n, n + 8; columns 2c, 2c + 1,
//     2c + 8, 2c + 9 in the value order [0, 4, 1, 5, 2, 6, 3, 7]): lane t loads word t of each
//     block (one warp load reads a block's 128 bytes; a CTA's blocks of one k-block are
//     contiguous), turns it into four 16-bit pairs with a mask-or and a subtraction each, and
//     multiplies them with X^T (the tokens are the MMA's 8-wide N side: one or two tiles).
//   * The codes are exact in bf16/fp16; scales (and u4 zero offsets) multiply each group's fp32
//     partial sums, once per group instead of once per code, and without rounding the dequantised
//     weight to 16 bits.  u4's offset needs each group's sum of x, which an MMA with an all-ones
//     A gives in the accumulators' own layout.
//   * One lane per warp keeps the next kAhead k-blocks of its rows in flight to L2 with bulk
//     prefetches, so DRAM stays busy without holding those bytes in registers.
//   * With PDL the weight's first loads go out before the previous kernel has finished; x and the
//     residual are read after griddepcontrol.wait.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "cute/arch/mma_sm80.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/numeric_types.h"
#include "fused_gemm/common/status.h"

namespace fused_gemm {

struct Int4DecodeParams {
  void const *x;            // [M, K] row-major
  uint32_t const *w;        // the codes, as 32-bit words (quantize_int4's order)
  void const *scales;       // [K/group, N]
  void const *zeros;        // [K/group, N] or null
  void const *bias;         // [N] or null
  void const *c;            // residual [M, N] or null
  void *d;                  // [M, N]
  int64_t ldx, ldc, ldd;
  int m, n, k, group;
  int blocks_n;             // N / 16
  float alpha, beta;
};

// The 16-bit type's constants: a code u in the low 4 bits of a half ORed with kBias is kBias + u
// exactly (bf16 128 + u, fp16 1024 + u), so subtracting kBias (u4) or kBias + 8 (s4, whose codes
// were XORed with 8) leaves the code.
template <class Element>
struct Int4DecodeTraits;
template <>
struct Int4DecodeTraits<cutlass::bfloat16_t> {
  static constexpr uint32_t kBias = 0x43004300u;        // 128, 128
  static constexpr uint32_t kBiasSigned = 0x43084308u;  // 136, 136
  static constexpr uint32_t kOnes = 0x3F803F80u;
  using Mma = cute::SM80_16x8x16_F32BF16BF16F32_TN;
  CUTLASS_DEVICE static uint32_t sub(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
template <>
struct Int4DecodeTraits<cutlass::half_t> {
  static constexpr uint32_t kBias = 0x64006400u;        // 1024, 1024
  static constexpr uint32_t kBiasSigned = 0x64086408u;  // 1032, 1032
  static constexpr uint32_t kOnes = 0x3C003C00u;
  using Mma = cute::SM80_16x8x16_F32F16F16F32_TN;
  CUTLASS_DEVICE static uint32_t sub(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};

// Streamed once: not worth a place in L1; L2 fetches whole 256-byte pairs of lines.
CUTLASS_DEVICE uint32_t load_weight_word(uint32_t const *ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.b32 %0, [%1];" : "=r"(v) : "l"(ptr));
  return v;
}

CUTLASS_DEVICE void prefetch_to_l2(void const *ptr, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
}

CUTLASS_DEVICE void wait_for_previous_grid() {
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

CUTLASS_DEVICE void allow_next_grid() {
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Kernel (generated) provides Element, ElementD, ElementBias, ElementC, Activation, kTokens,
// kWarps, kBlocks, kZeros, kBias, kResidual.
template <class Kernel>
struct Int4Decode {
  using Element = typename Kernel::Element;
  using Traits = Int4DecodeTraits<Element>;
  using Mma = typename Traits::Mma;
  static constexpr int kTokens = Kernel::kTokens;
  static constexpr int kWarps = Kernel::kWarps;
  static constexpr int kBlocks = Kernel::kBlocks;
  static constexpr bool kZeros = Kernel::kZeros;
  static_assert(kTokens == 8 || kTokens == 16, "one or two 8-token MMA tiles");
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16 * kBlocks;
  static constexpr int kTiles = kTokens / 8;
  // k-blocks (16 along K) a warp loads at once: K is a multiple of 32 and every group of 32, so a
  // group ends only at the end of a step.
  static constexpr int kStep = 2;
  static constexpr int kAhead = 8;               // k-blocks kept in flight to L2 ahead of the loads
  static constexpr int kPitch = kRows + 4;       // floats: a quad's four tokens land in different banks
  struct SharedStorage {
    float partial[kWarps][kTokens * kPitch];
  };

  using Words = uint32_t[kStep][kBlocks];
  using Acc = float[kBlocks][kTiles][4];

  CUTLASS_DEVICE static void load_words(Words &words, uint32_t const *base, int64_t kblock_words, int blocks) {
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kStep; ++j) {
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < kBlocks; ++b) words[j][b] = b < blocks ? load_weight_word(base + j * kblock_words + 32 * b) : 0u;
    }
  }

  // X^T's B fragments of one k-block: token 8t + lane/4, columns 2(lane%4) + {0, 1} and + 8.
  CUTLASS_DEVICE static void load_x(uint32_t (&frag)[kTiles][2], Int4DecodeParams const &p, int kblock, int lane) {
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) {
      int const token = 8 * t + lane / 4;
      frag[t][0] = frag[t][1] = 0u;
      if (token < p.m) {
        auto const *row = static_cast<Element const *>(p.x) + token * p.ldx + 16 * kblock + 2 * (lane % 4);
        frag[t][0] = __ldg(reinterpret_cast<uint32_t const *>(row));
        frag[t][1] = __ldg(reinterpret_cast<uint32_t const *>(row + 8));
      }
    }
  }

  CUTLASS_DEVICE static void mma_block(Acc &group_acc, int b, uint32_t word, uint32_t const (&x)[kTiles][2]) {
    if constexpr (!kZeros) word ^= 0x88888888u;  // s4: (code + 8) mod 16, so every nibble is unsigned
    uint32_t const bias = kZeros ? Traits::kBias : Traits::kBiasSigned;
    uint32_t a[4];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < 4; ++i) a[i] = Traits::sub(((word >> (4 * i)) & 0x000F000Fu) | Traits::kBias, bias);
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) {
      float *c = group_acc[b][t];
      Mma::fma(c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], x[t][0], x[t][1], c[0], c[1], c[2], c[3]);
    }
  }

  CUTLASS_DEVICE static float to_float(void const *base, int64_t i) {
    return static_cast<float>(static_cast<Element const *>(base)[i]);
  }

  static __device__ void run(Int4DecodeParams const &p, SharedStorage &smem) {
    namespace cg = cooperative_groups;
    int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int const block0 = blockIdx.y * kBlocks;                      // the CTA's first 16-row block of W
    int const blocks = min(kBlocks, p.blocks_n - block0);
    // This warp's k-steps: the CTA's share of K (cluster rank = blockIdx.x), then the warp's.
    int const steps = p.k / (16 * kStep);
    int const cta_begin = int(int64_t(steps) * blockIdx.x / gridDim.x);
    int const cta_steps = int(int64_t(steps) * (blockIdx.x + 1) / gridDim.x) - cta_begin;
    int const kb_begin = kStep * (cta_begin + cta_steps * warp / kWarps);
    int const kb_end = kStep * (cta_begin + cta_steps * (warp + 1) / kWarps);
    int64_t const kblock_words = int64_t(p.blocks_n) * 32;        // one k-block of all of W
    uint32_t const *rows = p.w + int64_t(block0) * 32;           // + kb * kblock_words: the CTA's rows of k-block kb
    uint32_t const *w = rows + lane;                              // this lane's words: + kb * kblock_words + 32 * b
    uint32_t const bytes = uint32_t(blocks) * 128;

    if (lane == 0) {
      for (int kb = kb_begin; kb < kb_begin + kAhead && kb < kb_end; ++kb) prefetch_to_l2(rows + kb * kblock_words, bytes);
    }
    // Only the L2 prefetches run ahead of the previous kernel: L2 is the point of coherence, so they
    // cannot make a load see stale bytes, even of a weight that kernel has just written.
    wait_for_previous_grid();
    Words words, next;
    if (kb_begin < kb_end) load_words(words, w + kb_begin * kblock_words, kblock_words, blocks);

    Acc acc = {}, group_acc = {};
    float x_sum[kTiles][4] = {};
    for (int kb = kb_begin; kb < kb_end; kb += kStep) {
      bool const more = kb + kStep < kb_end;
      if (more) load_words(next, w + (kb + kStep) * kblock_words, kblock_words, blocks);
      if (lane == 0) {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kStep; ++j) {
          if (kb + kAhead + j < kb_end) prefetch_to_l2(rows + (kb + kAhead + j) * kblock_words, bytes);
        }
      }
      // A group ends with this step (or the warp's range does): its scales, read before the MMAs.
      bool const flush = ((kb + kStep) * 16) % p.group == 0 || !more;
      float scale[kBlocks][2], zero[kBlocks][2];
      if (flush) {
        int64_t const row = int64_t(kb * 16 / p.group) * p.n;
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          int const n = (block0 + b) * 16 + lane / 4;
          bool const in = b < blocks;
          scale[b][0] = in ? to_float(p.scales, row + n) : 0.f;
          scale[b][1] = in ? to_float(p.scales, row + n + 8) : 0.f;
          if constexpr (kZeros) {
            zero[b][0] = in ? to_float(p.zeros, row + n) : 0.f;
            zero[b][1] = in ? to_float(p.zeros, row + n + 8) : 0.f;
          }
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kStep; ++j) {
        uint32_t x[kTiles][2];
        load_x(x, p, kb + j, lane);
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) mma_block(group_acc, b, words[j][b], x);
        if constexpr (kZeros) {
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kTiles; ++t) {
            float *s = x_sum[t];
            uint32_t const ones = Traits::kOnes;   // a copy: fma takes references
            Mma::fma(s[0], s[1], s[2], s[3], ones, ones, ones, ones, x[t][0], x[t][1], s[0], s[1], s[2], s[3]);
          }
        }
      }
      if (flush) {
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kTiles; ++t) {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < 4; ++i) {   // values 0, 1: row n; 2, 3: row n + 8
              acc[b][t][i] += scale[b][i / 2] * group_acc[b][t][i];
              if constexpr (kZeros) acc[b][t][i] += zero[b][i / 2] * x_sum[t][i];
              group_acc[b][t][i] = 0.f;
            }
          }
        }
        if constexpr (kZeros) {
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kTiles; ++t) {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < 4; ++i) x_sum[t][i] = 0.f;
          }
        }
      }
      if (more) {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kStep; ++j) {
          CUTLASS_PRAGMA_UNROLL
          for (int b = 0; b < kBlocks; ++b) words[j][b] = next[j][b];
        }
      }
    }
    allow_next_grid();

    // The warps' partials -> the CTA's (in partial[0]) -> the cluster's, each CTA finishing a
    // share of the outputs.
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          int const row = 16 * b + lane / 4 + 8 * (i / 2);
          int const token = 8 * t + 2 * (lane % 4) + i % 2;
          smem.partial[warp][token * kPitch + row] = acc[b][t][i];
        }
      }
    }
    __syncthreads();
    int const tokens = min(p.m, kTokens);
    for (int e = threadIdx.x; e < tokens * kRows; e += kThreads) {
      int const at = (e / kRows) * kPitch + e % kRows;
      float sum = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < kWarps; ++v) sum += smem.partial[v][at];
      smem.partial[0][at] = sum;
    }
    cg::cluster_group cluster = cg::this_cluster();
    int const ranks = int(cluster.num_blocks());
    int const rank = int(cluster.block_rank());
    if (ranks > 1) {
      cluster.sync();
    } else {
      __syncthreads();
    }
    int const entries = tokens * kRows;
    int const first = entries * rank / ranks, last = entries * (rank + 1) / ranks;
    for (int e = first + threadIdx.x; e < last; e += kThreads) {
      int const token = e / kRows, row = e % kRows;
      int const n = block0 * 16 + row;
      int const at = token * kPitch + row;
      float sum = 0.f;
      for (int q = 0; q < ranks; ++q) sum += (ranks > 1 ? cluster.map_shared_rank(&smem.partial[0][0], q) : &smem.partial[0][0])[at];
      if (n >= p.n) continue;
      float v = p.alpha * sum;
      if constexpr (Kernel::kBias) v += static_cast<float>(static_cast<typename Kernel::ElementBias const *>(p.bias)[n]);
      v = typename Kernel::Activation{}(v);
      if constexpr (Kernel::kResidual) {
        v += p.beta * static_cast<float>(static_cast<typename Kernel::ElementC const *>(p.c)[token * p.ldc + n]);
      }
      static_cast<typename Kernel::ElementD *>(p.d)[token * p.ldd + n] = static_cast<typename Kernel::ElementD>(v);
    }
    if (ranks > 1) cluster.sync();  // no CTA leaves while another still reads its shared memory
  }
};

template <class Decode>
__global__ void __launch_bounds__(Decode::kThreads) int4_decode_kernel(Int4DecodeParams const p) {
  __shared__ typename Decode::SharedStorage smem;
  Decode::run(p, smem);
}

// The launcher behind the C exports (the interface of Sm90Launcher).  The cluster size (K-slices
// per group of rows) is picked here from N and the SM count: enough CTAs for two per SM.
template <class Kernel>
struct Int4DecodeLauncher {
  using Problem = typename Kernel::Problem;
  using Decode = Int4Decode<Kernel>;
  static constexpr int kMaxSplits = 8;           // the portable cluster size

  static int can_implement(Problem const &p) {
    if (p.m < 1 || p.m > Decode::kTokens) {
      return fail(FG_ERR_INVALID, "M = " + std::to_string(p.m) + " tokens: this decode kernel takes 1 to " +
                                      std::to_string(Decode::kTokens));
    }
    if (p.n < 16 || p.n % 16 || p.k < 32 || p.k % 32) return fail(FG_ERR_INVALID, "N must be a multiple of 16, K of 32");
    if (p.group_size < 32 || p.group_size % 32 || p.k % p.group_size) {
      return fail(FG_ERR_INVALID, "the group size must be a multiple of 32 dividing K");
    }
    if ((p.scales == nullptr) || (Kernel::kZeros && p.zeros == nullptr)) return fail(FG_ERR_INVALID, "scales (and zeros) are required");
    if (p.lda % 2 || p.ldd < p.n || reinterpret_cast<uintptr_t>(p.a) % 4) {
      return fail(FG_ERR_INVALID, "x must be 4-byte aligned with an even row stride");
    }
    if ((p.n / 16 + Decode::kBlocks - 1) / Decode::kBlocks > 65535) return fail(FG_ERR_INVALID, "N too large for the grid");
    return FG_OK;
  }

  static int workspace_size(Problem const &, size_t *bytes) {
    *bytes = 0;
    return FG_OK;
  }

  static int sm_count(int device) {
    static std::atomic<int> counts[kMaxDevices] = {};
    int count = counts[device].load(std::memory_order_relaxed);
    if (count == 0) {
      if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count < 1) {
        cudaGetLastError();
        count = 132;
      }
      counts[device].store(count, std::memory_order_relaxed);
    }
    return count;
  }

  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) return fail(FG_ERR_INVALID, "device ordinal out of range");
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    cudaFuncAttributes attributes;   // loads the module now, not inside a graph capture
    cudaError_t err = cudaFuncGetAttributes(&attributes, int4_decode_kernel<Decode>);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("preparing the int4 decode kernel: ") + cudaGetErrorString(err));
    }
    sm_count(device);
    prepared[device].store(true, std::memory_order_release);
    return FG_OK;
  }

  // K-slices per row group: the fewest (a power of two) that give two CTAs per SM, while each
  // warp keeps at least two steps of K.
  static int splits(Problem const &p, int row_groups) {
    int const target = 2 * sm_count(p.device);
    int const max_by_k = int(p.k / (16 * Decode::kStep * 2 * Decode::kWarps));
    int s = 1;
    while (s < kMaxSplits && row_groups * s < target && 2 * s <= max_by_k) s *= 2;
    return s;
  }

  static int run(Problem const &p) {
    if (int rc = can_implement(p)) return rc;
    if (int rc = prepare_device(p.device)) return rc;
    Int4DecodeParams d{};
    d.x = p.a, d.w = static_cast<uint32_t const *>(p.w), d.scales = p.scales, d.zeros = p.zeros;
    d.bias = p.bias, d.c = p.c, d.d = p.d;
    d.ldx = p.lda, d.ldc = p.ldc, d.ldd = p.ldd;
    d.m = int(p.m), d.n = int(p.n), d.k = int(p.k), d.group = int(p.group_size);
    d.blocks_n = int(p.n / 16);
    d.alpha = p.alpha, d.beta = p.beta;
    int const row_groups = (d.blocks_n + Decode::kBlocks - 1) / Decode::kBlocks;
    int const s = splits(p, row_groups);

    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(s, row_groups, 1);
    config.blockDim = dim3(Decode::kThreads, 1, 1);
    config.dynamicSmemBytes = 0;
    config.stream = static_cast<cudaStream_t>(p.stream);
    cudaLaunchAttribute attributes[2];
    int count = 0;
    if (s > 1) {   // without one, every CTA is a cluster of its own
      attributes[count].id = cudaLaunchAttributeClusterDimension;
      attributes[count].val.clusterDim.x = s;
      attributes[count].val.clusterDim.y = 1;
      attributes[count].val.clusterDim.z = 1;
      ++count;
    }
    if (p.pdl) {
      attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attributes[count].val.programmaticStreamSerializationAllowed = 1;
      ++count;
    }
    config.attrs = attributes;
    config.numAttrs = count;
    cudaError_t err = cudaLaunchKernelEx(&config, int4_decode_kernel<Decode>, d);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("int4 decode launch: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm
