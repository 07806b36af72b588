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
//     block (a CTA's blocks of one k-block are contiguous: one copy), turns it into four 16-bit
//     pairs with one LOP3 each, and multiplies them with X^T (the tokens are the MMA's 8-wide N
//     side: one or two tiles).
//   * The codes are exact in bf16/fp16; scales (and u4 zero offsets) multiply each group's fp32
//     partial sums, once per group instead of once per code, and without rounding the dequantised
//     weight to 16 bits.  u4's offset needs each group's sum of x, which an MMA with an all-ones
//     A gives in the accumulators' own layout.
//   * Each warp streams its slice through shared memory with cp.async, kStages steps in flight (the
//     codes, x's rows and, at a group's end, the group's scales), so the bytes in flight do not
//     cost registers; it reads a k-block's codes back with ldmatrix (a word of up to 4 blocks per
//     instruction: a 16-row block is one contiguous 8x8 matrix of 16-bit pairs).
//   * With PDL, L2 bulk prefetches of each warp's first k-blocks go out before the previous kernel
//     has finished; every copy into shared memory comes after griddepcontrol.wait.
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
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// cp.async of 16 bytes (zero-filled when !valid) to a shared-window address.
CUTLASS_DEVICE void copy16(uint32_t to, void const *src, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// ldmatrix of kCount 8x8 16-bit matrices, non-transposed: r[i] of lane t is word t % 4 of the row
// lane 8 i + t / 4 addresses, i.e. word t of matrix i when its rows are contiguous 16-byte pieces.
template <int kCount>
CUTLASS_DEVICE void ldmatrix(uint32_t (&r)[kCount], uint32_t addr) {
  static_assert(kCount == 1 || kCount == 2 || kCount == 4);
  if constexpr (kCount == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  } else if constexpr (kCount == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(addr));
  }
}

CUTLASS_DEVICE uint32_t shared_address(void const *ptr) { return static_cast<uint32_t>(__cvta_generic_to_shared(ptr)); }

