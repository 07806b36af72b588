// The rope family's epilogue step: the QKV projection's output, rotated (q and k) and split into
// q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D], on the pairs Sm90PairEpilogue hands over.
//
// The weight's rows are permuted per head (fused_gemm.pack_qkv_rope) so that each rotation pair
// sits 8 rows apart in a 16-row block: within a q or k head, packed row 16b + i (i < 8) holds pair
// j = 8b + i's first dim and row 16b + 8 + i its second, for the first R/2 pairs (R = rotary dims);
// the D - R dims that are not rotated, and every v head, keep their order.  A pair (d1, d2) is
// (j, j + R/2) for NeoX style and (2j, 2j + 1) for GPT-J style; x[d1], x[d2] become
// x[d1] cos - x[d2] sin and x[d2] cos + x[d1] sin with cos/sin of theta_j at the token's position.
#pragma once

#include <cstdint>

#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/common/sm90_pair_epilogue.hpp"

namespace fused_gemm {

// Read-only loads through the non-coherent path: the epilogue interleaves them with stores to
// q/k/v, and without it the compiler must keep every load behind the stores before it (they might
// alias), serialising a dependent position -> cos/sin chain per pair.
template <class T>
CUTLASS_DEVICE T load_readonly(T const *ptr) {
  if constexpr (sizeof(T) == 2) {
    return T::bitcast(__ldg(reinterpret_cast<unsigned short const *>(ptr)));
  } else {
    return __ldg(ptr);
  }
}

template <class ElementD, class ElementBias, int kHeadDim, int kRotaryDim, bool kNeox, bool kBias>
struct RopePairOp {
  static_assert(kHeadDim % 16 == 0 && kRotaryDim % 16 == 0 && kRotaryDim <= kHeadDim,
                "head and rotary dims are multiples of 16 (pairs live in 16-row blocks)");
  static constexpr int kHalf = kRotaryDim / 2;

  struct Arguments {
    ElementD *q = nullptr;
    ElementD *k = nullptr;
    ElementD *v = nullptr;
    int64_t ldq = 0, ldk = 0, ldv = 0;       // token strides, in elements
    ElementBias const *bias = nullptr;       // packed like the weight
    void const *positions = nullptr;         // [T] int32 or int64
    float const *cos_sin = nullptr;          // [max_pos, R]: cos of pair j at j, sin at R/2 + j
    int64_t max_pos = 0;
    int num_heads = 0;
    int num_kv_heads = 0;
    int positions_int64 = 0;
  };

  struct Target {  // where a packed row's head goes
    ElementD *base;
    int dim;         // natural dim of the row (first of its pair when rotated)
    int partner;     // natural dim of the row 8 further on
    int pair;        // rotation pair index, or -1 if not rotated
  };

  CUTLASS_DEVICE static Target target(Arguments const &p, int token, int packed_row) {
    int const head = packed_row / kHeadDim;
    int const r = packed_row % kHeadDim;
    ElementD *base;
    bool rotated = r < kRotaryDim;
    if (head < p.num_heads) {
      base = p.q + token * p.ldq + head * kHeadDim;
    } else if (head < p.num_heads + p.num_kv_heads) {
      base = p.k + token * p.ldk + (head - p.num_heads) * kHeadDim;
    } else {
      base = p.v + token * p.ldv + (head - p.num_heads - p.num_kv_heads) * kHeadDim;
      rotated = false;
    }
    if (!rotated) return {base, r, r + 8, -1};
    int const j = (r / 16) * 8 + (r % 8);
    return kNeox ? Target{base, j, j + kHalf, j} : Target{base, 2 * j, 2 * j + 1, j};
  }

  CUTLASS_DEVICE static int64_t position(Arguments const &p, int token) {
    int64_t pos = p.positions_int64 ? static_cast<int64_t>(load_readonly(static_cast<long long const *>(p.positions) + token))
                                    : static_cast<int64_t>(load_readonly(static_cast<int const *>(p.positions) + token));
    // Python checks positions against the cache when it can without a sync; this keeps a bad one
    // (inside a CUDA graph) from reading outside the table.
    return pos < 0 ? 0 : (pos >= p.max_pos ? p.max_pos - 1 : pos);
  }

