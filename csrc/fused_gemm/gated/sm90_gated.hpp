// The gated family's epilogue step (SwiGLU / GeGLU): out[t, j] = act(alpha*gate + b_gate[j]) *
// (alpha*up + b_up[j]) + beta * residual[t, j], on the pairs Sm90PairEpilogue hands over.
//
// The weight is packed (fused_gemm.pack_gate_up) in 16-row blocks: rows 16b..16b+7 are gate rows
// 8b..8b+7 and rows 16b+8..16b+15 the matching up rows, so packed row r (r % 16 < 8) is output
// column (r / 16) * 8 + r % 8 and its up partner is row r + 8.
#pragma once

#include <cstdint>

#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/pair/sm90_pair_epilogue.hpp"

namespace fused_gemm {

// SiLU on the hardware exp2 and reciprocal: a handful of instructions a value, against ~25 for
// CUTLASS's SiLu (expf with its range reduction, an IEEE division), which a large-M SwiGLU pays for
// in issue slots and power next to the MMA.  The error, a few fp32 ulp, is far below the output's
// bf16/fp16 rounding.  As x -> -inf, 1 + e^-x overflows and __fdividef gives -0, the limit.
template <class T>
struct FastSiLu {
  CUTLASS_DEVICE T operator()(T x) const { return __fdividef(x, 1.f + __expf(-x)); }
};

// A 4 x 4 transpose of 32-bit words across the four lanes of a quad (lanes 4g .. 4g + 3, index q):
// afterwards v[i] is what lane i held in v[q].  Two butterfly rounds, each swapping one bit of the lane
// index with one bit of the word index: four shuffles and a few selects.
CUTLASS_DEVICE void quad_transpose(uint32_t (&v)[4], int q) {
  CUTLASS_PRAGMA_UNROLL
  for (int bit = 1; bit <= 2; bit *= 2) {
    bool const upper = q & bit;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      if (j & bit) continue;   // the pair (j, j + bit): keep the word whose bit matches the lane's, swap the other
      uint32_t const recv = __shfl_xor_sync(0xffffffffu, upper ? v[j] : v[j + bit], bit);
      if (upper) {
        v[j] = recv;
      } else {
        v[j + bit] = recv;
      }
    }
  }
}

template <class Activation, class ElementD, class ElementBias, class ElementResidual, bool kBias, bool kResidual,
          bool kVectorStore = false>
struct GatedPairOp {
  struct Arguments {
    ElementD *d = nullptr;
    int64_t ldd = 0;
    ElementResidual const *c = nullptr;
    int64_t ldc = 0;
    ElementBias const *bias_gate = nullptr;  // either may be null: no bias on that side
    ElementBias const *bias_up = nullptr;
    float alpha = 1.f;
    float beta = 1.f;
  };

  struct Row {
    int token;
    bool valid;
  };
  struct Inputs {};  // nothing read ahead: bias and residual loads do not depend on other loads
  static constexpr int kBatchValues = 32;
  // Without swap-AB: the whole tile at once, 16-byte stores (below).
  static constexpr bool kTileStore = kVectorStore;

  CUTLASS_DEVICE static Row row(Arguments const &, int token, int tokens) { return {token, token < tokens}; }

  template <bool kSwapAB>
  CUTLASS_DEVICE static Inputs load(Arguments const &, Row const &, Row const &, int, int) {
    return {};
  }

  CUTLASS_DEVICE static float gated(Arguments const &p, float gate, float up, int col) {
    gate *= p.alpha;
    up *= p.alpha;
    if constexpr (kBias) {
      if (p.bias_gate != nullptr) gate += static_cast<float>(p.bias_gate[col]);
      if (p.bias_up != nullptr) up += static_cast<float>(p.bias_up[col]);
    }
    return Activation{}(gate) * up;
  }

  CUTLASS_DEVICE static float residual(Arguments const &p, int token, int col) {
    return p.beta * static_cast<float>(p.c[token * p.ldc + col]);
  }

