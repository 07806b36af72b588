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
//     2c + 8, 2c + 9 in the value order [0, 4, 1, 5, 2, 6, 3, 7]): lane t takes word t of each
//     block, turns it into four 16-bit pairs with one LOP3 each, and multiplies them with X^T (the
//     tokens are the MMA's 8-wide N side: one or two tiles).
//   * The codes are exact in bf16/fp16; scales (and u4 zero offsets) multiply each group's fp32
//     partial sums, once per group instead of once per code, and without rounding the dequantised
//     weight to 16 bits.  u4's offset needs each group's sum of x, which an MMA with an all-ones
//     A gives in the accumulators' own layout.
//   * Each warp streams its slice with loads straight into registers, two stages in flight (a
//     stage: 16 words a lane, half that with 16 tokens and fewer than 8 blocks, 8 with one block;
//     the dense decode kernel's scheme).  What sets the time is how many warps stream on every SM: the launcher's table picks
//     CTAs of up to 16 warps by the weight's rows (generator/int4/heuristics.py).  A lane reads word `lane` of each
//     block: a warp's load is one 128-byte line, and the word is the lane's A fragment as it comes.
//     (A cp.async ring through shared memory read back with ldmatrix cost 22 instructions per word
//     of codes and ran at 1.45-2.8x the HBM floor on an H100; a TMA ring was no faster.)
//   * With PDL, L2 bulk prefetches of each warp's first k-blocks go out before the previous kernel
//     has finished; every load into registers comes after griddepcontrol.wait.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cute/arch/mma_sm80.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/numeric_types.h"
#include "fused_gemm/common/status.h"
#include "fused_gemm/gemv/sm90_gemv.hpp"

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

