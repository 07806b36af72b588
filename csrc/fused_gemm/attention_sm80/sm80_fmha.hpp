// Flash-attention forward on sm80, built on CUTLASS example 41 (examples/41_fused_multi_head_attention,
// xformers' memory-efficient attention, shipped in the nvidia-cutlass wheel): its mma.sync kernel
// (AttentionKernel::attention_kernel: QK^T, online softmax, PV, epilogue) runs unchanged; what
// example 41's own entry point (Params::advance_to_block) does per CTA is ours, because flash-attn's
// contract needs more than it gives:
//
//   * GQA/MQA: q head h reads k/v head h / (Hq / Hkv) through per-block pointers (no copies);
//     example 41 offsets K/V by h * strideH, and takes a zero head stride for "decode with one
//     K/V head" (a path that re-lays out Q and O, and is wrong for a block with one query left);
//   * flash-attn's layouts: O of any (row, batch, head) strides, LSE in [B, Hq, Sq] or [Hq, total_q]
//     (example 41 pads each head's LSE row to a multiple of 32 with +inf, which would overwrite the
//     next head's or sequence's values in a compact layout: we write LSE ourselves);
//   * causal bottom-right with Sq > Sk: example 41 keeps the diagonal offset unsigned and compares
//     it unsigned, so a tile whose first rows see no key is left unmasked.  Here such rows are
//     written as flash-attn does (O = 0, LSE = +inf) and the kernel runs on the tile's remaining
//     rows only, with the offset re-based so that its first row sees key 0;
//   * a sequence with no keys (varlen) gets O = 0 and LSE = +inf instead of 0/0;
//   * D > block_n (D = 256): O accumulates across K/V tiles in the caller's float workspace
//     [tokens, Hq, D] (example 41's "gmem" variant), indexed like O.
//
// Lengths, pointers and strides come in flash-attn's terms (the attention family's ABI, the same
// as the sm90 kernels'); per-block offsets are 64-bit, offsets inside a sequence are 32-bit in
// example 41 (Python refuses problems past that).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernel_forward.h"

#include "fused_gemm/common/status.h"