  template <bool kSwapAB>
  CUTLASS_DEVICE static void apply(Arguments const &p, Row const &row0, Row const &row1, Inputs const &,
                                   int packed_row, float gate0, float gate1, float up0, float up1, int packed_rows) {
    if (packed_row >= packed_rows || !row0.valid) return;  // 16-row blocks are whole: row + 8 is in range
    int const token = row0.token;
    int const col = (packed_row >> 4) * 8 + (packed_row & 7);
    cutlass::NumericConverter<ElementD, float> to_d;
    if constexpr (kSwapAB) {  // the second value is the next token, same column
      float out0 = gated(p, gate0, up0, col);
      if constexpr (kResidual) out0 += residual(p, token, col);
      p.d[token * p.ldd + col] = to_d(out0);
      if (row1.valid) {
        float out1 = gated(p, gate1, up1, col);
        if constexpr (kResidual) out1 += residual(p, row1.token, col);
        p.d[row1.token * p.ldd + col] = to_d(out1);
      }
    } else {  // the second value is the next column (col is even): one 2-element store
      cutlass::AlignedArray<ElementD, 2> out;
      float out0 = gated(p, gate0, up0, col);
      float out1 = gated(p, gate1, up1, col + 1);
      if constexpr (kResidual) {
        out0 += residual(p, token, col);
        out1 += residual(p, token, col + 1);
      }
      out[0] = to_d(out0);
      out[1] = to_d(out1);
      *reinterpret_cast<cutlass::AlignedArray<ElementD, 2> *>(p.d + token * p.ldd + col) = out;
    }
  }

  // The tile's outputs with 16-byte stores.  Lane q of a quad holds output columns 8c + 2q, 8c + 2q + 1
  // of every 16-column block c of the packed weight, so a pair-by-pair store writes 4 bytes (of each of
  // 8 rows) per lane and instruction.  Across four blocks the quad holds 4 x 8 whole columns: after a
  // transpose within the quad (quad_transpose), lane q holds block q's 8 consecutive outputs, one
  // 16-byte store (two for fp32), and a warp's store covers 64 contiguous bytes of each of its 8 rows.
  template <int kTokens, int kBlocks>
  CUTLASS_DEVICE static void store_tile(Arguments const &p, float (&values)[kTokens][kBlocks][4],
                                        int const (&token)[kTokens], int tokens, int col0, int packed_rows) {
    static_assert(kBlocks % 4 == 0, "vector stores take whole groups of four 16-column blocks (the spec checks)");
    constexpr int kWords = sizeof(ElementD) == 4 ? 2 : 1;   // 32-bit words per output pair
    static_assert(sizeof(ElementD) == 2 || sizeof(ElementD) == 4);
    int const q = (col0 % 16) / 2;
    int const block0 = col0 / 16;                       // the tile's first 16-row block of the packed weight
    int const out_blocks = (packed_rows + 15) / 16;    // blocks (of 8 outputs) that exist
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kTokens; ++r) {
      bool const valid = token[r] < tokens;             // the same across the quad: one row
      CUTLASS_PRAGMA_UNROLL
      for (int group = 0; group < kBlocks / 4; ++group) {
        uint32_t words[kWords][4];
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 4; ++j) {
          int const b = 4 * group + j;
          int const col = (block0 + b) * 8 + 2 * q;
          bool const exists = block0 + b < out_blocks;
          float out0 = exists ? gated(p, values[r][b][0], values[r][b][2], col) : 0.f;
          float out1 = exists ? gated(p, values[r][b][1], values[r][b][3], col + 1) : 0.f;
          if constexpr (kResidual) {
            if (valid && exists) {
              out0 += residual(p, token[r], col);
              out1 += residual(p, token[r], col + 1);
            }
          }
          if constexpr (kWords == 1) {
            cutlass::Array<ElementD, 2> pair;
            pair[0] = ElementD(out0);
            pair[1] = ElementD(out1);
            words[0][j] = reinterpret_cast<uint32_t const &>(pair);
          } else {
            words[0][j] = __float_as_uint(out0);
            words[1][j] = __float_as_uint(out1);
          }
        }
        CUTLASS_PRAGMA_UNROLL
        for (int w = 0; w < kWords; ++w) quad_transpose(words[w], q);
        int const block = block0 + 4 * group + q;      // this lane's block after the transpose
        if (valid && block < out_blocks) {
          uint32_t line[4 * kWords];                  // columns 8 block + 0 .. 7, in memory order
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < 4; ++i) {
            CUTLASS_PRAGMA_UNROLL
            for (int w = 0; w < kWords; ++w) line[i * kWords + w] = words[w][i];
          }
          ElementD *at = p.d + int64_t(token[r]) * p.ldd + block * 8;
          CUTLASS_PRAGMA_UNROLL
          for (int v = 0; v < kWords; ++v) {
            *reinterpret_cast<uint4 *>(at + v * (16 / sizeof(ElementD))) =
                make_uint4(line[4 * v], line[4 * v + 1], line[4 * v + 2], line[4 * v + 3]);
          }
        }
      }
    }
  }
};

}  // namespace fused_gemm