// The 16-bit type's constants.  A code u in the low 4 bits of a half ORed with kMagic is
// kMagic + u exactly (bf16 128 + u, fp16 1024 + u): one LOP3 per pair of codes.  s4 codes are XORed
// with 8 in the same LOP3 ((w & 0xF) ^ (magic | 8) = magic + (u ^ 8) = magic + 8 + code).  The MMA
// then sums x * (magic + offset + code); the magic and offset come off once per group, as
// (magic + offset) * sum(x), with sum(x) from an MMA on all-ones codes in the same layout.
template <class Element>
struct Int4DecodeTraits;
template <>
struct Int4DecodeTraits<cutlass::bfloat16_t> {
  static constexpr uint32_t kMagic = 0x43004300u;       // 128, 128
  static constexpr float kMagicValue = 128.f;
  static constexpr uint32_t kOnes = 0x3F803F80u;
  using Mma = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct Int4DecodeTraits<cutlass::half_t> {
  static constexpr uint32_t kMagic = 0x64006400u;       // 1024, 1024
  static constexpr float kMagicValue = 1024.f;
  static constexpr uint32_t kOnes = 0x3C003C00u;
  using Mma = cute::SM80_16x8x16_F32F16F16F32_TN;
};

// The decode kernel's own PTX (gemv:: has what the decode kernels share); "memory" clobbers as there.
namespace int4_decode {

// (a & b) ^ c in one LOP3 (the compiler splits it in two when b and c are immediates).
CUTLASS_DEVICE uint32_t mask_xor(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// A word of codes: read once, by one lane, so not kept in L1.
CUTLASS_DEVICE uint32_t load_codes(uint32_t const *ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

// Two values of x, read by every warp of the K slice: through L1.
CUTLASS_DEVICE uint32_t load_pair(void const *ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

}  // namespace int4_decode

// Kernel (generated) provides Element, ElementD, ElementBias, ElementC, Activation, kTokens,
// kWarps, kBlocks, kZeros, kBias, kResidual, kGated (the weight is pack_gate_up's: packed row
// 16b + r < 16b + 8 is gate column 8b + r, and row 16b + 8 + r its up; D = act(gate) * up).
template <class Kernel>
struct Int4Decode {
  using Params = Int4DecodeParams;
  using Element = typename Kernel::Element;
  using Traits = Int4DecodeTraits<Element>;
  using Mma = typename Traits::Mma;
  using Split = gemv::SplitK<Kernel::kTokens, Kernel::kBlocks, Kernel::kWarps>;
  static constexpr int kTokens = Kernel::kTokens;
  static constexpr int kWarps = Kernel::kWarps;
  static constexpr int kBlocks = Kernel::kBlocks;
  static constexpr bool kZeros = Kernel::kZeros;
  static constexpr int kThreads = Split::kThreads;
  static constexpr int kRows = Split::kRows;
  static constexpr int kTiles = Split::kTiles;
  // k-blocks (16 along K) per step: groups are multiples of 32 codes (or all of K, a multiple of 32),
  // so a group ends only at the end of a step, and a warp's range of K is whole steps.
  static constexpr int kStep = 2;
  // Steps per register stage, two stages in flight a warp: 16 words of codes a lane a stage (kBlocks
  // a k-block; 8 with one block), at most 4 steps (x's fragments take 2 registers per k-block and
  // token tile).  With 16 tokens and fewer than 8 blocks, x's fragments take at least half as many
  // registers as the codes: half the steps, so that CTAs of 12 warps fit (more warps streaming beat
  // longer stages: perf/results/h100_int4_decode_launch.txt, 2026-11-26).
  static constexpr int kStageSteps = (kBlocks >= 8 ? 1 : (kBlocks == 4 ? 2 : 4)) / (kTiles == 2 && kBlocks < 8 ? 2 : 1);
  static_assert(kStageSteps >= 1, "a register stage holds at least one step");
  static constexpr int kStageKb = kStep * kStageSteps;
  // k-blocks a warp prefetches to L2 before griddepcontrol.wait.  CTAs of 8 or more warps (one or two an SM,
  // each warp a short slice of K) prefetch 4: the prefetches compete with the previous kernel's tail, and with
  // 8 4096 x 4096 ran 5-12% slower at M = 1 and 16 on both GPUs, 4096 x 14336 and 14336 x 4096 from 1% faster
  // to 2.5% slower (perf/results/int4_decode_16_tokens.txt, H).  The 4-warp CTAs of wide weights (several an
  // SM, long slices) keep 8: 28672 x 4096 ran about 1% faster with 8 on an H100, 1% slower on an H200.
  static constexpr int kAhead = kWarps >= 8 ? 4 : 8;
  // fp16's magic is 1024: over a long group the sum of x * (1032 + code) cancels against
  // 1032 * sum(x) with fp32 rounding error near fp16's tolerance, so fp16 takes the offset off
  // every step (bf16's 136 keeps the error ~1e-4 with a correction per group).
  static constexpr bool kCorrectEachStep = std::is_same_v<Element, cutlass::half_t>;
  // Gated: 8 blocks per CTA (the largest cluster's rank count), so that every rank's share of the
  // outputs is whole 16-row blocks, a gate with its up; or the one-block kernel, launched unsplit.
  static_assert(!Kernel::kGated || kBlocks == 8 || kBlocks == 1, "gated decode: kBlocks 8 (or 1, unsplit)");
  // What the MMA sums per code beyond the code itself (see Int4DecodeTraits).
  static constexpr float kOffset = Traits::kMagicValue + (kZeros ? 0.f : 8.f);
  static constexpr uint32_t kXor = Traits::kMagic | (kZeros ? 0u : 0x00080008u);

  struct SharedStorage {
    typename Split::Partials partial;
    typename Split::Inbox inbox;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  using Acc = typename Split::Acc;

  // One stage of one warp, in registers: w[j][b] is the lane's word of 16-row block b in k-block
  // kb + j (its A fragment), x[j][t] X^T's B fragment there (token 8t + lane / 4, columns
  // 2 (lane % 4) + {0, 1} and + 8).
  struct Stage {
    uint32_t w[kStageKb][kBlocks];
    uint32_t x[kStageKb][kTiles][2];
  };

  // A lane's read positions, advanced a stage at a time (load() walks the codes' through the stage a
  // k-block at a time): a k-block's loads add immediates to them (blocks are 128 bytes apart, k-blocks of x 32).
  struct Lane {
    uint32_t const *w;            // word `lane` of the CTA's first block, at the next stage's k-block
    int64_t kblock_words;         // one k-block of all of W
    Element const *x[kTiles];     // token 8t + lane / 4 (clamped to M - 1: its outputs are not stored), column 2 (lane % 4)
  };

  // Where groups end in a warp's range of k-blocks, walked forward without a division per step.
  struct Groups {
    int end, group_kb, kb_end, row;   // the current group's last k-block + 1, k-blocks per group, ...
    CUTLASS_DEVICE Groups(int kb_begin, int kb_end_, int group_kb_) : group_kb(group_kb_), kb_end(kb_end_) {
      row = kb_begin / group_kb;
      end = min(kb_end, (row + 1) * group_kb);
    }
    CUTLASS_DEVICE bool ends_with(int kb) const { return end <= kb + kStep; }   // the step at kb
    CUTLASS_DEVICE void advance() {
      ++row;
      end = min(kb_end, end + group_kb);
    }
  };

  // A group's scales (and u4 zero offsets) of the lane's rows 16b + lane / 4 + 8h, loaded a group
  // ahead of their use: one group's streaming hides their latency.  s4 keeps each 16-bit scale in a
  // register of its own until the group's end: packing a row pair's two into one register made the warp
  // wait for both loads right where they were issued (Nsight Compute, H200, 1 x 28672 x 4096: 18% of the
  // stall samples on that PRMT), so the loads hid nothing; unpacked, the s4 decode kernels ran up to 3%
  // faster on an H200 (perf/results/h200_int4_decode_variants.txt).  That takes as many registers as u4's
  // packed scales and zero offsets; u4 unpacked takes twice as many, and its 16-warp CTAs with an epilogue
  // spill (128 registers a thread), so u4 packs them two a register (row + 8h in half h).
  static constexpr bool kPackScales = kZeros;   // GroupScales::load reads zero offsets exactly when packing
  struct GroupScales {
    static constexpr int kSlots = kPackScales ? 1 : 2;   // registers a row pair's two values take
    uint32_t scale[kBlocks][kSlots], zero[kZeros ? kBlocks : 1][kSlots];
    CUTLASS_DEVICE void load(Int4DecodeParams const &p, int n0, int row) {
      uint16_t const *s = static_cast<uint16_t const *>(p.scales) + int64_t(row) * p.n;
      uint16_t const *z = static_cast<uint16_t const *>(p.zeros) + int64_t(row) * p.n;
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < kBlocks; ++b) {
        int const n = n0 + 16 * b;
        if constexpr (kPackScales) {
          scale[b][0] = uint32_t(s[n]) | (uint32_t(s[n + 8]) << 16);
          zero[b][0] = uint32_t(z[n]) | (uint32_t(z[n + 8]) << 16);
        } else {
          scale[b][0] = s[n];
          scale[b][1] = s[n + 8];
        }
      }
    }
    // Row n + 8h's value.
    CUTLASS_DEVICE static float value(uint32_t const (&v)[kSlots], int h) {
      uint32_t bits;
      if constexpr (kPackScales) {
        bits = v[0] >> (16 * h);
      } else {
        bits = v[h];
      }
      return static_cast<float>(Element::bitcast(uint16_t(bits)));
    }
  };

  // The stage at k-block kb: only its k-blocks before kb_end (uniform across the warp).  The read
  // position walks a k-block at a time, one 64-bit add each, and every load of a k-block is at an
  // immediate offset from it: per-load address arithmetic had cost the kernel nearly as many
  // instructions as its dequantisation (Nsight Compute, H200, 28672 x 4096: 19.4 instructions a word
  // of codes).  (A second, unpredicated copy for whole stages ran the 16-token kernels 3-13% slower.)
  CUTLASS_DEVICE static void load(Stage &st, Lane &lane, int kb, int kb_end) {
    uint32_t const *w = lane.w;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kStageKb; ++j) {
      if (kb + j < kb_end) {
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) st.w[j][b] = int4_decode::load_codes(w + 32 * b);
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < kTiles; ++t) {
          st.x[j][t][0] = int4_decode::load_pair(lane.x[t] + 16 * j);
          st.x[j][t][1] = int4_decode::load_pair(lane.x[t] + 16 * j + 8);
        }
      }
      w += lane.kblock_words;
    }
    lane.w = w;
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) lane.x[t] += 16 * kStageKb;
  }

