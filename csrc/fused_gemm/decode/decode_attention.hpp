// Decode attention over a KV cache (flash-decoding): a few new query tokens per sequence against
// k/v caches [B, S_max, Hkv, D] holding cache_seqlens[b] keys each (every cache full without them:
// fused_gemm.attention's short causal prefill, where Sq <= 16 new tokens see Sk keys).
//
// Memory-bound: the kernel's job is to stream each sequence's K and V once at full bandwidth.
//   * One CTA per (split of the keys, kv head, batch; and a group of 16 query rows): the G = Hq/Hkv
//     query heads of a kv head (times the new tokens) are the rows of one 16-row MMA tile, so a GQA
//     group shares every K/V read.
//   * The keys of a sequence are cut into `splits` ranges (from the cache's capacity, so that a
//     CUDA graph captured once serves any lengths), each streamed through shared memory by a
//     cp.async pipeline of kStages tiles of kBlockN keys; four warps take 16 keys of each tile:
//     S = Q K^T and O += P V with mma.sync m16n8k16 (CuTe's SM80 atoms; ldmatrix for the operands,
//     transposed for V), online softmax per warp, the warps merged at the end.
//   * With one split, the CTA writes O; otherwise each split writes its normalised O and its LSE
//     to a workspace and decode_combine_kernel merges them (a long sequence fills the GPU).
//   * Built with PDL (DecodeSpec.pdl), an unsplit launch (one kernel) uses programmatic stream
//     serialization: the kernel waits (griddepcontrol.wait) before its first global access, so it may
//     follow any kernel, whose launch gap and tail its own launch and set-up then overlap; it lets
//     the next kernel start once its tiles are done, before its warps merge.  Split launches (split
//     kernel + merge) run without: with both on PDL an H100 ran them 8-14% slower (perf/bench_decode.py,
//     B = 1 to 4 at 32k keys).  Both kernels wait all the same (a no-op after a plain launch).
// New token t of T is at position len - T + t: it sees keys j <= len - T + t (causal among the new
// tokens).  A sequence with no keys gets O = 0 and LSE = +inf.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "cute/arch/copy_sm75.hpp"
#include "cute/arch/copy_sm80.hpp"
#include "cute/arch/mma_sm80.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/numeric_types.h"
#include "fused_gemm/common/grid_dependency.hpp"
#include "fused_gemm/common/status.h"

namespace fused_gemm {

struct DecodeParams {
  void const *q;                 // [B, T, Hq, D]
  void const *k, *v;             // [B, S_max, Hkv, D]
  void *o;                       // [B, T, Hq, D]
  float *lse;                    // [B, Hq, T] or null
  float *o_part, *lse_part;      // workspace: [B, Hkv * row_groups, splits, 16, D], [..., 16]
  int const *seqlens;            // [B] int32, or null: every sequence holds max_len keys
  int64_t q_batch, q_token, q_head;
  int64_t k_batch, k_row, k_head;
  int64_t v_batch, v_row, v_head;
  int64_t o_batch, o_token, o_head;
  int64_t lse_batch, lse_head;
  int batch, tokens, num_heads, num_kv_heads, max_len, splits, row_groups;
  float scale_log2;              // softmax scale * log2(e)
};

// Query rows one kv head serves (its Hq / Hkv heads for every token), and the 16-row groups of them that
// are a split kernel CTA's rows each: of the C ABI's problem and of the kernels' params alike.
constexpr int kDecodeRows = 16;
template <class P>
CUTLASS_HOST_DEVICE int64_t query_rows_per_kv_head(P const &p) {
  return int64_t(p.tokens) * (p.num_heads / p.num_kv_heads);
}
template <class P>
CUTLASS_HOST_DEVICE int64_t row_groups_per_kv_head(P const &p) {
  return (query_rows_per_kv_head(p) + kDecodeRows - 1) / kDecodeRows;
}

template <class Element>
struct DecodeMma;
template <>
struct DecodeMma<cutlass::bfloat16_t> {
  using Atom = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct DecodeMma<cutlass::half_t> {
  using Atom = cute::SM80_16x8x16_F32F16F16F32_TN;
};

template <class Element, int kD, int kBlockN, int kStages>
struct DecodeKernel {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = kDecodeRows;                 // query rows per CTA (one MMA tile)
  static constexpr int kChunks = kD * int(sizeof(Element)) / 16;   // 16-byte chunks per key row
  static_assert(kBlockN == 16 * kWarps, "each warp takes 16 keys of a tile");
  static_assert(kChunks % 8 == 0, "rows of at least 8 chunks (the swizzle)");
  static constexpr int kTileElements = kBlockN * kD;
  static constexpr int kPipelineBytes = kStages * 2 * kTileElements * int(sizeof(Element));
  // The warps' merge: O rows padded to kD + 8 floats, so that the 8-byte stores of a warp's 8 rows (and
  // the 16-byte reads of a row) hit distinct banks; row-major kD floats put all 8 rows in one bank.
  static constexpr int kMergeStride = kD + 8;
  static constexpr int kMergeBytes = kWarps * kRows * kMergeStride * 4 + 2 * kWarps * kRows * 4;
  static constexpr int kSmemBytes = kPipelineBytes > kMergeBytes ? kPipelineBytes : kMergeBytes;
  // CTAs an SM that the registers must allow where a launch in waves takes only the shared memory it
  // fills (smem_bytes): 3 at D = 128 (ptxas would otherwise take 196 registers, room for two), 4 at 64.
  static constexpr int kMinBlocks = kD == 64 ? 4 : (kD == 128 ? 3 : 1);