// Makes v opaque to the compiler, so that it keeps a per-lane address in a register instead of
// working it out again from threadIdx in every step of the mainloop (which it otherwise does).
CUTLASS_DEVICE void keep_in_register(uint32_t &v) { asm("" : "+r"(v)); }

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
  static_assert(kBlocks == 1 || kBlocks == 2 || kBlocks == 4 || kBlocks == 8, "whole 16-byte pieces per lane");
  static constexpr int kThreads = Split::kThreads;
  static constexpr int kRows = Split::kRows;
  static constexpr int kTiles = Split::kTiles;
  // k-blocks (16 along K) per pipeline step.  Groups are multiples of 16 kStep (or all of K), so a
  // group ends only at the end of a step; K is a multiple of 32, so with kStep 4 the last step of K
  // may be half a step.  kStep 4 (64 along K a step) with 3 stages (fewer instructions per code:
  // the copies and the loop over twice the codes) ran 28672 x 4096 8% slower on an H100 than 2 with
  // 4: 69 KB of shared memory a CTA leaves room for 3 CTAs an SM, and 448 CTAs then take 1.13 waves.
  static constexpr int kStep = 2;
  static constexpr int kHalfPieces = kStep / 2 * kTokens * 2;   // x's 16-byte pieces of half a step
  static constexpr bool kFullSteps = kStep == 2;                 // K is a multiple of 32: never a half step
  // Steps in flight per warp (cp.async groups).  Six ran 10% slower than four on an H100 at 28672 x
  // 4096: the shared memory they take halves the CTAs resident per SM.
  static constexpr int kStages = 4;
  static constexpr int kBlockBytes = 128;       // a 16 x 16 block of codes: 32 words, a word per lane
  static constexpr int kAhead = 8;               // k-blocks prefetched to L2 before griddepcontrol.wait
  static constexpr int kScalePieces = kRows * int(sizeof(Element)) / 16;   // 16-byte pieces of a group's scales
  // fp16's magic is 1024: over a long group the sum of x * (1032 + code) cancels against
  // 1032 * sum(x) with fp32 rounding error near fp16's tolerance, so fp16 takes the offset off
  // every step (bf16's 136 keeps the error ~1e-4 with a correction per group).
  static constexpr bool kCorrectEachStep = std::is_same_v<Element, cutlass::half_t>;
  // Gated: 8 blocks per CTA (the largest cluster's rank count), so that every rank's share of the
  // outputs is whole 16-row blocks, a gate with its up.
  static_assert(!Kernel::kGated || kBlocks == 8, "gated decode: kBlocks 8");
  // What the MMA sums per code beyond the code itself (see Int4DecodeTraits).
  static constexpr float kOffset = Traits::kMagicValue + (kZeros ? 0.f : 8.f);
  static constexpr uint32_t kXor = Traits::kMagic | (kZeros ? 0u : 0x00080008u);

  // One step of one warp, filled by cp.async: the codes of its kStep k-blocks (word t of block b at
  // w[j][32 b + t]), x's kTokens rows of them (zeros past M), and, when a group ends with the step,
  // the group's scales (and zero offsets) of the CTA's rows.
  struct alignas(16) Stage {   // every member (and every stage) at a multiple of cp.async's 16 bytes
    uint32_t w[kStep][32 * kBlocks];
    Element x[kStep][kTokens][16];
    Element scale[kRows];
    Element zero[kZeros ? kRows : 8];
  };
  static_assert(sizeof(Stage) % 16 == 0 && (kRows * sizeof(Element)) % 16 == 0);
  struct SharedStorage {
    union {
      Stage stages[kWarps][kStages];
      typename Split::Partials partial;
    };
    typename Split::Inbox inbox;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  using Acc = typename Split::Acc;

  // Where groups end in a warp's range of k-blocks, walked forward without a division per step.
  struct Groups {
    int end, group_kb, kb_end, row;   // the current group's last k-block + 1, k-blocks per group, ...
    CUTLASS_DEVICE Groups(int kb_begin, int kb_end_, int group_kb_) : group_kb(group_kb_), kb_end(kb_end_) {
      row = kb_begin / group_kb;
      end = min(kb_end, (row + 1) * group_kb);
    }
    CUTLASS_DEVICE bool ends_with(int kb) const { return end <= kb + kStep; }   // the step at kb (maybe a half)
    CUTLASS_DEVICE void advance() {
      ++row;
      end = min(kb_end, end + group_kb);
    }
  };

  // A warp's copies for one step: 16-byte pieces spread over its lanes.  A lane's destinations are
  // fixed offsets from the stage's shared-window address, worked out once: a step's copies cost
  // their cp.async instructions, predicates and pointer increments, not the shared addresses (about
  // 55 instructions a step for t8_w4_b8, from 101).
  struct Copier {
    uint32_t const *w;           // this lane's first piece of the CTA's rows, at the next k-block to copy
    int64_t kblock_words;
    Element const *x;            // this lane's x piece (its token, half and first k-block), at the next step
    bool x_valid;                // its token < M (else the piece is zero-filled)
    Element const *scales;           // this lane's piece of the scales (or zeros) of the CTA's rows, group row 0
    int64_t group_stride;            // N
    bool w_valid[(8 * kBlocks + 31) / 32];
    bool copies_scales;              // this lane copies a piece of a group's scales (or zero offsets)
    uint32_t w_to, scale_to;         // this lane's first destinations, in stage 0 (its x's: kXTo on)
    static constexpr uint32_t kXTo = offsetof(Stage, x) - offsetof(Stage, w);

    CUTLASS_DEVICE void init(Int4DecodeParams const &p, uint32_t stage0, int lane, int block0, int blocks) {
      static_assert(kScalePieces * (kZeros ? 2 : 1) <= 32, "one piece per lane");
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r * 32 < 8 * kBlocks; ++r) w_valid[r] = lane + 32 * r < 8 * blocks;
      // Piece i of a stage's codes or x is st.w[j] or st.x[j] at 16 i bytes (i = lane + 32 r).
      w_to = stage0 + uint32_t(offsetof(Stage, w)) + 16 * lane;
      int4_decode::keep_in_register(w_to);
      bool const is_zero = kZeros && lane >= 32 - kScalePieces;
      int const piece = is_zero ? lane - (32 - kScalePieces) : lane;
      copies_scales = piece < kScalePieces && piece < 2 * blocks;   // 2 pieces per 16-row block
      scales = static_cast<Element const *>(is_zero ? p.zeros : p.scales) + block0 * 16 + 8 * (copies_scales ? piece : 0);
      scale_to = stage0 + uint32_t(is_zero ? offsetof(Stage, zero) : offsetof(Stage, scale)) + 16 * piece;
      int4_decode::keep_in_register(scale_to);
      group_stride = p.n;
    }

    // A half step (`full` false: the last 32 codes of K) zero-fills its second half, which then adds
    // nothing: zero x times any code.
    CUTLASS_DEVICE void issue(uint32_t stage_offset, bool group_ends, int group_row, bool full) {
      int const lane = threadIdx.x % 32;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kStep; ++j) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r * 32 < 8 * kBlocks; ++r) {   // 8 pieces per 128-byte block
          if (lane + 32 * r < 8 * kBlocks && w_valid[r]) {
            bool const valid = j < kStep / 2 || full;
            int4_decode::copy16(w_to + stage_offset + j * kBlockBytes * kBlocks + 512 * r,
                                w + (valid ? j : 0) * kblock_words + 128 * r, valid);
          }
        }
      }
      w += kStep * kblock_words;
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r * 32 < kStep * kTokens * 2; ++r) {   // 2 pieces per token and k-block
        if (lane + 32 * r < kStep * kTokens * 2) {
          bool const valid = lane + 32 * r < kHalfPieces || full;   // piece lane + 32 r of the second half?
          int4_decode::copy16(w_to + kXTo + stage_offset + 512 * r, x + (valid ? 16 * r * (32 / (2 * kTokens)) : 0),
                              x_valid && valid);
        }
      }
      x += 16 * kStep;
      if (group_ends && copies_scales) {   // lanes 0..: scales; u4's last lanes: zero offsets
        int4_decode::copy16(scale_to + stage_offset, scales + int64_t(group_row) * group_stride);
      }
    }
  };

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

  // Streams k-blocks [kb_begin, kb_end) of the CTA's rows (16-row blocks block0 .. block0 + blocks - 1)
  // through this warp's stages and adds their sums to acc; the stages are free again at the end.
  CUTLASS_DEVICE static void stream(Int4DecodeParams const &p, Stage *stages, int block0, int blocks, int kb_begin,
                                    int kb_end, Acc &acc) {
    int const lane = threadIdx.x % 32;
    int64_t const kblock_words = int64_t(p.blocks_n) * 32;        // one k-block of all of W
    uint32_t const *rows = p.w + int64_t(block0) * 32;            // + kb * kblock_words: the CTA's rows of k-block kb
    uint32_t const stage0 = int4_decode::shared_address(stages);
    Copier copier;
    copier.w = rows + kb_begin * kblock_words + 4 * lane;
    copier.kblock_words = kblock_words;
    {
      int const token = (lane / 2) % kTokens, half = lane % 2;   // the same for every r: 32 is a multiple of 2 kTokens
      copier.x_valid = token < p.m;
      int const j0 = lane / (2 * kTokens);   // piece r adds 32 / (2 kTokens) k-blocks
      copier.x = static_cast<Element const *>(p.x) + (token < p.m ? token : 0) * p.ldx + 16 * (kb_begin + j0) + 8 * half;
    }
    copier.init(p, stage0, lane, block0, blocks);

    int const group_kb = p.group / 16;
    Groups issued(kb_begin, kb_end, group_kb);
    CUTLASS_PRAGMA_UNROLL
    for (int s = 0; s < kStages - 1; ++s) {
      int const kb = kb_begin + s * kStep;
      if (kb < kb_end) {
        bool const ends = issued.ends_with(kb);
        copier.issue(s * uint32_t(sizeof(Stage)), ends, issued.row, kFullSteps || kb + kStep <= kb_end);
        if (ends) issued.advance();
      }
      asm volatile("cp.async.commit_group;" ::: "memory");     // empty groups keep the count uniform
    }

    // ldmatrix rows.  Codes: lane l addresses row l % 8 of block l / 8 (blocks are 128 contiguous
    // bytes, so that is byte 16 l), and gets word l of each block: its A fragment.  x: row l % 8 is
    // token l % 8 of half (l / 8) % 2 of tile l / 16 (16 tokens) or of k-block l / 16 (8 tokens), and
    // lane l gets token l / 4, columns 2 (l % 4) + {0, 1}: X^T's B fragment.
    uint32_t w_rows = stage0 + uint32_t(offsetof(Stage, w)) + 16 * lane;
    uint32_t x_rows =
        stage0 + uint32_t(offsetof(Stage, x)) + 256 * (lane / 16) + 32 * (lane % 8) + 16 * ((lane / 8) % 2);
    int4_decode::keep_in_register(w_rows);
    int4_decode::keep_in_register(x_rows);
    static_assert(kTokens == 16 || kStep % 2 == 0, "8 tokens: one ldmatrix.x4 takes x of two k-blocks");
    constexpr int kWordLoads = (kBlocks + 3) / 4, kWordsPerLoad = kBlocks < 4 ? kBlocks : 4;

    Acc group_acc = {};
    float x_sum[kTiles][4] = {}, step_sum[kTiles][4] = {};   // sum(x) of the group, of the step
    Groups computed(kb_begin, kb_end, group_kb);
    uint32_t const mask = 0x000F000Fu, magic = kXor;   // in registers: one LOP3 takes both
    // The stage read (and the one refilled) this step, as byte offsets from stage 0.
    constexpr uint32_t kStageBytes = sizeof(Stage), kLastStage = (kStages - 1) * kStageBytes;
    uint32_t at = 0, refill = kLastStage;
    for (int kb = kb_begin; kb < kb_end; kb += kStep) {
      asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
      __syncwarp();   // every lane's pieces have landed; every lane is done with the stage refilled next
      {
        int const ahead = kb + (kStages - 1) * kStep;
        if (ahead < kb_end) {
          bool const ends = issued.ends_with(ahead);
          copier.issue(refill, ends, issued.row, kFullSteps || ahead + kStep <= kb_end);
          if (ends) issued.advance();
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
      }
      uint32_t xs[kStep][kTiles][2];   // X^T's B fragments: token 8t + lane/4, columns 2(lane%4) + {0, 1} and + 8
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kStep; j += 2 / kTiles) {
        uint32_t r[4];
        int4_decode::ldmatrix(r, x_rows + at + j * uint32_t(sizeof(Stage::x[0])));
        if constexpr (kTiles == 2) {
          xs[j][0][0] = r[0], xs[j][0][1] = r[1], xs[j][1][0] = r[2], xs[j][1][1] = r[3];
        } else {
          xs[j][0][0] = r[0], xs[j][0][1] = r[1], xs[j + 1][0][0] = r[2], xs[j + 1][0][1] = r[3];
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kStep; ++j) {
        auto const &x = xs[j];
        // Every word of the k-block first, then every conversion, then the MMAs: independent chains
        // side by side instead of one load -> LOP3 -> MMA chain per block.
        uint32_t words[kBlocks];
        CUTLASS_PRAGMA_UNROLL
        for (int q = 0; q < kWordLoads; ++q) {
          uint32_t r[kWordsPerLoad];
          int4_decode::ldmatrix(r, w_rows + at + j * kBlockBytes * kBlocks + 4 * kBlockBytes * q);
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kWordsPerLoad; ++i) words[4 * q + i] = r[i];
        }
        uint32_t a[kBlocks][4];   // kMagic + offset + code, in the MMA's A order (nibbles i and i + 4 of the word)
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < 4; ++i) a[b][i] = int4_decode::mask_xor(words[b] >> (4 * i), mask, magic);
        }
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kTiles; ++t) {
            float *c = group_acc[b][t];
            Mma::fma(c[0], c[1], c[2], c[3], a[b][0], a[b][1], a[b][2], a[b][3], x[t][0], x[t][1], c[0], c[1], c[2],
                     c[3]);
          }
        }
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < kTiles; ++t) {   // sum(x) per token, in the accumulators' layout
          float *s = step_sum[t];
          uint32_t const ones = Traits::kOnes;   // a copy: fma takes references
          Mma::fma(s[0], s[1], s[2], s[3], ones, ones, ones, ones, x[t][0], x[t][1], s[0], s[1], s[2], s[3]);
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kTiles; ++t) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) {
          if constexpr (kCorrectEachStep) {
            CUTLASS_PRAGMA_UNROLL
            for (int b = 0; b < kBlocks; ++b) group_acc[b][t][i] -= kOffset * step_sum[t][i];
          }
          x_sum[t][i] += step_sum[t][i];
          step_sum[t][i] = 0.f;
        }
      }
      if (computed.ends_with(kb)) {   // a group (or the warp's range) ends: its sums, scaled, into acc
        computed.advance();
        Stage const &st = *reinterpret_cast<Stage const *>(reinterpret_cast<char const *>(stages) + at);
        CUTLASS_PRAGMA_UNROLL
        for (int b = 0; b < kBlocks; ++b) {
          int const row = 16 * b + lane / 4;
          float scale[2], shift[2];   // acc += scale * group_acc + shift * sum(x)
          CUTLASS_PRAGMA_UNROLL
          for (int h = 0; h < 2; ++h) {
            scale[h] = static_cast<float>(st.scale[row + 8 * h]);
            shift[h] = kCorrectEachStep ? 0.f : -kOffset * scale[h];
            if constexpr (kZeros) shift[h] += static_cast<float>(st.zero[row + 8 * h]);
          }
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kTiles; ++t) {
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < 4; ++i) {   // values 0, 1: row n; 2, 3: row n + 8; fmaf: 2 FFMAs, not FMUL+FFMA+FADD
              acc[b][t][i] = fmaf(shift[i / 2], x_sum[t][i], fmaf(scale[i / 2], group_acc[b][t][i], acc[b][t][i]));
              group_acc[b][t][i] = 0.f;
            }
          }
        }
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < kTiles; ++t) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < 4; ++i) x_sum[t][i] = 0.f;
        }
      }
      refill = at;
      at = at == kLastStage ? 0 : at + kStageBytes;
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncwarp();   // every lane is done with the stages: a later stream() may refill them
  }

  static __device__ void run(Int4DecodeParams const &p, SharedStorage &smem) {
    int const lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    Split::start();
    int const block0 = blockIdx.y * kBlocks;                      // the CTA's first 16-row block of W
    int const blocks = min(kBlocks, p.blocks_n - block0);
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
        gemv::prefetch_to_l2(rows + kb * kblock_words, uint32_t(blocks) * 128);
      }
    }
    gemv::wait_for_previous_grid();

    Acc acc = {};
    stream(p, smem.stages[warp], block0, blocks, kb_begin, kb_end, acc);
    // The next kernel may start (and prefetch) during the reduction.  Letting it start right after
    // griddepcontrol.wait ran 4096 x 14336 1.3x slower on an H100: its CTAs' prefetches and slots
    // compete with this kernel's streaming.
    gemv::allow_next_grid();
    Split::finish(acc, smem.partial, smem.inbox, p.m, [&](int first, int last, auto const &sum) {
      store_all(p, block0, first, last, sum);
    });
  }

  // The outputs of entries [first, last), from their sums: one per entry, or with a gated weight one
  // per gate (its up, 8 entries on, is in the same range: ranges are whole 16-row blocks).
  template <class Sum>
  CUTLASS_DEVICE static void store_all(Int4DecodeParams const &p, int block0, int first, int last, Sum const &sum) {
    constexpr int kStride = Kernel::kGated ? 2 : 1;   // entries per output
    for (int i = first / kStride + threadIdx.x; i < last / kStride; i += kThreads) {
      int const e = Kernel::kGated ? (i / 8) * 16 + i % 8 : i;
      store(p, block0, e / kRows, e % kRows, sum(e), Kernel::kGated ? sum(e + 8) : 0.f);
    }
  }
};