  // The running sums of a warp: acc (scaled), the current group's raw MMA sums, sum(x) per token.
  struct Sums {
    Acc acc = {}, group = {};
    float x_sum[kTiles][4] = {};
  };

  // Step `step` of a stage into the group's sums and sum(x) (fp16 also takes the offset off here: see
  // kCorrectEachStep; bf16 needs no step_sum).
  CUTLASS_DEVICE static void step_mmas(Sums &s, Stage const &st, int step) {
    uint32_t const mask = 0x000F000Fu, magic = kXor;   // in registers: one LOP3 takes both
    float step_sum[kTiles][4] = {};
    CUTLASS_PRAGMA_UNROLL
    for (int jj = 0; jj < kStep; ++jj) {
      int const j = kStep * step + jj;
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < kBlocks; ++b) {
        uint32_t a[4];   // kMagic + offset + code, in the MMA's A order (nibbles i and i + 4 of the word)
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) a[i] = int4_decode::mask_xor(st.w[j][b] >> (4 * i), mask, magic);
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < kTiles; ++t) {
          float *c = s.group[b][t];
          Mma::fma(c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], st.x[j][t][0], st.x[j][t][1], c[0], c[1], c[2],
                   c[3]);
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {   // sum(x) per token, in the accumulators' layout (bf16: straight into x_sum)
        float *c = kCorrectEachStep ? step_sum[t] : s.x_sum[t];
        uint32_t const ones = Traits::kOnes;   // a copy: fma takes references
        Mma::fma(c[0], c[1], c[2], c[3], ones, ones, ones, ones, st.x[j][t][0], st.x[j][t][1], c[0], c[1], c[2], c[3]);
      }
    }
    if constexpr (kCorrectEachStep) {
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          CUTLASS_PRAGMA_UNROLL
          for (int b = 0; b < kBlocks; ++b) s.group[b][t][i] -= kOffset * step_sum[t][i];
          s.x_sum[t][i] += step_sum[t][i];
        }
      }
    }
  }

  // A group (or the warp's range) ends with the step at kb_step: its sums, scaled, go into acc, and the
  // next group's scales are loaded.
  CUTLASS_DEVICE static void end_group(Sums &s, GroupScales &scales, Groups &groups, int kb_step,
                                       Int4DecodeParams const &p, int n0) {
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      float scale[2], shift[2];   // acc += scale * group + shift * sum(x)
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        scale[h] = GroupScales::value(scales.scale[b], h);
        shift[h] = kCorrectEachStep ? 0.f : -kOffset * scale[h];
        if constexpr (kZeros) shift[h] += GroupScales::value(scales.zero[b], h);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {   // values 0, 1: row n; 2, 3: row n + 8; fmaf: 2 FFMAs, not FMUL+FFMA+FADD
          s.acc[b][t][i] = fmaf(shift[i / 2], s.x_sum[t][i], fmaf(scale[i / 2], s.group[b][t][i], s.acc[b][t][i]));
          s.group[b][t][i] = 0.f;
        }
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < 4; ++i) s.x_sum[t][i] = 0.f;
    }
    groups.advance();
    if (groups.end > kb_step + kStep) scales.load(p, n0, groups.row);   // another group follows
  }

  // The stage at k-block kb into the sums.  A stage of several steps that no group (nor the warp's
  // range) ends inside is straight-line code, with at most one group end after it; others go step by
  // step.  (A one-step stage's step-by-step path is already that: no second copy of it.  groups.end
  // never passes kb_end, so stage_end <= kb_end is implied; it is spelled out for the reader.)
  CUTLASS_DEVICE static void compute(Sums &s, GroupScales &scales, Groups &groups, Stage const &st, int kb,
                                     int kb_end, Int4DecodeParams const &p, int n0) {
    int const stage_end = kb + kStageKb;
    if (kStageSteps > 1 && stage_end <= kb_end && groups.end >= stage_end) {
      CUTLASS_PRAGMA_UNROLL
      for (int step = 0; step < kStageSteps; ++step) step_mmas(s, st, step);
      if (groups.end == stage_end) end_group(s, scales, groups, stage_end - kStep, p, n0);
      return;
    }
    CUTLASS_PRAGMA_UNROLL
    for (int step = 0; step < kStageSteps; ++step) {
      int const kb_step = kb + kStep * step;
      if (kb_step >= kb_end) break;
      step_mmas(s, st, step);
      if (groups.ends_with(kb_step)) end_group(s, scales, groups, kb_step, p, n0);
    }
  }

  // Streams k-blocks [kb_begin, kb_end) of the CTA's rows (16-row blocks block0 .. block0 + kBlocks - 1)
  // in two register stages a warp (loads of one in flight while the other is computed) into acc.
  CUTLASS_DEVICE static void stream(Int4DecodeParams const &p, int block0, int kb_begin, int kb_end, Acc &acc) {
    int const lane_id = threadIdx.x % 32;
    int const n0 = block0 * 16 + lane_id / 4;   // the lane's first row
    Lane lane;
    lane.kblock_words = int64_t(p.blocks_n) * 32;
    lane.w = p.w + int64_t(block0) * 32 + kb_begin * lane.kblock_words + lane_id;
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < kTiles; ++t) {
      int const token = min(8 * t + lane_id / 4, p.m - 1);
      lane.x[t] = static_cast<Element const *>(p.x) + token * p.ldx + 16 * kb_begin + 2 * (lane_id % 4);
    }
    Groups groups(kb_begin, kb_end, p.group / 16);
    GroupScales scales;
    if (kb_begin < kb_end) scales.load(p, n0, groups.row);   // (an empty range has no group)
    Sums s;
    Stage s0, s1;
    load(s0, lane, kb_begin, kb_end);