  // The least a launch needs: the stages its longest key range fills (a range of t tiles touches
  // stages 0 .. min(t, kStages) - 1 only), or the warps' merge.  A grid of short ranges then fits
  // 3 CTAs an SM (registers bind) instead of kSmemBytes' 2.
  static int smem_bytes(DecodeParams const &p) {
    int64_t const per_split = (int64_t(p.max_len) + p.splits - 1) / p.splits;
    int64_t const tiles = (per_split + kBlockN - 1) / kBlockN;
    int const stages = tiles < 1 ? 1 : (tiles < kStages ? int(tiles) : kStages);
    int const pipeline = stages * 2 * kTileElements * int(sizeof(Element));
    return pipeline > kMergeBytes ? pipeline : kMergeBytes;
  }
  using Mma = typename DecodeMma<Element>::Atom;

  // Shared-memory element offset of (key row, 16-byte chunk): chunks XOR-swizzled by row so that
  // ldmatrix's eight rows hit eight different bank groups.
  CUTLASS_DEVICE static int swizzled(int row, int chunk) { return (row * kChunks + (chunk ^ (row & 7))) * 8; }

  CUTLASS_DEVICE static uint32_t smem_address(void const *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }

  CUTLASS_DEVICE static uint32_t pack(float a, float b) {
    cutlass::Array<float, 2> in;
    in[0] = a;
    in[1] = b;
    auto out = cutlass::NumericArrayConverter<Element, float, 2>{}(in);
    return reinterpret_cast<uint32_t const &>(out);
  }

  // One tile of K and V rows [key0, key0 + kBlockN) into stage `stage`; rows past `end` are zeros.
  CUTLASS_DEVICE static void load_tile(DecodeParams const &p, Element *smem, int stage, Element const *k,
                                       Element const *v, int key0, int end) {
    Element *sk = smem + stage * 2 * kTileElements;
    Element *sv = sk + kTileElements;
    CUTLASS_PRAGMA_UNROLL
    for (int i = threadIdx.x; i < kBlockN * kChunks; i += kThreads) {
      int const row = i / kChunks, chunk = i % kChunks;
      int const key = key0 + row;
      bool const valid = key < end;
      int64_t const krow = valid ? key : 0;
      using Copy = cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t, cute::uint128_t>;
      Copy::copy(*reinterpret_cast<cute::uint128_t const *>(k + krow * p.k_row + chunk * 8),
                 *reinterpret_cast<cute::uint128_t *>(sk + swizzled(row, chunk)), valid);
      Copy::copy(*reinterpret_cast<cute::uint128_t const *>(v + krow * p.v_row + chunk * 8),
                 *reinterpret_cast<cute::uint128_t *>(sv + swizzled(row, chunk)), valid);
    }
  }

