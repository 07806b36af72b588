// The GEMM family's decode kernel (M <= 16 tokens): D[M, N] = epi(X[M, K] . W^T) for a 16-bit
// nn.Linear weight W [N, K], as a weight-streaming GEMV on mma.sync, behind the family's C ABI
// (FgGemmProblem).  The int4 family runs it for e4m3 weights too (fused_gemm.fp8_weight_linear, behind
// FgInt4Problem): a lane's 16-byte load of a row is then 16 values, each pair converted to x's dtype in
// registers (exact) right before its MMA, and the per-channel scale is the epilogue's col_scale.
//
// Decode is bound by the weight's bytes, and at 4096 x 4096 (32 MB, ~11 us on an H100) by what a
// kernel spends before and after streaming them.  The wgmma kernels tile for reuse a few tokens
// cannot give; this one streams the weight from every SM with loads straight into registers:
//   * Lane (g, q) = (lane / 4, lane % 4) of a warp loads 16 bytes (8 values along K; 16 e4m3) of rows g
//     and g + 8 of each 16-row block: a warp's load covers 64 contiguous bytes of 8 rows, two loads a
//     row's 128-byte line (a chunk: 64 values of K, or 128).  No reorder of W: the MMA's K order is
//     permuted instead.  The m16n8k16 A fragment wants columns {2q, 2q+1, 2q+8, 2q+9} of a 16-wide K
//     step; taking those to be the lane's own 8q .. 8q+3 (and 8q+4 .. 8q+7 for a second MMA; with e4m3,
//     16q + 4j .. 16q + 4j + 3 for four) permutes K alike for all lanes, and X's B fragment (token g, the
//     same columns) is then one 16-byte load of X's row at 8q (two at 16q).  A dot product does not care
//     about the order of K.
//   * Each warp keeps two stages of kUnroll chunks of K in flight (registers, double
//     buffered): with several CTAs per SM that is tens of KB per SM in flight, what HBM's latency
//     times its bandwidth asks for.
//   * With PDL, L2 bulk prefetches of each warp's first chunks go out before the previous kernel
//     has finished: launch gap, ramp and tail overlap the neighbours' streaming.  Every load into
//     registers comes after griddepcontrol.wait (L2 is the point of coherence: a prefetch cannot make
//     a load see stale bytes, even of a weight the previous kernel wrote).  When the next kernel may
//     start, and how far ahead to prefetch, is the launcher's choice per grid (DecodeOverlap).
//   * gemv::SplitK sums the warps' and the cluster's partials; the epilogue is a scalar
//     act(alpha * row_scale[m] * col_scale[n] * sum + bias[n]) + beta * C[m, n] per output.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "cute/arch/mma_sm80.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/float8.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/numeric_types.h"
#include "fused_gemm/common/status.h"
#include "fused_gemm/gemv/sm90_gemv.hpp"