namespace fused_gemm {

// Example 41's kernel as we build it: rows 16-byte aligned (Python checks), no dropout, no bias.
// kHeadDim <= kBlockN keeps O in registers across K/V tiles (kSingleValueIteration); otherwise O
// accumulates in a float buffer in global memory between K/V tiles (Sm80FaParams::o_accum).
template <class Element, int kBlockM, int kBlockN, int kHeadDim>
using Sm80Attention = AttentionKernel<Element, cutlass::arch::Sm80, /*isAligned=*/true, kBlockM, kBlockN, kHeadDim,
                                      /*kSupportsDropout=*/false, /*kSupportsBias=*/false>;

// One problem for every CTA; each derives its sequence, head and rows from blockIdx.
struct Sm80FaParams {
  void const *q, *k, *v;
  void *o;
  float *lse;                          // null: not written
  float *o_accum;                      // [rows of O, Hq, D] when AK::kNeedsOutputAccumulatorBuffer
  int const *cu_q, *cu_k;              // varlen: [B + 1] cumulative lengths, else null
  int64_t q_row, q_batch, q_head;      // strides in elements
  int64_t k_row, k_batch, k_head;
  int64_t v_row, v_batch, v_head;
  int64_t o_row, o_batch, o_head;
  int64_t lse_batch, lse_head;
  int group;                           // q heads per k/v head
  int max_q, max_k;                    // fixed lengths (ignored for varlen)
  float scale;
};

// What the LSE write after attention_kernel needs, parked in shared memory past the kernel's own
// storage: kept in registers across attention_kernel, these few values made the 64x128 tile spill.
struct Sm80LseTail {
  float *lse;                          // this tile's first row that saw keys, or null
  int rows;
};

template <class AK>
constexpr int sm80_tail_offset() {
  return int((sizeof(typename AK::SharedStorage) + 15) / 16 * 16);
}

// Grid (Q tiles of kQueriesPerBlock rows, Hq, B), block (32, warps), dynamic shared memory
// sm80_tail_offset<AK>() + sizeof(Sm80LseTail); example 41 launches the same grid and block.
// blockIdx.x must stay the Q tile: attention_kernel reads it for the causal mask.
template <class AK, bool kCausal>
__global__ void __launch_bounds__(AK::kNumThreads, AK::kMinBlocksPerSm) sm80_attention_kernel(Sm80FaParams const p) {
  using Element = typename AK::scalar_t;
  constexpr int kD = AK::kMaxK;
  constexpr int kRowChunks = kD / 8;   // 16-byte stores per row of O
  int const b = blockIdx.z, h = blockIdx.y;
  int const m0 = blockIdx.x * AK::kQueriesPerBlock;
  bool const varlen = p.cu_q != nullptr;
  int64_t q_start = 0, k_start = 0;
  int len_q = p.max_q, len_k = p.max_k;
  if (varlen) {
    q_start = __ldg(p.cu_q + b);
    k_start = __ldg(p.cu_k + b);
    len_q = __ldg(p.cu_q + b + 1) - int(q_start);
    len_k = __ldg(p.cu_k + b + 1) - int(k_start);
  }
  if (m0 >= len_q) return;             // a tile past this sequence's end (varlen, or the grid's rounding)
  int const rows = cutlass::fast_min(int(AK::kQueriesPerBlock), len_q - m0);

  // Row m0 + r sees keys j <= diag + r (bottom-right causal); `skip` leading rows see none.
  int const diag = m0 + len_k - len_q;
  int skip = len_k > 0 ? 0 : rows;
  if (kCausal) skip = cutlass::fast_max(skip, cutlass::fast_min(rows, -diag));
  int const keys = kCausal ? cutlass::fast_min(len_k, diag + rows) : len_k;   // what the last row sees

  Element *o = static_cast<Element *>(p.o) + (varlen ? q_start * p.o_row : b * p.o_batch) + h * p.o_head +
               int64_t(m0) * p.o_row;
  float *lse = p.lse == nullptr ? nullptr
                                : p.lse + h * p.lse_head + (varlen ? q_start : b * p.lse_batch) + m0;
  int const tid = AK::thread_id();
  if (skip > 0) {
    for (int i = tid; i < skip * kRowChunks; i += AK::kNumThreads) {
      *reinterpret_cast<uint4 *>(o + (i / kRowChunks) * p.o_row + (i % kRowChunks) * 8) = make_uint4(0, 0, 0, 0);
    }
    if (lse != nullptr) {
      for (int r = tid; r < skip; r += AK::kNumThreads) lse[r] = INFINITY;
    }
    if (skip == rows) return;
  }

  int const kv_head = h / p.group;
  auto const *q = static_cast<Element const *>(p.q) + (varlen ? q_start * p.q_row : b * p.q_batch) + h * p.q_head +
                  int64_t(m0 + skip) * p.q_row;
  auto const *k = static_cast<Element const *>(p.k) + (varlen ? k_start * p.k_row : b * p.k_batch) +
                  kv_head * p.k_head;
  auto const *v = static_cast<Element const *>(p.v) + (varlen ? k_start * p.v_row : b * p.v_batch) +
                  kv_head * p.v_head;

  // What advance_to_block would leave, for this tile's rows that see keys.  The kernel masks
  // column c of local row r when c > blockIdx.x * kQueriesPerBlock + r + offset - tile start, so
  // the offset is re-based by `skip` (unsigned arithmetic, as the kernel's own).
  typename AK::Params a;
  a.query_ptr = warp_uniform(const_cast<Element *>(q));
  a.key_ptr = warp_uniform(const_cast<Element *>(k));
  a.value_ptr = warp_uniform(const_cast<Element *>(v));
  a.output_ptr = warp_uniform(o + int64_t(skip) * p.o_row);
  // Row stride of the O accumulator is head_dim_value * num_heads (attention_kernel's own).
  a.output_accum_ptr = AK::kNeedsOutputAccumulatorBuffer
                           ? warp_uniform(p.o_accum + ((varlen ? q_start : int64_t(b) * p.max_q) + m0 + skip) *
                                                          int64_t(gridDim.y) * kD + int64_t(h) * kD)
                           : nullptr;
  a.logsumexp_ptr = nullptr;           // written below, in flash-attn's layout
  a.scale = p.scale;
  a.head_dim = kD;
  a.head_dim_value = kD;
  a.num_queries = warp_uniform(rows - skip);
  a.num_keys = warp_uniform(keys);
  a.num_keys_absolute = a.num_keys;
  a.custom_mask_type = kCausal ? AK::CausalFromBottomRight : AK::NoCustomMask;
  a.causal_diagonal_offset = uint32_t(len_k - len_q + skip);
  a.q_strideM = int32_t(p.q_row);
  a.k_strideM = int32_t(p.k_row);
  a.v_strideM = int32_t(p.v_row);
  a.o_strideM = int32_t(p.o_row);
  a.num_heads = gridDim.y;
  a.num_batches = 0;                   // as advance_to_block leaves it
  extern __shared__ char smem_buffer[];
  auto *tail = reinterpret_cast<Sm80LseTail *>(smem_buffer + sm80_tail_offset<AK>());
  if (tid == 0) *tail = {lse == nullptr ? nullptr : lse + skip, rows - skip};   // read after its barriers
  AK::attention_kernel(a);

  // LSE from the kernel's final row max (log2 domain, scaled) and row sum, still in shared memory
  // (attention_kernel's last loop iteration ended on a barrier after writing them).
  Sm80LseTail const done = *tail;
  int const row = AK::thread_id();
  if (done.lse != nullptr && row < done.rows) {
    auto const &storage = *reinterpret_cast<typename AK::SharedStorage const *>(smem_buffer);
    done.lse[row] = storage.mi[row] * float(M_LN2) + cutlass::fast_log(storage.s_prime[row]);
  }
}

// The launcher behind the C exports (same interface as Sm90Launcher): Kernel (generated) provides
// Problem (the attention ABI), Attention (an Sm80Attention) and kCausal.
template <class Kernel>
struct Sm80AttentionLauncher {
  using Problem = typename Kernel::Problem;
  using AK = typename Kernel::Attention;
  static constexpr int kSmemBytes = sm80_tail_offset<AK>() + int(sizeof(Sm80LseTail));
  static constexpr int kInt32Max = 0x7fffffff;