  CUTLASS_DEVICE static void run(DecodeParams const &p, char *smem_raw) {
    Element *smem = reinterpret_cast<Element *>(smem_raw);
    int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int const g = lane / 4, c = lane % 4;                    // the MMA fragments' row and column groups
    int const split = blockIdx.x, b = blockIdx.z;
    int const kv_head = blockIdx.y / p.row_groups, row_group = blockIdx.y % p.row_groups;
    int const group = p.num_heads / p.num_kv_heads;
    int const rows = int(query_rows_per_kv_head(p));
    Element const *k = static_cast<Element const *>(p.k) + b * p.k_batch + kv_head * p.k_head;
    Element const *v = static_cast<Element const *>(p.v) + b * p.v_batch + kv_head * p.v_head;
    wait_for_previous_grid();                                // q, the caches and the lengths may be its output
    int const len_given = p.seqlens ? p.seqlens[b] : p.max_len;
    // An unsplit CTA's keys start at 0 whatever the length, so its first stage goes out now, bounded by
    // the cache's capacity, not after the length has come back from memory: one round trip less before
    // the first tile (H100, B = 32: 1k keys 47.2 against 48.6 us).  Only the first: a short sequence in
    // a long cache then reads at most one stage's keys past its length (all of the early stages, 128
    // keys at D = 128, cost 16 keys 1.2 us); the rest go out once the length is known.  Rows past the
    // length that it brings are zeroed before use, below.
    bool const early = p.splits == 1;
    if (early) {
      load_tile(p, smem, 0, k, v, 0, p.max_len);
      cute::cp_async_fence();
    }
    // Q as the A operand: rows g and g + 8 of the tile, dims 16kk + 2c (+1, +8, +9); loaded before the
    // length is used, so that its latency overlaps the length's and the first stages'.
    int row_index[2], token_of[2];
    Element const *q_row[2];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      int const r = row_group * kRows + g + 8 * h;
      row_index[h] = r;
      token_of[h] = r < rows ? r / group : 0;
      int const head = kv_head * group + (r < rows ? r % group : 0);
      q_row[h] = static_cast<Element const *>(p.q) + b * p.q_batch + token_of[h] * p.q_token + head * p.q_head;
    }
    uint32_t qa[kD / 16][4];
    CUTLASS_PRAGMA_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        int const h = i % 2, dim = 16 * kk + 2 * c + 8 * (i / 2);
        // A plain load, not __ldg: with PDL the previous kernel may have written q during this one's life.
        qa[kk][i] = row_index[h] < rows ? *reinterpret_cast<uint32_t const *>(q_row[h] + dim) : 0u;
      }
    }

    // Lengths past the cache are clamped; without lengths every cache is full.
    int const len = min(max(len_given, 0), p.max_len);
    int const per_split = (len + p.splits - 1) / p.splits;
    int const chunk = (per_split + kBlockN - 1) / kBlockN * kBlockN;
    int const begin = split * chunk;
    int const end = min(len, begin + chunk);
    int const tiles = end > begin ? (end - begin + kBlockN - 1) / kBlockN : 0;
    CUTLASS_PRAGMA_UNROLL
    for (int s = early ? 1 : 0; s < kStages - 1; ++s) {
      if (s < tiles) load_tile(p, smem, s, k, v, begin + s * kBlockN, end);
      cute::cp_async_fence();
    }

    float acc[kD / 8][4];                                    // O: dims 8d + 2c (+1) of rows g, g + 8
    CUTLASS_PRAGMA_UNROLL
    for (int d = 0; d < kD / 8; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    // The last key each of the thread's rows may see (causal among the new tokens).
    int last[2];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) last[h] = len - p.tokens + token_of[h];