namespace fused_gemm {

// How a launch overlaps its neighbours in a stream (PDL), by how full its grid keeps the GPU.  A grid
// that fills (nearly) every CTA slot, or runs in waves, lets the next kernel launch at its start (in
// waves: once its last wave has started, as PDL launches a dependent only when every CTA has issued
// launch_dependents or exited); the next kernel's CTAs then take the slots as this one's free them,
// with no launch latency between, and a short prefetch leaves L2 to the streaming.  A grid with free
// slots lets it launch only once every load is issued: started at once, the next kernel's CTAs would
// sit in the free slots and prefetch into this one's stream.  bf16 t16 w4 b1 in CUDA graphs
// (perf/decode_overlap.py, perf/results/decode_overlap.txt; H100 / H200, us at M = 1):
//   6144 x 4096, 384 CTAs of 396 slots: 19.6 -> 17.0 / 15.3 -> 13.2 (prefetch 4; 2: 17.6 / 13.6)
//   28672 x 4096, 4.5 waves: 85.0 -> 79.7 / 67.8 -> 61.9 (prefetch 2; 4: 81.6 / 63.5)
//   256 CTAs: launching the next at once cost 0.3 / 0.3 us at 4096 x 4096 and 3 / 5 us at 4096 x 14336
//   (at M = 16 it gained 0.5 / 0.6 us at 4096 x 4096: the unroll=3 config, two CTAs an SM, fills the
//   GPU there and so launches the next at once).
// `resident` counts CTA slots, not clusters: a grid that choose_splits fitted to the clusters the GPU
// holds may leave CTA slots free and still count as under one wave here.
struct DecodeOverlap {
  int ahead = 8;            // chunks per row each warp prefetches to L2 before griddepcontrol.wait
  bool early = false;       // launch_dependents at the start (else once every load is issued)
  static DecodeOverlap for_grid(int ctas, int resident) {
    if (ctas > resident) return {2, true};
    if (int64_t(ctas) * 10 >= int64_t(resident) * 9) return {4, true};
    return {};
  }
};

struct DenseDecodeParams {
  void const *x;            // [M, K] row-major
  void const *w;            // [N, K] row-major
  void const *bias;         // [N] or null
  float const *row_scale;   // [M] or null
  float const *col_scale;   // [N] or null
  void const *c;            // residual [M, N] or null
  void *d;                  // [M, N]
  int64_t ldx, ldw, ldc, ldd;
  int m, n, k;
  float alpha, beta;
  DecodeOverlap overlap;
};

namespace dense_decode {

template <class Element>
struct MmaFor;
template <>
struct MmaFor<cutlass::bfloat16_t> {
  using type = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct MmaFor<cutlass::half_t> {
  using type = cute::SM80_16x8x16_F32F16F16F32_TN;
};

// 16 bytes, or zeros where `valid` is false (predicated: no branch per load).  The weight is read
// once, by one warp: not kept in L1 (kStreaming); X is read by every warp of its K slice: through L1.
#define FG_DENSE_DECODE_LOAD16(cache_op)                                            \
  "{\n"                                                                             \
  "  .reg .pred p;\n"                                                               \
  "  setp.ne.b32 p, %5, 0;\n"                                                       \
  "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"         \
  "  @p ld.global.nc" cache_op ".v4.u32 {%0, %1, %2, %3}, [%4];\n"                   \
  "}\n"

template <bool kStreaming>
CUTLASS_DEVICE uint4 load16(void const *ptr, bool valid) {
  uint4 v;
  if constexpr (kStreaming) {
    asm volatile(FG_DENSE_DECODE_LOAD16(".L1::no_allocate")
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr), "r"(int(valid)));
  } else {
    asm volatile(FG_DENSE_DECODE_LOAD16("")
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(ptr), "r"(int(valid)));
  }
  return v;
}
#undef FG_DENSE_DECODE_LOAD16

// Kernel::kUnroll where the generated kernel names one, else `fallback`.
template <class Kernel, class = void>
struct UnrollOf {
  static constexpr int value = 0;
};
template <class Kernel>
struct UnrollOf<Kernel, std::void_t<decltype(Kernel::kUnroll)>> {
  static constexpr int value = Kernel::kUnroll;
};
template <class Kernel>
constexpr int unroll_of(int fallback) {
  return UnrollOf<Kernel>::value > 0 ? UnrollOf<Kernel>::value : fallback;
}

// The weight's element: Kernel::ElementW where the generated kernel names one (the int4 family's e4m3
// weights, fused_gemm.fp8_weight_linear), else x's.
template <class Kernel, class = void>
struct WeightOf {
  using type = typename Kernel::Element;
};
template <class Kernel>
struct WeightOf<Kernel, std::void_t<typename Kernel::ElementW>> {
  using type = typename Kernel::ElementW;
};

// 32-bit word i (0..3) of a 16-byte load; i is a constant after unrolling.
CUTLASS_DEVICE uint32_t word(uint4 const &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Two e4m3 values (half `upper` of a 32-bit word: bits 0-15 or 16-31, the lower address first) as a pair of
// Element, the lower K in the low half, exactly (every e4m3 value is a normal fp16, and a bf16): one cvt to
// f16x2, and for bf16 two more to fp32 and one back (sm_90 has no e4m3 -> bf16 cvt).
template <class Element>
CUTLASS_DEVICE uint32_t e4m3x2_to(uint32_t w, bool upper) {
  uint32_t h;
  if (upper) {
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(h) : "r"(w));
  } else {
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(h) : "r"(w));
  }
  if constexpr (std::is_same_v<Element, cutlass::half_t>) {
    return h;
  } else {
    uint32_t r;
    asm("{\n.reg .f16 a, b;\n.reg .f32 fa, fb;\nmov.b32 {a, b}, %1;\ncvt.f32.f16 fa, a;\ncvt.f32.f16 fb, b;\n"
        "cvt.rn.bf16x2.f32 %0, fb, fa;\n}"
        : "=r"(r) : "r"(h));
    return r;
  }
}

}  // namespace dense_decode