  // Rotates (first, second) in place if the row is rotated.
  CUTLASS_DEVICE static void rotate(Arguments const &p, int64_t pos, int pair, float &first, float &second) {
    if (pair < 0) return;
    float const c = load_readonly(p.cos_sin + pos * kRotaryDim + pair);
    float const s = load_readonly(p.cos_sin + pos * kRotaryDim + kHalf + pair);
    float const x1 = first, x2 = second;
    first = x1 * c - x2 * s;
    second = x2 * c + x1 * s;
  }

  // Two consecutive pairs (pair even): one 8-byte load each for their cos and sin.
  CUTLASS_DEVICE static void rotate2(Arguments const &p, int64_t pos, int pair, float &first0, float &second0,
                                     float &first1, float &second1) {
    float const *row = p.cos_sin + pos * kRotaryDim + pair;
    float2 const c = __ldg(reinterpret_cast<float2 const *>(row));
    float2 const s = __ldg(reinterpret_cast<float2 const *>(row + kHalf));
    float const x10 = first0, x20 = second0, x11 = first1, x21 = second1;
    first0 = x10 * c.x - x20 * s.x;
    second0 = x20 * c.x + x10 * s.x;
    first1 = x11 * c.y - x21 * s.y;
    second1 = x21 * c.y + x11 * s.y;
  }

  CUTLASS_DEVICE static void add_bias(Arguments const &p, int packed_row, float &first, float &second) {
    if constexpr (kBias) {
      first += static_cast<float>(load_readonly(p.bias + packed_row));
      second += static_cast<float>(load_readonly(p.bias + packed_row + 8));
    }
  }

  template <bool kSwapAB>
  CUTLASS_DEVICE static void apply(Arguments const &p, int token, int packed_row, float first0, float first1,
                                   float second0, float second1, int tokens, int packed_rows) {
    if (packed_row >= packed_rows || token >= tokens) return;
    cutlass::NumericConverter<ElementD, float> to_d;
    if constexpr (kSwapAB) {  // the second values are the next token, same packed row
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < 2; ++t) {
        if (token + t >= tokens) break;
        float a = t == 0 ? first0 : first1;
        float b = t == 0 ? second0 : second1;
        add_bias(p, packed_row, a, b);
        Target const to = target(p, token + t, packed_row);
        if (to.pair >= 0) rotate(p, position(p, token + t), to.pair, a, b);
        to.base[to.dim] = to_d(a);
        to.base[to.partner] = to_d(b);
      }
    } else {  // the second values are the next packed row (packed_row is even), same token
      float a0 = first0, b0 = second0, a1 = first1, b1 = second1;
      add_bias(p, packed_row, a0, b0);
      add_bias(p, packed_row + 1, a1, b1);
      Target const to = target(p, token, packed_row);  // row + 1 is the next pair / dim of the same head
      if (to.pair >= 0) rotate2(p, position(p, token), to.pair, a0, b0, a1, b1);
      if (to.pair >= 0 && !kNeox) {  // GPT-J: dims 2j, 2j+1, 2j+2, 2j+3
        cutlass::AlignedArray<ElementD, 4> out;
        out[0] = to_d(a0);
        out[1] = to_d(b0);
        out[2] = to_d(a1);
        out[3] = to_d(b1);
        *reinterpret_cast<cutlass::AlignedArray<ElementD, 4> *>(to.base + to.dim) = out;
      } else {  // dims (d, d + 1) and (partner, partner + 1)
        cutlass::AlignedArray<ElementD, 2> first, second;
        first[0] = to_d(a0);
        first[1] = to_d(a1);
        second[0] = to_d(b0);
        second[1] = to_d(b1);
        *reinterpret_cast<cutlass::AlignedArray<ElementD, 2> *>(to.base + to.dim) = first;
        *reinterpret_cast<cutlass::AlignedArray<ElementD, 2> *>(to.base + to.partner) = second;
      }
    }
  }
};

}  // namespace fused_gemm