    for (int t = 0; t < tiles; ++t) {
      if (t + kStages - 1 < tiles) load_tile(p, smem, (t + kStages - 1) % kStages, k, v, begin + (t + kStages - 1) * kBlockN, end);
      cute::cp_async_fence();
      cute::cp_async_wait<kStages - 1>();
      __syncthreads();
      Element *const stage = smem + (t % kStages) * 2 * kTileElements;
      if (early && t == 0 && kBlockN > end) {
        // The early stage with rows past the length: zero their V.  (Their scores are masked to -inf, so
        // P is 0 there, but a stale cache slot may hold NaN, and 0 * NaN is NaN.)
        int const first = end;
        for (int i = threadIdx.x; i < (kBlockN - first) * kChunks; i += kThreads) {
          *reinterpret_cast<uint4 *>(stage + kTileElements + swizzled(first + i / kChunks, i % kChunks)) =
              make_uint4(0u, 0u, 0u, 0u);
        }
        __syncthreads();
      }
      Element const *sk = stage;
      Element const *sv = sk + kTileElements;
      int const key0 = begin + t * kBlockN + 16 * warp;      // this warp's 16 keys

      // S = Q K^T: two 8-key halves, D/16 k-steps; one ldmatrix.x4 gives both halves' B fragments.
      float s[2][4] = {};
      CUTLASS_PRAGMA_UNROLL
      for (int kk = 0; kk < kD / 16; ++kk) {
        int const key = 16 * warp + (lane / 16) * 8 + lane % 8;
        int const chunk = 2 * kk + (lane / 8) % 2;
        uint32_t bk[4];
        cute::SM75_U32x4_LDSM_N::copy(*reinterpret_cast<cute::uint128_t const *>(sk + swizzled(key, chunk)),
                                      bk[0], bk[1], bk[2], bk[3]);
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 2; ++j) {
          Mma::fma(s[j][0], s[j][1], s[j][2], s[j][3], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], bk[2 * j],
                   bk[2 * j + 1], s[j][0], s[j][1], s[j][2], s[j][3]);
        }
      }
      // Mask, then the online softmax of rows g (h = 0) and g + 8 (h = 1) over this warp's keys.
      float row_max[2] = {-INFINITY, -INFINITY};
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 2; ++j) {
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < 4; ++e) {
          int const h = e / 2, key = key0 + 8 * j + 2 * c + e % 2;
          if (key >= end || key > last[h]) s[j][e] = -INFINITY;
          row_max[h] = fmaxf(row_max[h], s[j][e]);
        }
      }
      float scale_old[2];
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
        row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
        float const m_new = fmaxf(m[h], row_max[h]);
        float const base = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;   // no key yet: nothing to scale
        scale_old[h] = exp2f(m[h] * p.scale_log2 - base);
        m[h] = m_new;
        l[h] *= scale_old[h];
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 2; ++j) {
          CUTLASS_PRAGMA_UNROLL
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[j][e] = exp2f(s[j][e] * p.scale_log2 - base);
            l[h] += s[j][e];
          }
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int d = 0; d < kD / 8; ++d) {
        acc[d][0] *= scale_old[0], acc[d][1] *= scale_old[0];
        acc[d][2] *= scale_old[1], acc[d][3] *= scale_old[1];
      }
      // O += P V: P's two 8-key halves are the A fragment of one k-step; V through ldmatrix.trans.
      uint32_t const pa[4] = {pack(s[0][0], s[0][1]), pack(s[0][2], s[0][3]), pack(s[1][0], s[1][1]),
                              pack(s[1][2], s[1][3])};
      CUTLASS_PRAGMA_UNROLL
      for (int dd = 0; dd < kD / 16; ++dd) {
        int const matrix = lane / 8;
        int const key = 16 * warp + (matrix % 2) * 8 + lane % 8;
        uint32_t bv[4];
        cute::SM75_U16x8_LDSM_T::copy(*reinterpret_cast<cute::uint128_t const *>(sv + swizzled(key, 2 * dd + matrix / 2)),
                                      bv[0], bv[1], bv[2], bv[3]);
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 2; ++j) {
          float *o = acc[2 * dd + j];
          Mma::fma(o[0], o[1], o[2], o[3], pa[0], pa[1], pa[2], pa[3], bv[2 * j], bv[2 * j + 1], o[0], o[1], o[2], o[3]);
        }
      }
      __syncthreads();                                       // the stage is reloaded next
    }
    allow_next_grid();
    cute::cp_async_wait<0>();
    __syncthreads();

    // Merge the four warps: each row's max and sum, then the rescaled O summed in shared memory.
    float *merge_o = reinterpret_cast<float *>(smem_raw);    // [warps][rows][kMergeStride]
    float *merge_m = merge_o + kWarps * kRows * kMergeStride;   // [warps][rows]
    float *merge_l = merge_m + kWarps * kRows;
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
      if (c == 0) {
        merge_m[warp * kRows + g + 8 * h] = m[h];
        merge_l[warp * kRows + g + 8 * h] = l[h];
      }
    }
    __syncthreads();
    float factor[2];
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      float top = -INFINITY;
      CUTLASS_PRAGMA_UNROLL
      for (int w = 0; w < kWarps; ++w) top = fmaxf(top, merge_m[w * kRows + g + 8 * h]);
      factor[h] = m[h] == -INFINITY ? 0.f : exp2f((m[h] - top) * p.scale_log2);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int d = 0; d < kD / 8; ++d) {
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        *reinterpret_cast<float2 *>(merge_o + (warp * kRows + g + 8 * h) * kMergeStride + 8 * d + 2 * c) =
            make_float2(acc[d][2 * h] * factor[h], acc[d][2 * h + 1] * factor[h]);
      }
    }
    __syncthreads();

    // Row r of the tile (8 threads a row), dims 32 j + 4 (tid % 8) .. + 3: each quarter-warp reads 128
    // contiguous bytes of a row.
    int const r = threadIdx.x / 8, dim0 = 4 * (threadIdx.x % 8);
    int const row = row_group * kRows + r;
    if (row >= rows) return;
    float top = -INFINITY, sum = 0.f;
    CUTLASS_PRAGMA_UNROLL
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, merge_m[w * kRows + r]);
    CUTLASS_PRAGMA_UNROLL
    for (int w = 0; w < kWarps; ++w) {
      float const mw = merge_m[w * kRows + r];
      sum += mw == -INFINITY ? 0.f : merge_l[w * kRows + r] * exp2f((mw - top) * p.scale_log2);
    }
    float const inv = sum > 0.f ? 1.f / sum : 0.f;
    // Natural-log LSE of the scaled scores; +inf for no keys (flash-attn's convention).
    float const lse = sum > 0.f ? (top * p.scale_log2 + log2f(sum)) * 0.69314718055994531f : INFINITY;
    int const token = row / group, head = kv_head * group + row % group;
    int64_t const slot = ((int64_t(b) * gridDim.y + blockIdx.y) * p.splits + split) * kRows + r;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kD / 32; ++j) {
      int const dim = 32 * j + dim0;
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
      CUTLASS_PRAGMA_UNROLL
      for (int w = 0; w < kWarps; ++w) {
        float4 const x = *reinterpret_cast<float4 const *>(merge_o + (w * kRows + r) * kMergeStride + dim);
        a.x += x.x, a.y += x.y, a.z += x.z, a.w += x.w;
      }
      if (p.splits == 1) {
        Element *o = static_cast<Element *>(p.o) + b * p.o_batch + token * p.o_token + head * p.o_head + dim;
        *reinterpret_cast<uint2 *>(o) = make_uint2(pack(a.x * inv, a.y * inv), pack(a.z * inv, a.w * inv));
      } else {
        *reinterpret_cast<float4 *>(p.o_part + slot * kD + dim) = make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv);
      }
    }
    if (dim0 == 0) {
      if (p.splits > 1) {
        p.lse_part[slot] = sum > 0.f ? lse : -INFINITY;
      } else if (p.lse != nullptr) {
        p.lse[b * p.lse_batch + head * p.lse_head + token] = lse;
      }
    }
  }
};

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, Kernel::kMinBlocks) decode_split_kernel(DecodeParams const p) {
  extern __shared__ __align__(128) char smem[];
  Kernel::run(p, smem);
}