// Kernel (generated) provides Element, ElementD, ElementBias, ElementC, Activation, kTokens, kWarps,
// kBlocks, kBias, kRowScale, kColScale, kResidual, and may name kUnroll.
template <class Kernel>
struct DenseDecode {
  using Params = DenseDecodeParams;
  using Element = typename Kernel::Element;
  using ElementW = typename dense_decode::WeightOf<Kernel>::type;
  // An e4m3 weight (fused_gemm.fp8_weight_linear) is converted to Element in registers, exactly; its
  // per-channel scale is the epilogue's col_scale.
  static constexpr bool kFp8 = std::is_same_v<ElementW, cutlass::float_e4m3_t>;
  static_assert(kFp8 || std::is_same_v<ElementW, Element>, "a 16-bit weight is x's dtype");
  using Mma = typename dense_decode::MmaFor<Element>::type;
  using Split = gemv::SplitK<Kernel::kTokens, Kernel::kBlocks, Kernel::kWarps>;
  static constexpr int kTokens = Kernel::kTokens;
  static constexpr int kWarps = Kernel::kWarps;
  static constexpr int kBlocks = Kernel::kBlocks;
  static constexpr int kTiles = Split::kTiles;
  static constexpr int kThreads = Split::kThreads;
  static constexpr int kRows = Split::kRows;
  static constexpr int kChunk = 128 / int(sizeof(ElementW));   // K per chunk: a row's 128-byte line
  static constexpr int kLaneK = 16 / int(sizeof(ElementW));    // K of a lane's 16-byte load of a row: 8, or 16 e4m3
  static constexpr int kXLoads = kLaneK / 8;                  // x's 16-byte loads for those K: 1, or 2
  static constexpr int kSteps = kLaneK / 4;                   // MMAs (K 16 each) a lane's load feeds: 2, or 4
  // Chunks per stage: two stages of this many 16-row-block chunks in registers (16 registers each,
  // plus X's 8 per token tile, 16 with e4m3), as many bytes in flight as fit next to three CTAs per SM; or what the
  // config names (Kernel::kUnroll: 3 and 4 fit two 16-token CTAs an SM, with half as much again and
  // twice as much in flight; 5 spills).  A short K slice's time is set by how many round trips to HBM
  // each warp makes, so more bytes in flight a warp win there (H200, 4096 x 4096, M = 1 / 16: unroll 3
  // 9.62 / 11.52 us, 4 9.37 / 11.21; 4096 x 14336 gains nothing; perf/results/h200_decode_schedules.txt).
  static constexpr int kUnroll = dense_decode::unroll_of<Kernel>(kBlocks >= 2 ? 1 : 2);
  static constexpr int kMinChunks = 2;                    // per warp, when choosing the cluster split

  struct SharedStorage {
    typename Split::Partials partial;
    typename Split::Inbox inbox;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  // One chunk of one warp: w[b][h][s] = the kLaneK values of row 16b + g + 8h at K offset (kChunk / 2) s +
  // kLaneK q; x[t][s] those K of token 8t + g (kXLoads loads).
  struct Chunk {
    uint4 w[kBlocks][2][2];
    uint4 x[kTiles][2][kXLoads];
  };
  using Stage = Chunk[kUnroll];

  struct Lane {
    ElementW const *w[kBlocks][2];  // rows 16b + g + 8h (clamped to N - 1), at K offset kLaneK q
    Element const *x[kTiles];       // tokens 8t + g (clamped to M - 1), at K offset kLaneK q
    bool token_valid[kTiles];
  };

  CUTLASS_DEVICE static void load(Chunk &c, Lane const &lane, int chunk, int chunk_end, int k) {
    CUTLASS_PRAGMA_UNROLL
    for (int s = 0; s < 2; ++s) {
      int const kk = chunk * kChunk + kChunk / 2 * s;     // + kLaneK q, in the lane's pointers
      bool const valid = chunk < chunk_end && kk + kLaneK * (threadIdx.x % 4) < k;   // K is a multiple of kLaneK
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < kBlocks; ++b) {
        CUTLASS_PRAGMA_UNROLL
        for (int h = 0; h < 2; ++h) {
          c.w[b][h][s] = dense_decode::load16<true>(lane.w[b][h] + kk, valid);
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kXLoads; ++i) {
          c.x[t][s][i] = dense_decode::load16<false>(lane.x[t] + kk + 8 * i, valid && lane.token_valid[t]);
        }
      }
    }
  }

