// The rope family's epilogue step: the QKV projection's output, rotated (q and k) and split into
// q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D], on the pairs Sm90PairEpilogue hands over.
//
// The weight's rows are permuted per head (fused_gemm.pack_qkv_rope) so that each rotation pair
// sits 8 rows apart in a 16-row block, and so that the pairs one thread holds are consecutive.  A
// region (a head's R rotated dims; its D - R others; a whole v head) is cut into chunks of G 16-row
// blocks (G = kChunkBlocks: divides both regions' block counts, at most 4); packed row 16b + c
// (c < 8) of chunk k = b / G is pair j = 8Gk + 2G(c/2) + 2(b % G) + c%2 of the region, and row
// 16b + 8 + c that pair's partner.  The thread with c in {2l, 2l + 1} thus holds pairs
// [8Gk + 2Gl, 8Gk + 2G(l + 1)) of chunk k, and the four threads of a row hold the chunk's 8G pairs
// in lane order: cos/sin reads and output writes are whole 32-byte sectors.  A rotated pair (d1, d2) is
// (j, j + R/2) for NeoX style and (2j, 2j + 1) for GPT-J style, and x[d1], x[d2] become
// x[d1] cos - x[d2] sin and x[d2] cos + x[d1] sin with cos/sin of theta_j at the token's position; a
// pair that is not rotated is dims (base + 2j, base + 2j + 1) of its region.
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
  static constexpr int kHeadBlocks = kHeadDim / 16;             // 16-row blocks of a head
  static constexpr int kRotBlocks = kRotaryDim / 16;            // ... of a q/k head's rotated region
  static constexpr int kKeepBlocks = kHeadBlocks - kRotBlocks;  // ... of a q/k head's other dims
  static constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
  static constexpr int kChunkBlocks = gcd(gcd(kRotBlocks, kKeepBlocks == 0 ? kRotBlocks : kKeepBlocks), 4);

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

  // The token's cos/sin row.  One 32-bit read either way (an int64 position's low word,
  // little-endian): a select between an int32 and an int64 read keeps the compiler from putting a
  // tile's position reads in flight together.  Positions at or past 2^31 are out of any cache's
  // range anyway.  Python checks positions against the cache when it can without a sync; the clamp
  // keeps a bad one (inside a CUDA graph) from reading outside the table.  Tokens past the end read
  // the last token's row and store nothing.
  CUTLASS_DEVICE static float const *cos_sin_row(Arguments const &p, int token, int tokens) {
    int const t = token < tokens ? token : tokens - 1;
    int pos = load_readonly(static_cast<int const *>(p.positions) + (p.positions_int64 ? 2 * t : t));
    pos = pos < 0 ? 0 : (pos >= p.max_pos ? static_cast<int>(p.max_pos - 1) : pos);
    return p.cos_sin + static_cast<int64_t>(pos) * kRotaryDim;
  }

  // Where a head's output goes: q, k or v, at its head offset; and the row stride.
  CUTLASS_DEVICE static ElementD *head_base(Arguments const &p, int head, int64_t &ld) {
    int const kv = head - p.num_heads;
    if (head < p.num_heads) {
      ld = p.ldq;
      return p.q + head * kHeadDim;
    }
    if (kv < p.num_kv_heads) {
      ld = p.ldk;
      return p.k + kv * kHeadDim;
    }
    ld = p.ldv;
    return p.v + (kv - p.num_kv_heads) * kHeadDim;
  }

  CUTLASS_DEVICE static void rotate(float c, float s, float &first, float &second) {
    float const x1 = first, x2 = second;
    first = x1 * c - x2 * s;
    second = x2 * c + x1 * s;
  }

  template <int kElements>
  CUTLASS_DEVICE static void store(ElementD *ptr, float const (&values)[kElements], bool pred) {
    cutlass::Array<float, kElements> in;
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < kElements; ++e) in[e] = values[e];
    cutlass::AlignedArray<ElementD, kElements> out;
    static_cast<cutlass::Array<ElementD, kElements> &>(out) =
        cutlass::NumericArrayConverter<ElementD, float, kElements>{}(in);  // two values per cvt
    cutlass::arch::global_store<decltype(out), sizeof(out)>(out, ptr, pred);
  }

  // ---- Without swap-AB (prefill): the whole tile at once (Sm90PairEpilogue's tile path). ----
  // A tile holds whole heads, or a head whole tiles, so head, q/k/v and region are per tile (or per
  // chunk of a head) and every address is a per-token base plus a constant.  Chunks of kVec blocks
  // lie in one region, their cos/sin are 2 * kVec consecutive floats and their outputs one (GPT-J,
  // kept dims) or two (NeoX) runs of consecutive dims.
  static constexpr bool kTileStore = true;

  template <int kVec>
  struct CosSin {
    float cos[2 * kVec], sin[2 * kVec];
  };

  template <int kVec>
  CUTLASS_DEVICE static CosSin<kVec> load_cos_sin(float const *row) {
    static_assert(kVec == 1 || kVec % 2 == 0);
    CosSin<kVec> cs;
    if constexpr (kVec == 1) {
      float2 const c = __ldg(reinterpret_cast<float2 const *>(row));
      float2 const s = __ldg(reinterpret_cast<float2 const *>(row + kHalf));
      cs = {{c.x, c.y}, {s.x, s.y}};
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kVec / 2; ++i) {
        float4 const c = __ldg(reinterpret_cast<float4 const *>(row) + i);
        float4 const s = __ldg(reinterpret_cast<float4 const *>(row + kHalf) + i);
        cs.cos[4 * i] = c.x, cs.cos[4 * i + 1] = c.y, cs.cos[4 * i + 2] = c.z, cs.cos[4 * i + 3] = c.w;
        cs.sin[4 * i] = s.x, cs.sin[4 * i + 1] = s.y, cs.sin[4 * i + 2] = s.z, cs.sin[4 * i + 3] = s.w;
      }
    }
    return cs;
  }

  template <int kTokens, int kBlocks>
  CUTLASS_DEVICE static void store_tile(Arguments const &p, float (&values)[kTokens][kBlocks][4],
                                        int const (&token)[kTokens], int tokens, int col0, int packed_rows) {
    static_assert(kBlocks % kHeadBlocks == 0 || kHeadBlocks % kBlocks == 0,
                  "a tile holds whole heads, or a head whole tiles (the rope spec checks this)");
    constexpr int kHeads = kBlocks >= kHeadBlocks ? kBlocks / kHeadBlocks : 1;   // heads in the tile
    constexpr int kBlocksPerHead = kBlocks >= kHeadBlocks ? kHeadBlocks : kBlocks;
    constexpr int kVec = kChunkBlocks;
    static_assert(kBlocksPerHead % kVec == 0, "a tile holds whole chunks (the rope spec checks this)");
    constexpr int kChunks = kBlocksPerHead / kVec;

    int const lane = (col0 % 16) / 2;                          // which quarter of each region
    int const head0 = col0 / kHeadDim;
    int const block0 = (col0 % kHeadDim) / 16;                 // the tile's first block in its head
    int const heads = packed_rows / kHeadDim;
    int const rotated_heads = p.num_heads + p.num_kv_heads;

    // The bias is the same for every token: read once per tile, kept packed (two per register).
    using BiasPair = cutlass::Array<ElementBias, 2>;
    BiasPair bias[kBlocks][2];
    if constexpr (kBias) {
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < kBlocks; ++b) {
        int const col = col0 + 16 * b < packed_rows ? col0 + 16 * b : col0 % 16;  // heads past the end store nothing
        CUTLASS_PRAGMA_UNROLL
        for (int half = 0; half < 2; ++half) {
          uint32_t const word = __ldg(reinterpret_cast<uint32_t const *>(p.bias + col + 8 * half));
          bias[b][half] = reinterpret_cast<BiasPair const &>(word);
        }
      }
    }
    ElementD *head_ptr[kHeads];
    int64_t head_ld[kHeads];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < kHeads; ++h) head_ptr[h] = head_base(p, head0 + h, head_ld[h]);
    float const *cs_row[kTokens];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kTokens; ++r) cs_row[r] = cos_sin_row(p, token[r], tokens);

    // Chunk c of every head in the tile shares its cos/sin (same pairs, same token): loads go kAhead
    // (chunk, token) steps ahead of their use, and only for chunks that some head of the tile rotates.
    // The last tile's epilogue is not hidden behind another warpgroup's MMA, so its chain of waits
    // shows in the kernel's time.  Each step frees the accumulators it stores; three steps in flight
    // fit in registers (four spill), two next to a bias.
    bool const tile_rotates = head0 < rotated_heads;
    auto cos_sin_of = [&](int c, int r) {
      int const chunk_block = block0 + c * kVec;
      CosSin<kVec> cs{};
      if (tile_rotates && chunk_block < kRotBlocks) cs = load_cos_sin<kVec>(cs_row[r] + 8 * chunk_block + 2 * kVec * lane);
      return cs;
    };
    constexpr int kSteps = kChunks * kTokens;
    constexpr int kAheadMax = kBias ? 2 : 3;                 // the tile's bias takes 16 registers
    constexpr int kAhead = kSteps < kAheadMax ? kSteps : kAheadMax;
    CosSin<kVec> ahead[kAhead];
    CUTLASS_PRAGMA_UNROLL
    for (int step = 0; step < kAhead; ++step) ahead[step] = cos_sin_of(step / kTokens, step % kTokens);
    CUTLASS_PRAGMA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      int const c = step / kTokens, r = step % kTokens;
      CosSin<kVec> const cs = ahead[step % kAhead];
      if (step + kAhead < kSteps) ahead[step % kAhead] = cos_sin_of((step + kAhead) / kTokens, (step + kAhead) % kTokens);
      int const chunk_block = block0 + c * kVec;
      bool const valid = token[r] < tokens;
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < kHeads; ++h) {
        if (head0 + h >= heads) break;
        ElementD *out = head_ptr[h] + static_cast<int64_t>(valid ? token[r] : 0) * head_ld[h];
        bool const qk = head0 + h < rotated_heads;
        float v[kVec][4];
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kVec; ++i) {
          CUTLASS_PRAGMA_UNROLL
          for (int e = 0; e < 4; ++e) {
            v[i][e] = values[r][h * kBlocksPerHead + c * kVec + i][e];
            if constexpr (kBias) v[i][e] += static_cast<float>(bias[h * kBlocksPerHead + c * kVec + i][e / 2][e % 2]);
          }
        }
        if (qk && chunk_block < kRotBlocks) {
          int const pair = 8 * chunk_block + 2 * kVec * lane;
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kVec; ++i) {
            rotate(cs.cos[2 * i], cs.sin[2 * i], v[i][0], v[i][2]);
            rotate(cs.cos[2 * i + 1], cs.sin[2 * i + 1], v[i][1], v[i][3]);
          }
          if constexpr (kNeox) {  // firsts at dims pair.., partners R/2 further on
            float first[2 * kVec], second[2 * kVec];
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < kVec; ++i) {
              first[2 * i] = v[i][0], first[2 * i + 1] = v[i][1];
              second[2 * i] = v[i][2], second[2 * i + 1] = v[i][3];
            }
            store(out + pair, first, valid);
            store(out + pair + kHalf, second, valid);
            continue;
          } else {
            store_interleaved(out + 2 * pair, v, valid);
            continue;
          }
        }
        // Dims that are not rotated: the D - R after a q/k head's rotated ones, or a whole v head.
        int const keep_blocks = qk ? kKeepBlocks : kHeadBlocks;
        int const keep_block = qk ? chunk_block - kRotBlocks : chunk_block;
        int const base = qk ? kRotaryDim : 0;
        store_interleaved(out + base + 16 * keep_block + 4 * kVec * lane, v, valid);
      }
    }
  }

  // A chunk's pairs as dims (2j, 2j + 1) in order: first0, second0, first1, second1 per block.
  template <int kVec>
  CUTLASS_DEVICE static void store_interleaved(ElementD *ptr, float const (&v)[kVec][4], bool valid) {
    float out[4 * kVec];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kVec; ++i) {
      out[4 * i] = v[i][0], out[4 * i + 1] = v[i][2], out[4 * i + 2] = v[i][1], out[4 * i + 3] = v[i][3];
    }
    if constexpr (4 * kVec * sizeof(ElementD) <= 16) {
      store(ptr, out, valid);
    } else {  // 16-byte pieces
      constexpr int kPiece = 16 / sizeof(ElementD);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < 4 * kVec / kPiece; ++i) {
        float piece[kPiece];
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < kPiece; ++e) piece[e] = out[i * kPiece + e];
        store(ptr + i * kPiece, piece, valid);
      }
    }
  }

  // ---- With swap-AB (decode): pair groups (Sm90PairEpilogue's batched path). ----
  struct Row {
    float const *cos_sin;
    int token;
    bool valid;
  };
  // cos/sin of the thread's two rotations in a pair group: one pair of two tokens.  Rows that are
  // not rotated get (1, 0).
  struct Inputs {
    float cos0, sin0, cos1, sin1;
  };
  // A batch's loads wait for memory together, and the next batch's are in flight while one is
  // applied.
  static constexpr int kBatchValues = 16;

  CUTLASS_DEVICE static Row row(Arguments const &p, int token, int tokens) {
    return {cos_sin_row(p, token, tokens), token, token < tokens};
  }

  // A packed row's pair: rotated or not, its pair index j (rotated) and its two natural dims.
  struct Pair {
    bool rotated;
    int j, first, second;
  };
  CUTLASS_DEVICE static int chunk_pair(int b, int c) {  // block b of a region, row c < 8 of the block
    return (b / kChunkBlocks) * 8 * kChunkBlocks + (c / 2) * 2 * kChunkBlocks + 2 * (b % kChunkBlocks) + c % 2;
  }
  CUTLASS_DEVICE static Pair pair_of(Arguments const &p, int packed_row) {
    int const r = packed_row % kHeadDim;
    int const b = r / 16, c = r % 8;
    bool const qk = packed_row / kHeadDim < p.num_heads + p.num_kv_heads;
    if (qk && b < kRotBlocks) {
      int const j = chunk_pair(b, c);
      return {true, j, kNeox ? j : 2 * j, kNeox ? j + kHalf : 2 * j + 1};
    }
    int const j = chunk_pair(qk ? b - kRotBlocks : b, c);
    int const base = qk ? kRotaryDim : 0;
    return {false, 0, base + 2 * j, base + 2 * j + 1};
  }

  // Branch-free, unconditional reads, so that the loads of a whole batch are in flight together.
  template <bool kSwapAB>
  CUTLASS_DEVICE static Inputs load(Arguments const &p, Row const &row0, Row const &row1, int packed_row, int) {
    static_assert(kSwapAB, "without swap-AB the tile path stores");
    Pair const pair = pair_of(p, packed_row);
    float const *cs0 = row0.cos_sin + pair.j;
    float const *cs1 = row1.cos_sin + pair.j;
    Inputs const in{load_readonly(cs0), load_readonly(cs0 + kHalf), load_readonly(cs1), load_readonly(cs1 + kHalf)};
    return pair.rotated ? in : Inputs{1.f, 0.f, 1.f, 0.f};
  }

  CUTLASS_DEVICE static void add_bias(Arguments const &p, int packed_row, float &first, float &second) {
    if constexpr (kBias) {
      first += static_cast<float>(load_readonly(p.bias + packed_row));
      second += static_cast<float>(load_readonly(p.bias + packed_row + 8));
    }
  }

  // (first0, second0): packed rows (packed_row, + 8) of row0's token; (first1, second1): the same
  // rows of row1's token.
  template <bool kSwapAB>
  CUTLASS_DEVICE static void apply(Arguments const &p, Row const &row0, Row const &row1, Inputs const &in,
                                   int packed_row, float first0, float first1, float second0, float second1,
                                   int packed_rows) {
    static_assert(kSwapAB, "without swap-AB the tile path stores");
    if (packed_row >= packed_rows) return;
    Pair const pair = pair_of(p, packed_row);
    add_bias(p, packed_row, first0, second0);
    add_bias(p, packed_row, first1, second1);
    rotate(in.cos0, in.sin0, first0, second0);
    rotate(in.cos1, in.sin1, first1, second1);
    int64_t ld;
    ElementD *head = head_base(p, packed_row / kHeadDim, ld);
    ElementD *base0 = head + static_cast<int64_t>(row0.valid ? row0.token : 0) * ld;
    ElementD *base1 = head + static_cast<int64_t>(row1.valid ? row1.token : 0) * ld;
    store<1>(base0 + pair.first, {first0}, row0.valid);
    store<1>(base0 + pair.second, {second0}, row0.valid);
    store<1>(base1 + pair.first, {first1}, row1.valid);
    store<1>(base1 + pair.second, {second1}, row1.valid);
  }
};

}  // namespace fused_gemm