// Merges the splits of one query row of a (batch, kv head, row group): O = sum_s exp(lse_s - lse) O_s
// with lse = log sum_s exp(lse_s).  One CTA per row, one thread per pair of dims: a single long
// sequence still has a merge spread over the GPU.
template <class Element, int kD>
__global__ void __launch_bounds__(kD / 2) decode_combine_kernel(DecodeParams const p) {
  constexpr int kRows = kDecodeRows;
  int const r = blockIdx.x, slot_y = blockIdx.y, b = blockIdx.z;
  int const kv_head = slot_y / p.row_groups, row_group = slot_y % p.row_groups;
  int const group = p.num_heads / p.num_kv_heads;
  int const row = row_group * kRows + r;
  if (row >= int(query_rows_per_kv_head(p))) return;
  // Launched without PDL (see the top), so these return at once; they keep the kernel correct if a
  // launch ever adds it.
  wait_for_previous_grid();
  allow_next_grid();
  int const dim = 2 * threadIdx.x;
  int64_t const base = (int64_t(b) * gridDim.y + slot_y) * p.splits;
  // kBatch splits' LSEs and O's loaded at once, then merged with a running maximum: one round trip to
  // L2 a batch.  (A pass for the maximum and one for the sums took 1 + S/2 dependent round trips: the
  // O loads waited for the maximum, and ptxas kept two of them in flight.)
  constexpr int kBatch = 8;
  float top = -INFINITY, sum = 0.f, a0 = 0.f, a1 = 0.f;
  for (int s0 = 0; s0 < p.splits; s0 += kBatch) {
    float lse[kBatch];
    float2 o[kBatch];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) {
      int64_t const slot = (base + s0 + j) * kRows + r;
      bool const valid = s0 + j < p.splits;
      lse[j] = valid ? p.lse_part[slot] : -INFINITY;
      o[j] = valid ? *reinterpret_cast<float2 const *>(p.o_part + slot * kD + dim) : make_float2(0.f, 0.f);
    }
    float next = top;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) next = fmaxf(next, lse[j]);
    if (next == -INFINITY) continue;                 // no keys so far
    float const rescale = __expf(top - next);         // 0 while top is -inf (sums still 0)
    sum *= rescale, a0 *= rescale, a1 *= rescale;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) {
      float const w = __expf(lse[j] - next);          // 0 for a split without keys (-inf)
      sum += w;
      a0 += w * o[j].x;
      a1 += w * o[j].y;
    }
    top = next;
  }
  float const inv = sum > 0.f ? 1.f / sum : 0.f;
  int const token = row / group, head = kv_head * group + row % group;
  Element *o = static_cast<Element *>(p.o) + b * p.o_batch + token * p.o_token + head * p.o_head + dim;
  cutlass::Array<float, 2> in;
  in[0] = a0 * inv;
  in[1] = a1 * inv;
  *reinterpret_cast<cutlass::Array<Element, 2> *>(o) = cutlass::NumericArrayConverter<Element, float, 2>{}(in);
  if (p.lse != nullptr && dim == 0) {
    p.lse[b * p.lse_batch + head * p.lse_head + token] = sum > 0.f ? top + __logf(sum) : INFINITY;
  }
}