#pragma unroll 1
    for (int kb = kb_begin; kb < kb_end; kb += 2 * kStageKb) {
      load(s1, lane, kb + kStageKb, kb_end);
      compute(s, scales, groups, s0, kb, kb_end, p, n0);
      if (kb + kStageKb >= kb_end) break;
      load(s0, lane, kb + 2 * kStageKb, kb_end);
      compute(s, scales, groups, s1, kb + kStageKb, kb_end, p, n0);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int b = 0; b < kBlocks; ++b) {
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) acc[b][t][i] = s.acc[b][t][i];
      }
    }
  }

  // The epilogue of the output at packed row `row` of token `token` (a gate row for a gated weight,
  // whose up is `partner`): act(alpha * sum + bias) + beta * residual, or act(alpha * gate + bias[col])
  // * (alpha * up + bias[I + col]) + beta * residual (a gated bias is [2I], the gate's then the up's).
  CUTLASS_DEVICE static void store(Int4DecodeParams const &p, int block0, int token, int row, float sum,
                                   float partner = 0.f) {
    int const n = block0 * 16 + row;
    if (n >= p.n) return;
    if constexpr (Kernel::kGated) {
      int const col = (n / 16) * 8 + n % 8;
      float gate = p.alpha * sum, up = p.alpha * partner;
      if constexpr (Kernel::kBias) {
        auto const *bias = static_cast<typename Kernel::ElementBias const *>(p.bias);
        gate += static_cast<float>(bias[col]);
        up += static_cast<float>(bias[p.n / 2 + col]);
      }
      float v = typename Kernel::Activation{}(gate) * up;
      if constexpr (Kernel::kResidual) {
        v += p.beta * static_cast<float>(static_cast<typename Kernel::ElementC const *>(p.c)[token * p.ldc + col]);
      }
      static_cast<typename Kernel::ElementD *>(p.d)[token * p.ldd + col] = static_cast<typename Kernel::ElementD>(v);
      return;
    }
    gemv::store_output<Kernel>(p, token, n, p.alpha * sum);
  }

  static __device__ void run(Int4DecodeParams const &p, SharedStorage &smem) {
    int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    Split::start();
    // The CTA's first 16-row block of W.  The last row group, when N is not a multiple of kRows,
    // takes the last kBlocks blocks: its first ones are the previous group's too (summed twice,
    // stored once), and every load is then of a whole block at an immediate offset, unpredicated.
    // (A weight narrower than kRows runs the one-block kernel: the launcher's choice.)
    int const block0 = min(int(blockIdx.y) * kBlocks, p.blocks_n - kBlocks);
    int const skip_rows = 16 * (int(blockIdx.y) * kBlocks - block0);   // the previous group's rows
    // This warp's k-steps: the CTA's share of K (cluster rank = blockIdx.x), then the warp's.
    int const kblocks = p.k / 16;
    int const steps = (kblocks + kStep - 1) / kStep;
    int const cta_begin = int(int64_t(steps) * blockIdx.x / gridDim.x);
    int const cta_steps = int(int64_t(steps) * (blockIdx.x + 1) / gridDim.x) - cta_begin;
    int const kb_begin = kStep * (cta_begin + cta_steps * warp / kWarps);
    int const kb_end = min(kblocks, kStep * (cta_begin + cta_steps * (warp + 1) / kWarps));
    int64_t const kblock_words = int64_t(p.blocks_n) * 32;        // one k-block of all of W
    uint32_t const *rows = p.w + int64_t(block0) * 32;            // + kb * kblock_words: the CTA's rows of k-block kb

    // Only L2 prefetches run ahead of the previous kernel: L2 is the point of coherence, so they
    // cannot make a load see stale bytes, even of a weight that kernel has just written.
    if (lane == 0) {
      for (int kb = kb_begin; kb < kb_begin + kAhead && kb < kb_end; ++kb) {
        gemv::prefetch_to_l2(rows + kb * kblock_words, uint32_t(kBlocks) * 128);
      }
    }
    gemv::wait_for_previous_grid();

    Acc acc = {};
    stream(p, block0, kb_begin, kb_end, acc);
    // The next kernel may start (and prefetch) during the reduction.  Letting it start right after
    // griddepcontrol.wait ran 4096 x 14336 1.3x slower on an H100: its CTAs' prefetches and slots
    // compete with this kernel's streaming.
    gemv::allow_next_grid();
    Split::finish(acc, smem.partial, smem.inbox, p.m, [&](int first, int last, auto const &sum) {
      store_all(p, block0, skip_rows, first, last, sum);
    });
  }

  // The outputs of entries [first, last) but the CTA's first skip_rows rows, from their sums: one per
  // entry, or with a gated weight one per gate (its up, 8 entries on, is in the same range: ranges
  // are whole 16-row blocks).
  template <class Sum>
  CUTLASS_DEVICE static void store_all(Int4DecodeParams const &p, int block0, int skip_rows, int first, int last,
                                       Sum const &sum) {
    constexpr int kStride = Kernel::kGated ? 2 : 1;   // entries per output
    for (int i = first / kStride + threadIdx.x; i < last / kStride; i += kThreads) {
      int const e = Kernel::kGated ? (i / 8) * 16 + i % 8 : i;
      if (e % kRows >= skip_rows) store(p, block0, e / kRows, e % kRows, sum(e), Kernel::kGated ? sum(e + 8) : 0.f);
    }
  }
};