  static constexpr auto kernel() { return &sm80_attention_kernel<AK, Kernel::kCausal>; }

  // Python checks all of this first (ValueError); this is the library's own guard.
  static int can_implement(Problem const &p) {
    if (p.device < 0 || p.device >= kMaxDevices) {
      return fail(FG_ERR_INVALID, "device ordinal " + std::to_string(p.device) + " out of range");
    }
    if (p.head_dim != AK::kMaxK) {
      return fail(FG_ERR_INVALID, "head_dim " + std::to_string(p.head_dim) + ": this kernel takes " +
                                      std::to_string(AK::kMaxK));
    }
    if (p.num_kv_heads < 1 || p.num_heads % p.num_kv_heads) return fail(FG_ERR_INVALID, "heads: Hq % Hkv != 0");
    if (p.batch < 1 || p.batch > 65535 || p.num_heads < 1 || p.num_heads > 65535) {
      return fail(FG_ERR_INVALID, "batch and heads must lie in [1, 65535] (CUDA grid)");
    }
    if (!(p.scale > 0.f)) return fail(FG_ERR_INVALID, "scale must be positive");
    // attention_kernel's offsets inside a sequence are 32-bit: rows * row stride
    int64_t const accum_row = AK::kNeedsOutputAccumulatorBuffer ? int64_t(p.num_heads) * AK::kMaxK : 0;
    if (int64_t(p.max_q) * std::max({p.q_row, p.o_row, accum_row}) > kInt32Max ||
        int64_t(p.max_k) * std::max(p.k_row, p.v_row) > kInt32Max) {
      return fail(FG_ERR_INVALID, "a sequence spans 2^31 elements or more (the sm80 kernel's offsets are 32-bit)");
    }
    return FG_OK;
  }

  // The O accumulator, float [rows of O, Hq, D] (rows: total_q, or B * Sq); none when O stays in
  // registers.
  static size_t workspace_bytes(Problem const &p) {
    if (!AK::kNeedsOutputAccumulatorBuffer) return 0;
    int64_t const rows = p.cu_q != nullptr ? int64_t(p.total_q) : int64_t(p.batch) * p.max_q;
    return size_t(rows) * p.num_heads * AK::kMaxK * sizeof(float);
  }

  static int workspace_size(Problem const &p, size_t *bytes) {
    if (int rc = can_implement(p)) return rc;
    *bytes = workspace_bytes(p);
    return FG_OK;
  }

  // Once per device, outside any graph capture: load the module (the driver compiles the PTX
  // here on a GPU newer than the SASS we carry) and raise the dynamic shared-memory limit.
  static int prepare_device(int device) {
    static std::atomic<bool> prepared[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) {
      return fail(FG_ERR_INVALID, "device ordinal " + std::to_string(device) + " out of range");
    }
    if (prepared[device].load(std::memory_order_acquire)) return FG_OK;
    int current = -1;
    cudaGetDevice(&current);
    if (current != device) {
      return fail(FG_ERR_INVALID, "prepare: device " + std::to_string(device) + " is not the current device (" +
                                      std::to_string(current) + ")");
    }
    cudaFuncAttributes attributes;
    cudaError_t err = cudaFuncGetAttributes(&attributes, kernel());
    if (err == cudaSuccess && kSmemBytes >= (48 << 10)) {
      err = cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("preparing the sm80 attention kernel: ") + cudaGetErrorString(err));
    }
    prepared[device].store(true, std::memory_order_release);
    return FG_OK;
  }

  // The launch path: integer checks, no device query, no allocation, no sync.
  static int run(Problem const &p) {
    if (int rc = can_implement(p)) return rc;
    if (p.workspace_bytes < workspace_bytes(p)) {
      return fail(FG_ERR_INVALID, "workspace too small: need " + std::to_string(workspace_bytes(p)) + " bytes, got " +
                                      std::to_string(p.workspace_bytes));
    }
    if (int rc = prepare_device(p.device)) return rc;
    Sm80FaParams const params{p.q, p.k, p.v, p.o, static_cast<float *>(p.lse), static_cast<float *>(p.workspace),
                              static_cast<int const *>(p.cu_q), static_cast<int const *>(p.cu_k),
                              p.q_row, p.q_batch, p.q_head, p.k_row, p.k_batch, p.k_head,
                              p.v_row, p.v_batch, p.v_head, p.o_row, p.o_batch, p.o_head,
                              p.lse_batch, p.lse_head, p.num_heads / p.num_kv_heads, p.max_q, p.max_k, p.scale};
    dim3 const grid((p.max_q + AK::kQueriesPerBlock - 1) / AK::kQueriesPerBlock, p.num_heads, p.batch);
    dim3 const block(AK::kWarpSize, AK::kNumWarpsPerBlock, 1);
    void *args[] = {const_cast<Sm80FaParams *>(&params)};
    cudaError_t err = cudaLaunchKernel(reinterpret_cast<void const *>(kernel()), grid, block, args, kSmemBytes,
                                       static_cast<cudaStream_t>(p.stream));
    if (err != cudaSuccess) {
      cudaGetLastError();
      return fail(FG_ERR_CUDA, std::string("launch: ") + cudaGetErrorString(err));
    }
    return FG_OK;
  }
};

}  // namespace fused_gemm