// The launcher behind the C exports (same interface as Sm90Launcher): Kernel (generated) provides
// Problem, Element, kD, kBlockN, kStages.  The split count is the caller's (Python picks it from
// the cache's capacity and the batch), so a graph captured once serves any lengths.
template <class Kernel>
struct DecodeLauncher {
  using Problem = typename Kernel::Problem;
  using Split = DecodeKernel<typename Kernel::Element, Kernel::kD, Kernel::kBlockN, Kernel::kStages>;
  static constexpr int kRows = Split::kRows;

  static DecodeParams params(Problem const &p) {
    DecodeParams d{};
    d.q = p.q, d.k = p.k, d.v = p.v, d.o = p.o, d.lse = static_cast<float *>(p.lse);
    d.seqlens = static_cast<int const *>(p.seqlens);
    d.q_batch = p.q_batch, d.q_token = p.q_token, d.q_head = p.q_head;
    d.k_batch = p.k_batch, d.k_row = p.k_row, d.k_head = p.k_head;
    d.v_batch = p.v_batch, d.v_row = p.v_row, d.v_head = p.v_head;
    d.o_batch = p.o_batch, d.o_token = p.o_token, d.o_head = p.o_head;
    d.lse_batch = p.lse_batch, d.lse_head = p.lse_head;
    d.batch = p.batch, d.tokens = p.tokens, d.num_heads = p.num_heads, d.num_kv_heads = p.num_kv_heads;
    d.max_len = p.max_len, d.splits = p.splits;
    d.row_groups = int(row_groups_per_kv_head(p));
    d.scale_log2 = p.scale * 1.4426950408889634f;
    auto *part = static_cast<float *>(p.workspace);
    d.o_part = part;
    d.lse_part = part + parts(p) * Kernel::kD;
    return d;
  }