// A kernel's config with one 16-row block per CTA, for weights narrower than its CTAs' kRows (N is a
// multiple of 16, so every such CTA has all its rows).
template <class Kernel>
struct OneBlock : Kernel {
  static constexpr int kBlocks = 1;
};

// The launcher behind the C exports (the interface of Sm90Launcher).  The cluster size (K-slices
// per group of rows) is picked here from N and how many CTAs the GPU holds at once.
template <class Kernel>
struct Int4DecodeLauncher {
  using Problem = typename Kernel::Problem;
  using Decode = Int4Decode<Kernel>;
  using Narrow = std::conditional_t<Kernel::kBlocks == 1, Decode, Int4Decode<OneBlock<Kernel>>>;

  static int can_implement(Problem const &p) {
    if (int rc = gemv::check_device_and_tokens(p.device, p.m, Decode::kTokens)) return rc;
    if (p.n < 16 || p.n % 16 || p.k < 32 || p.k % 32) return fail(FG_ERR_INVALID, "N must be a multiple of 16, K of 32");
    constexpr int kStepCodes = 16 * Decode::kStep;   // a group must end with a step
    if (p.group_size != p.k && (p.group_size < kStepCodes || p.group_size % kStepCodes || p.k % p.group_size)) {
      return fail(FG_ERR_INVALID, "the group size must be K or a multiple of " + std::to_string(kStepCodes) +
                                      " dividing K");
    }
    if ((p.scales == nullptr) || (Kernel::kZeros && p.zeros == nullptr)) return fail(FG_ERR_INVALID, "scales (and zeros) are required");
    if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX) return fail(FG_ERR_INVALID, "M, N, K must fit in int32");
    auto const misaligned = [](void const *ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
    if (p.lda % 8 || misaligned(p.a) || misaligned(p.w) || misaligned(p.scales) || (Kernel::kZeros && misaligned(p.zeros))) {
      return fail(FG_ERR_INVALID, "x, the codes, scales and zeros must be 16-byte aligned, x's rows 16 bytes apart");
    }
    int64_t const out_n = Kernel::kGated ? p.n / 2 : p.n;
    if (p.ldd < out_n || (Kernel::kResidual && p.ldc < out_n)) return fail(FG_ERR_INVALID, "output/residual rows too short");
    if ((p.n / 16 + Decode::kBlocks - 1) / Decode::kBlocks > 65535) {   // (the one-block kernel: < kBlocks)
      return fail(FG_ERR_INVALID, "N too large for the grid");
    }
    if (p.splits > gemv::kMaxRanks || (Kernel::kGated && p.splits > 1 && (p.splits & (p.splits - 1)))) {
      return fail(FG_ERR_INVALID, "splits = " + std::to_string(p.splits) + ": a decode kernel splits K over at most " +
                                      std::to_string(gemv::kMaxRanks) + " CTAs (a cluster; a power of two when gated)");
    }
    return FG_OK;
  }