  // Accumulator slots: slot t holds token tile t's C fragments.  With one live tile (kLive 1: every
  // token is among the first 8) a chunk's MMAs alternate between slots 0 and 1 instead, so that
  // consecutive ones do not wait for each other (an mma.sync chain on one accumulator runs at its
  // latency, not its rate), and the mainloop's end adds slot 1 into slot 0.  Two slots either way: a
  // 16-token kernel's second tile lends its registers to the one-tile path.
  static constexpr int kSlots = 2;
  static_assert(kTiles <= kSlots, "a slot per token tile");
  using Slots = float[kBlocks][kSlots][4];

  // One row's two A-fragment registers for MMA `step`: the lane's values 4 step .. 4 step + 3 of its 16-byte
  // load as the MMA's K (columns 2q, 2q + 1 and 2q + 8, 2q + 9).
  CUTLASS_DEVICE static void row_pair(uint4 const &v, int step, uint32_t &first, uint32_t &second) {
    if constexpr (kFp8) {
      uint32_t const w = dense_decode::word(v, step);   // four e4m3 values
      first = dense_decode::e4m3x2_to<Element>(w, false);
      second = dense_decode::e4m3x2_to<Element>(w, true);
    } else {
      first = dense_decode::word(v, 2 * step);
      second = dense_decode::word(v, 2 * step + 1);
    }
  }