  static int64_t parts(Problem const &p) {  // (batch, kv head, row group, split, row) slots
    return int64_t(p.batch) * p.num_kv_heads * row_groups_per_kv_head(p) * p.splits * kRows;
  }

  static size_t workspace_bytes(Problem const &p) {
    return p.splits > 1 ? size_t(parts(p)) * (Kernel::kD + 1) * sizeof(float) : 0;
  }

  static int can_implement(Problem const &p) {
    if (p.num_kv_heads < 1 || p.num_heads % p.num_kv_heads) return fail(FG_ERR_INVALID, "heads: Hq % Hkv != 0");
    if (p.splits < 1 || p.tokens < 1 || p.batch < 1) return fail(FG_ERR_INVALID, "splits, tokens, batch >= 1");
    if (p.batch > 65535 || p.num_kv_heads * row_groups_per_kv_head(p) > 65535) {
      return fail(FG_ERR_INVALID, "batch or kv heads x row groups past the grid's 65535");
    }
    return FG_OK;
  }

  static int workspace_size(Problem const &p, size_t *bytes) {
    *bytes = workspace_bytes(p);
    return FG_OK;
  }

  // CTAs of the split kernel resident at once with kSmemBytes each, per device (set by prepare_device,
  // which the launcher calls with `device` current: the occupancy query reads the current device).
  static std::atomic<int> &resident(int device) {
    static std::atomic<int> slots[kMaxDevices] = {};
    return slots[device];
  }

  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) return fail(FG_ERR_INVALID, "device ordinal out of range");
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    cudaError_t err = cudaFuncSetAttribute(decode_split_kernel<Split>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           Split::kSmemBytes);
    if (err == cudaSuccess) {
      cudaFuncAttributes attributes;   // loads the combine kernel's module now, not inside a capture
      err = cudaFuncGetAttributes(&attributes, decode_combine_kernel<typename Kernel::Element, Kernel::kD>);
    }
    int sms = 0, per_sm = 0;
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) {
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_split_kernel<Split>, Split::kThreads,
                                                          Split::kSmemBytes);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("preparing the decode kernels: ") + cudaGetErrorString(err));
    }
    resident(device).store(sms * per_sm, std::memory_order_relaxed);
    prepared[device].store(true, std::memory_order_release);
    return FG_OK;
  }

  static int run(Problem const &p) {
    if (int rc = can_implement(p)) return rc;
    if (p.workspace_bytes < workspace_bytes(p)) {
      return fail(FG_ERR_INVALID, "workspace too small: need " + std::to_string(workspace_bytes(p)) + " bytes");
    }
    if (int rc = prepare_device(p.device)) return rc;
    DecodeParams const d = params(p);
    auto stream = static_cast<cudaStream_t>(p.stream);
    dim3 const grid(d.splits, d.num_kv_heads * d.row_groups, d.batch);
    // A grid in waves (short prefills: thousands of one-tile CTAs) takes only the shared memory it
    // fills, so more CTAs fit an SM: 1.15-1.18x at Sq = Sk <= 16 (H100, perf/short_attention.py).  One
    // wave keeps kSmemBytes, which spreads it over every SM: packed 3 an SM, B = 32 decode over short
    // caches ran ~1 us slower.
    int64_t const ctas = int64_t(grid.x) * grid.y * grid.z;
    int const one_wave = resident(p.device).load(std::memory_order_relaxed);
    int const smem = ctas > one_wave ? Split::smem_bytes(d) : Split::kSmemBytes;
    cudaError_t err = launch_kernel(decode_split_kernel<Split>, grid, dim3(Split::kThreads), smem, stream,
                                    (kFeatures & FG_FEATURE_PDL) && d.splits == 1, 1, d);
    if (err == cudaSuccess && d.splits > 1) {
      // A CTA per query row: the rows a kv head has (T x G, when fewer than a group's 16).
      int const rows = int(query_rows_per_kv_head(d));
      err = launch_kernel(decode_combine_kernel<typename Kernel::Element, Kernel::kD>,
                          dim3(rows < kRows ? rows : kRows, d.num_kv_heads * d.row_groups, d.batch),
                          dim3(Kernel::kD / 2), 0, stream, false, 1, d);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("launch: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm
