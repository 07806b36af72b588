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

#include "cutlass/arch/memory.h"
#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/pair/sm90_pair_epilogue.hpp"

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

  // One token of the tile: its cos/sin row, read once per tile (a position is a dependent read: the
  // cos/sin address waits for it).  Tokens past the end read the last token's row and store nothing.
  struct Row {
    float const *cos_sin;
    int token;
    bool valid;
  };
  // cos/sin of the thread's two rotations in a pair group: two pairs of one token (the next packed
  // row's pair), or one pair of two tokens (swap-AB).  Rows that are not rotated get (1, 0).
  struct Inputs {
    float cos0, sin0, cos1, sin1;
  };
  // A batch's loads wait for memory together, and the next batch's are in flight while one is
  // applied: two batches of 16 values fit next to the pingpong consumer's 128 accumulators (two of
  // 32 spill).
  static constexpr int kBatchValues = 16;

  CUTLASS_DEVICE static Row row(Arguments const &p, int token, int tokens) {
    int const t = token < tokens ? token : tokens - 1;
    // One 32-bit read either way (an int64 position's low word, little-endian): a select between an
    // int32 and an int64 read keeps the compiler from putting a tile's position reads in flight
    // together.  Positions at or past 2^31 are out of any cache's range anyway.
    int pos = load_readonly(static_cast<int const *>(p.positions) + (p.positions_int64 ? 2 * t : t));
    // Python checks positions against the cache when it can without a sync; this keeps a bad one
    // (inside a CUDA graph) from reading outside the table.
    pos = pos < 0 ? 0 : (pos >= p.max_pos ? static_cast<int>(p.max_pos - 1) : pos);
    return {p.cos_sin + static_cast<int64_t>(pos) * kRotaryDim, token, token < tokens};
  }

  CUTLASS_DEVICE static bool rotated(Arguments const &p, int packed_row) {
    return packed_row / kHeadDim < p.num_heads + p.num_kv_heads && packed_row % kHeadDim < kRotaryDim;
  }

  CUTLASS_DEVICE static int pair_of(int packed_row) {
    int const r = packed_row % kHeadDim;
    return (r / 16) * 8 + (r % 8);
  }

  // Branch-free, unconditional reads, so that the loads of a whole batch are in flight together.
  template <bool kSwapAB>
  CUTLASS_DEVICE static Inputs load(Arguments const &p, Row const &row0, Row const &row1, int packed_row, int) {
    bool const rot = rotated(p, packed_row);
    int const pair = rot ? pair_of(packed_row) : 0;
    Inputs in;
    if constexpr (kSwapAB) {
      float const *cs0 = row0.cos_sin + pair;
      float const *cs1 = row1.cos_sin + pair;
      in = {load_readonly(cs0), load_readonly(cs0 + kHalf), load_readonly(cs1), load_readonly(cs1 + kHalf)};
    } else {  // pair is even: the two pairs' cos (and sin) are adjacent
      float const *cs = row0.cos_sin + pair;
      float2 const c = __ldg(reinterpret_cast<float2 const *>(cs));
      float2 const s = __ldg(reinterpret_cast<float2 const *>(cs + kHalf));
      in = {c.x, s.x, c.y, s.y};
    }
    return rot ? in : Inputs{1.f, 0.f, 1.f, 0.f};
  }

  CUTLASS_DEVICE static void rotate(float c, float s, float &first, float &second) {
    float const x1 = first, x2 = second;
    first = x1 * c - x2 * s;
    second = x2 * c + x1 * s;
  }

  CUTLASS_DEVICE static void add_bias(Arguments const &p, int packed_row, float &first, float &second) {
    if constexpr (kBias) {
      first += static_cast<float>(load_readonly(p.bias + packed_row));
      second += static_cast<float>(load_readonly(p.bias + packed_row + 8));
    }
  }

  // The token's q, k or v head that a packed row belongs to, and the natural dims of the row and
  // of its partner 8 rows on.
  CUTLASS_DEVICE static ElementD *head_base(Arguments const &p, int token, int packed_row) {
    int const head = packed_row / kHeadDim;
    int const kv = head - p.num_heads;
    ElementD *q = p.q + token * p.ldq + head * kHeadDim;
    ElementD *k = p.k + token * p.ldk + kv * kHeadDim;
    ElementD *v = p.v + token * p.ldv + (kv - p.num_kv_heads) * kHeadDim;
    return head < p.num_heads ? q : (kv < p.num_kv_heads ? k : v);
  }

  template <int kElements>
  CUTLASS_DEVICE static void store(ElementD *ptr, float const (&values)[kElements], bool pred) {
    cutlass::NumericConverter<ElementD, float> to_d;
    cutlass::AlignedArray<ElementD, kElements> out;
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < kElements; ++e) out[e] = to_d(values[e]);
    cutlass::arch::global_store<decltype(out), sizeof(out)>(out, ptr, pred);
  }

  template <bool kSwapAB>
  CUTLASS_DEVICE static void apply(Arguments const &p, Row const &row0, Row const &row1, Inputs const &in,
                                   int packed_row, float first0, float first1, float second0, float second1,
                                   int packed_rows) {
    if (packed_row >= packed_rows) return;
    bool const rot = rotated(p, packed_row);
    int const r = packed_row % kHeadDim;
    int const j = pair_of(packed_row);
    int const dim = rot ? (kNeox ? j : 2 * j) : r;
    int const partner = rot ? (kNeox ? j + kHalf : 2 * j + 1) : r + 8;
    if constexpr (kSwapAB) {  // the second values are the next token, same packed row
      add_bias(p, packed_row, first0, second0);
      add_bias(p, packed_row, first1, second1);
      rotate(in.cos0, in.sin0, first0, second0);
      rotate(in.cos1, in.sin1, first1, second1);
      ElementD *base0 = head_base(p, row0.valid ? row0.token : 0, packed_row);
      ElementD *base1 = head_base(p, row1.valid ? row1.token : 0, packed_row);
      store<1>(base0 + dim, {first0}, row0.valid);
      store<1>(base0 + partner, {second0}, row0.valid);
      store<1>(base1 + dim, {first1}, row1.valid);
      store<1>(base1 + partner, {second1}, row1.valid);
    } else {  // the second values are the next packed row (packed_row is even), same token
      add_bias(p, packed_row, first0, second0);
      add_bias(p, packed_row + 1, first1, second1);
      rotate(in.cos0, in.sin0, first0, second0);
      rotate(in.cos1, in.sin1, first1, second1);
      bool const valid = row0.valid;
      ElementD *base = head_base(p, valid ? row0.token : 0, packed_row);
      if (!kNeox && rot) {  // GPT-J: dims 2j, 2j+1, 2j+2, 2j+3
        store<4>(base + dim, {first0, second0, first1, second1}, valid);
      } else {              // dims (d, d + 1) and (partner, partner + 1)
        store<2>(base + dim, {first0, first1}, valid);
        store<2>(base + partner, {second0, second1}, valid);
      }
    }
  }
};

}  // namespace fused_gemm