  // The MMAs of one chunk for the first kLive token tiles.
  template <int kLive>
  CUTLASS_DEVICE static void compute(Slots &acc, Chunk const &c) {
    CUTLASS_PRAGMA_UNROLL
    for (int s = 0; s < 2; ++s) {
      CUTLASS_PRAGMA_UNROLL
      for (int step = 0; step < kSteps; ++step) {   // the lane's values 4 step .. 4 step + 3 as one MMA's K
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          uint32_t a0, a1, a2, a3;
          row_pair(c.w[b][0][s], step, a0, a2);   // row g
          row_pair(c.w[b][1][s], step, a1, a3);   // row g + 8
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kLive; ++t) {
            uint4 const &xv = c.x[t][s][step / 2];   // x's values there: pairs 2 (step % 2) and + 1 of a load
            uint32_t const b0 = dense_decode::word(xv, 2 * (step % 2));
            uint32_t const b1 = dense_decode::word(xv, 2 * (step % 2) + 1);
            float *d = acc[b][kLive == 1 ? step % 2 : t];
            Mma::fma(d[0], d[1], d[2], d[3], a0, a1, a2, a3, b0, b1, d[0], d[1], d[2], d[3]);
          }
        }
      }
    }
  }

  // act(alpha * row_scale[token] * col_scale[n] * sum + bias[n]) + beta * C[token, n].
  CUTLASS_DEVICE static void store(DenseDecodeParams const &p, int token, int n, float sum) {
    float v = p.alpha * sum;
    if constexpr (Kernel::kRowScale) v *= p.row_scale[token];
    if constexpr (Kernel::kColScale) v *= p.col_scale[n];
    gemv::store_output<Kernel>(p, token, n, v);
  }

  // The mainloop over the warp's chunks [begin, end): two register stages, one loading while the other
  // feeds the MMAs.
  template <int kLive>
  CUTLASS_DEVICE static void stream(Slots &acc, Lane const &lane, int begin, int end, int k) {
    Stage s0, s1;
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kUnroll; ++u) load(s0[u], lane, begin + u, end, k);
    for (int c = begin; c < end; c += 2 * kUnroll) {
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnroll; ++u) load(s1[u], lane, c + kUnroll + u, end, k);
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnroll; ++u) compute<kLive>(acc, s0[u]);
      if (c + kUnroll >= end) break;
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnroll; ++u) load(s0[u], lane, c + 2 * kUnroll + u, end, k);
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnroll; ++u) compute<kLive>(acc, s1[u]);
    }
  }

  static __device__ void run(DenseDecodeParams const &p, SharedStorage &smem) {
    int const lane_id = threadIdx.x % 32, warp = threadIdx.x / 32;
    int const g = lane_id / 4, q = lane_id % 4;
    Split::start();
    int const row0 = blockIdx.y * kRows;                        // the CTA's first row of W
    // This warp's chunks: the CTA's share of K (cluster rank = blockIdx.x), then the warp's.
    int const chunks = (p.k + kChunk - 1) / kChunk;
    int const cta_begin = int(int64_t(chunks) * blockIdx.x / gridDim.x);
    int const cta_chunks = int(int64_t(chunks) * (blockIdx.x + 1) / gridDim.x) - cta_begin;
    int const begin = cta_begin + cta_chunks * warp / kWarps;
    int const end = cta_begin + cta_chunks * (warp + 1) / kWarps;

    Lane lane;
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        int const row = min(row0 + 16 * b + g + 8 * h, p.n - 1);   // rows past N: loaded, never stored
        lane.w[b][h] = static_cast<ElementW const *>(p.w) + row * p.ldw + kLaneK * q;
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) {
      int const token = 8 * t + g;
      lane.token_valid[t] = token < p.m;
      lane.x[t] = static_cast<Element const *>(p.x) + (token < p.m ? token : 0) * p.ldx + kLaneK * q;
    }

    // Only L2 prefetches run ahead of the previous kernel: each lane takes rows of the CTA, the warp's
    // first chunks of each.
    if (begin < end) {
      int const k0 = begin * kChunk;
      int const k1 = min(min(end, begin + p.overlap.ahead) * kChunk, p.k);
      for (int r = lane_id; r < kRows; r += 32) {
        ElementW const *at = static_cast<ElementW const *>(p.w) + min(row0 + r, p.n - 1) * p.ldw + k0;
        gemv::prefetch_to_l2(at, uint32_t(k1 - k0) * uint32_t(sizeof(ElementW)));
      }
    }
    if (p.overlap.early) gemv::allow_next_grid();
    // X may be the previous kernel's output: every load of it (ld.global.nc, which assumes the data
    // does not change while the kernel runs) stays after this wait.
    gemv::wait_for_previous_grid();

    // Up to 8 tokens fit the first token tile: a 16-token kernel then skips the second's MMAs, and its
    // MMAs alternate between two accumulator slots (M = 1, time / HBM floor, H200 / H100: 4096 x 4096
    // on decode_t16_w4_b1_u3 1.28 -> 1.21x / 1.08 -> 1.04x; 14336 x 4096 on decode_t16_w4_b1 1.23 ->
    // 1.13x / 1.08 -> 1.04x; perf/results/h{200,100}_decode_tile_skip.txt).
    bool const one_tile = kTiles == 1 || p.m <= 8;   // uniform over the grid
    Slots slots = {};
    if (one_tile) {
      stream<1>(slots, lane, begin, end, p.k);
    } else {
      stream<kTiles>(slots, lane, begin, end, p.k);
    }
    typename Split::Acc acc;
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        acc[b][0][i] = one_tile ? slots[b][0][i] + slots[b][1][i] : slots[b][0][i];
        // With one tile, tile 1's entries (tokens 8-15, all past M) hold the second chain's sums: finish()
        // reads only the first M tokens' entries.
        if constexpr (kTiles > 1) acc[b][1][i] = slots[b][1][i];
      }
    }
    // Every load is issued: the next kernel may start (and prefetch) during the reduction.
    if (!p.overlap.early) gemv::allow_next_grid();

    Split::finish(acc, smem.partial, smem.inbox, p.m, [&](int first, int last, auto const &sum) {
      for (int e = first + int(threadIdx.x); e < last; e += kThreads) {
        int const token = e / kRows, n = row0 + e % kRows;
        if (n < p.n) store(p, token, n, sum(e));
      }
    });
  }
};

// Where a family's Problem keeps x, the weight and the scales: the GEMM family's (FgGemmProblem: x = a,
// W = b).  The int4 family's e4m3 weights have their own, Fp8WeightDecodeOperands below.
struct GemmDecodeOperands {
  template <class Problem>
  static int check(Problem const &) {
    return FG_OK;
  }
  template <class Problem>
  static void fill(Problem const &p, DenseDecodeParams &d) {
    d.x = p.a, d.w = p.b, d.ldx = p.lda, d.ldw = p.ldb;
    d.row_scale = static_cast<float const *>(p.row_scale);
    d.col_scale = static_cast<float const *>(p.col_scale);
  }
};

// The int4 family's (FgInt4Problem) for an e4m3 weight (fused_gemm.fp8_weight_linear): W [N, K] contiguous
// (quantize_fp8_weight's) in `w`, its per-channel fp32 scales in `scales` (group_size K), applied as col_scale.
struct Fp8WeightDecodeOperands {
  template <class Problem>
  static int check(Problem const &p) {
    if (p.scales == nullptr) return fail(FG_ERR_INVALID, "an e4m3 weight's scales are required");
    if (p.group_size != p.k || p.zeros != nullptr) {
      return fail(FG_ERR_INVALID, "an e4m3 weight has one scale per output channel (group size K) and no zero points");
    }
    return FG_OK;
  }
  template <class Problem>
  static void fill(Problem const &p, DenseDecodeParams &d) {
    d.x = p.a, d.w = p.w, d.ldx = p.lda, d.ldw = p.k;
    d.row_scale = nullptr;
    d.col_scale = static_cast<float const *>(p.scales);
  }
};