// The launcher behind the C exports (the interface of Sm90Launcher).  The cluster size (K-slices
// per group of rows) is picked here from N and the SM count: enough CTAs for two per SM.
template <class Kernel>
struct Int4DecodeLauncher {
  using Problem = typename Kernel::Problem;
  using Decode = Int4Decode<Kernel>;
  using Setup = gemv::DeviceSetup<Decode>;

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
      return fail(FG_ERR_INVALID, "x, the codes, scales and zeros must be 16-byte aligned, x's rows 16 bytes apart "
                                  "(cp.async)");
    }
    int64_t const out_n = Kernel::kGated ? p.n / 2 : p.n;
    if (p.ldd < out_n || (Kernel::kResidual && p.ldc < out_n)) return fail(FG_ERR_INVALID, "output/residual rows too short");
    if ((p.n / 16 + Decode::kBlocks - 1) / Decode::kBlocks > 65535) return fail(FG_ERR_INVALID, "N too large for the grid");
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
    return Setup::prepare(device, gemv::kernel<Decode>, Decode::kThreads, Decode::kSmemBytes, "int4 decode kernel");
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
    // About two CTAs per SM, each warp with at least two steps of K.  On an H100, fewer and larger
    // CTAs (all resident at once) ran 4096-row weights 1.5x slower; 16-token kernels with 8 warps fit
    // one CTA per SM and run in waves.  A launch's splits overrides it (perf/int4_decode_launch.py).
    int const steps = (d.k / 16 + Decode::kStep - 1) / Decode::kStep;   // as the kernel counts them
    int const splits = gemv::choose_splits<true>(2 * Setup::sms(p.device), row_groups, steps,
                                                 Decode::kWarps, 2, int(p.splits));
    return gemv::launch(gemv::kernel<Decode>, d, splits, row_groups, Decode::kThreads, Decode::kSmemBytes,
                        p.stream, p.pdl != 0, "int4 decode");
  }
};

}  // namespace fused_gemm