  static int workspace_size(Problem const &, size_t *bytes) {
    *bytes = 0;
    return FG_OK;
  }

  static int prepare_device(int device) {
    if (int rc = gemv::DeviceSetup<Decode>::prepare(device, gemv::kernel<Decode>, Decode::kThreads, Decode::kSmemBytes,
                                                    "int4 decode kernel")) {
      return rc;
    }
    return gemv::DeviceSetup<Narrow>::prepare(device, gemv::kernel<Narrow>, Narrow::kThreads, Narrow::kSmemBytes,
                                              "int4 decode kernel (one block)");
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
    if (d.blocks_n < Decode::kBlocks) return launch<Narrow>(d, p, Kernel::kGated ? 1 : int(p.splits));
    return launch<Decode>(d, p, int(p.splits));
  }

 private:
  template <class D>
  static int launch(Int4DecodeParams const &d, Problem const &p, int requested_splits) {
    int const row_groups = (d.blocks_n + D::kBlocks - 1) / D::kBlocks;
    // One wave: as many K-slices as keep every CTA and cluster resident at once, each warp with at
    // least two steps of K (gemv::choose_splits, the dense decode kernel's rule).  A streaming warp hides little latency itself, so
    // what counts is warps resident on every SM: a second, partial wave left 28672 x 4096 at 1.5x the
    // floor on an H100 where one wave of as many warps ran 1.15-1.25x.  A launch's splits overrides
    // it (perf/int4_decode_launch.py).
    int const steps = (d.k / 16 + D::kStep - 1) / D::kStep;   // as the kernel counts them
    int const splits = Kernel::kGated && D::kBlocks == 1
                           ? 1
                           : gemv::choose_splits<gemv::DeviceSetup<D>>(p.device, row_groups, steps, D::kWarps, 2,
                                                                      requested_splits);
    return gemv::launch(gemv::kernel<D>, d, splits, row_groups, D::kThreads, D::kSmemBytes, p.stream, p.pdl != 0,
                        "int4 decode");
  }
};

}  // namespace fused_gemm