// The launcher behind the C exports (the interface of Sm90Launcher) for a family's Problem: Operands
// reads its operands' fields, the rest (m, n, k, c, d, bias, alpha, beta, splits, pdl, device, stream) go
// by the same names in both families' ABIs.
template <class Kernel, class Operands = GemmDecodeOperands>
struct DenseDecodeLauncher {
  using Problem = typename Kernel::Problem;
  using Decode = DenseDecode<Kernel>;
  using Setup = gemv::DeviceSetup<Decode>;
  static constexpr int kLaneK = Decode::kLaneK;

  static int can_implement(Problem const &p) {
    if (int rc = gemv::check_device_and_tokens(p.device, p.m, Decode::kTokens)) return rc;
    if (p.n < 1) return fail(FG_ERR_INVALID, "N must be positive");
    if (p.k < kLaneK || p.k % kLaneK) {
      return fail(FG_ERR_INVALID, "K must be a positive multiple of " + std::to_string(kLaneK) + " (16-byte loads)");
    }
    if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX) return fail(FG_ERR_INVALID, "M, N, K must fit in int32");
    if (int rc = Operands::check(p)) return rc;
    DenseDecodeParams const d = params(p);
    auto const misaligned = [](void const *ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
    if (d.ldx % 8 || d.ldw % kLaneK || misaligned(d.x) || misaligned(d.w)) {
      return fail(FG_ERR_INVALID, "x and the weight must be 16-byte aligned, their rows 16 bytes apart");
    }
    if (p.ldd < p.n || (Kernel::kResidual && p.ldc < p.n)) return fail(FG_ERR_INVALID, "output/residual rows too short");
    if ((p.n + Decode::kRows - 1) / Decode::kRows > 65535) return fail(FG_ERR_INVALID, "N too large for the grid");
    if (p.splits > gemv::kMaxRanks) {
      return fail(FG_ERR_INVALID, "splits = " + std::to_string(p.splits) + ": a decode kernel splits K over at most " +
                                      std::to_string(gemv::kMaxRanks) + " CTAs (a cluster)");
    }
    return FG_OK;
  }

  static int workspace_size(Problem const &, size_t *bytes) {
    *bytes = 0;
    return FG_OK;
  }

  static int prepare_device(int device) {
    return Setup::prepare(device, gemv::kernel<Decode>, Decode::kThreads, Decode::kSmemBytes,
                          "dense decode kernel");
  }

  // The kernel's parameters but the overlap (run's, per grid); M, N, K are checked to fit in int first.
  static DenseDecodeParams params(Problem const &p) {
    DenseDecodeParams d{};
    Operands::fill(p, d);
    d.bias = p.bias, d.c = p.c, d.d = p.d;
    d.ldc = p.ldc, d.ldd = p.ldd;
    d.m = int(p.m), d.n = int(p.n), d.k = int(p.k);
    d.alpha = p.alpha, d.beta = p.beta;
    return d;
  }

  static int run(Problem const &p) {
    if (int rc = can_implement(p)) return rc;
    if (int rc = prepare_device(p.device)) return rc;
    DenseDecodeParams d = params(p);
    int const row_groups = int((p.n + Decode::kRows - 1) / Decode::kRows);
    int const chunks = int((p.k + Decode::kChunk - 1) / Decode::kChunk);
    // One wave: as many K-slices as keep every CTA (and every cluster) resident at once (gemv::choose_splits).
    // A launch's splits overrides it (the tuner tries some).
    int const resident = Setup::resident(p.device);
    int const splits = gemv::choose_splits<Setup>(p.device, row_groups, chunks, Decode::kWarps, Decode::kMinChunks,
                                                  p.splits);
    d.overlap = DecodeOverlap::for_grid(splits * row_groups, resident);
    return gemv::launch(gemv::kernel<Decode>, d, splits, row_groups, Decode::kThreads, Decode::kSmemBytes,
                        p.stream, p.pdl != 0, "dense decode");
  }
};

}  // namespace fused_gemm
