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

template <class Activation, class ElementD, class ElementBias, class ElementResidual, bool kBias, bool kResidual>
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
};

}  // namespace fused_gemm
