// Flash-attention forward on sm90, built on CUTLASS example 88 (examples/88_hopper_fmha, shipped in
// the nvidia-cutlass wheel): its mainloop (TMA loads, wgmma QK^T and PV, online softmax) and tile
// schedulers, run by our kernel (sm90_fmha_kernel.hpp: example 88's roles, the epilogues' order a
// choice), with our own pieces where flash-attn's contract needs more:
//
//   * FaMask: any K length (the last tile masked), causal aligned bottom-right (query i of Sq sees
//     keys j <= i + Sk - Sq, flash-attn's convention for chunked prefill), never a zero-trip tile
//     (the mainloop always consumes one K/V stage: zero would hang; a row with no keys gets O = 0
//     and LSE = +inf);
//   * FaMainloop: a caller-given softmax scale; GQA/MQA by reading K/V head h / (Hq / Hkv) (no
//     copy); variable-length packed batches (cu_seqlens); per-sequence lengths for the masks;
//   * FaMainloop::overlapped: a second mainloop for short tiles, QK^T(j) and PV(j-1) issued together;
//   * FaEpilogue: O staged in shared memory and stored by TMA (a sequence's last, partial tile by the
//     threads: any Sq, varlen), LSE only when asked, in flash-attn's layouts ([B, Hq, Sq], or [Hq, total_q]
//     for varlen);
//   * FaTileScheduler: one CTA per (Q tile, head, batch), heaviest tiles first when causal;
//   * FaCausalPersistentScheduler: one CTA per SM walking causal tiles in pairs of equal work (a
//     head's Q tile rows m and mb - 1 - m; single tiles, heaviest first, where pairs make few rounds),
//     heads in L2-sized sections (example 88's persistent order serves the unmasked kernels).
//
// Variable length without padding.  A packed tensor [T, H, D] is viewed by TMA as rows
// (T, D, (1, H)); sequence b (tokens [start, start + len)) is read with its rows offset by start.
// A tile's rows past the sequence's end read the next sequence's tokens (TMA zero-fills past T):
// Q rows there are never stored and K/V rows there are masked (their scores are -inf, so V is
// weighted by 0).  A descriptor never points before its tensor: the hardware may touch its base.
// Fixed-length batches use the plain (S, D, (B, H)) view with batch coordinate b and no offset.
#pragma once

#include <cmath>
#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/fast_math.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/pipeline/pipeline.hpp"

#include "collective/fmha_collective_tma_warpspecialized.hpp"
#include "collective/fmha_common.hpp"
#include "kernel/fmha_options.hpp"

namespace fused_gemm {

// One sequence of a batch in its TMA view: length, batch coordinate and row offset (see the top).
struct FaSeq {
  int len;
  int batch_coord;
  int row_offset;   // = first token (varlen) or 0
};

struct FaLengths {
  int const *cu = nullptr;   // [B + 1] cumulative lengths (varlen), or null: every sequence max_len long
  int max_len = 0;

  CUTLASS_DEVICE FaSeq seq(int b) const {
    if (cu == nullptr) return {max_len, b, 0};
    int const start = __ldg(cu + b);
    return {__ldg(cu + b + 1) - start, 0, start};
  }
};

// The masks (example 88's Fusion interface).  problem_size is one sequence's (B, H, Sq, Sk, D).
// Tiles run 0..trip-1; the masked ones must be the last ones (the mainloop's contract).
template <bool kCausal>
struct FaMask {
  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_trip_count(BlkCoord const &blk, TileShape const &tile, ProblemSize const &ps) {
    int const q = cute::get<2>(ps), k = cute::get<3>(ps);
    int const m0 = int(cute::get<0>(blk)) * int(cute::get<0>(tile));
    if (m0 >= q) return 1;                       // a tile past this sequence's end (varlen): stores nothing
    int end = k;                                 // keys the tile's last row sees
    if constexpr (kCausal) end = cute::min(k, m0 + int(cute::get<0>(tile)) + k - q);
    return end <= 0 ? 1 : cute::ceil_div(end, int(cute::get<1>(tile)));
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_unmasked_trip_count(BlkCoord const &blk, TileShape const &tile, ProblemSize const &ps) {
    int const q = cute::get<2>(ps), k = cute::get<3>(ps), bn = int(cute::get<1>(tile));
    int const m0 = int(cute::get<0>(blk)) * int(cute::get<0>(tile));
    if (m0 >= q) return 0;
    int full = k / bn;                           // tiles with no key past the end
    if constexpr (kCausal) {
      int const first = m0 + k - q + 1;          // keys the tile's first row sees
      full = cute::min(full, first <= 0 ? 0 : first / bn);
    }
    return cute::min(full, get_trip_count(blk, tile, ps));
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_masked_trip_count(BlkCoord const &blk, TileShape const &tile, ProblemSize const &ps) {
    return get_trip_count(blk, tile, ps) - get_unmasked_trip_count(blk, tile, ps);
  }

  // A row sees keys [0, limit(row)).  Each element's coordinate is the thread's first one plus a compile-time
  // offset, so an element costs one compare of that constant against its row's limit less the thread's first
  // column (a thread has two rows: the compiler keeps one limit each) and a select, one instruction fewer
  // than comparing whole coordinates against the K tail and the diagonal apart.
  template <class AccQK, class IndexQK, class ProblemSize>
  CUTLASS_DEVICE void before_softmax(AccQK &acc, IndexQK const &index, ProblemSize const &ps) {
    int const k = cute::get<3>(ps);
    int const offset = k - cute::get<2>(ps);     // bottom-right alignment
    auto const first = index(0);
    int const r0 = int(cute::get<0>(first)), c0 = int(cute::get<1>(first));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < cute::size(acc); ++i) {
      auto const d = index.layout()(i);
      int const dr = int(cute::get<0>(d)), dc = int(cute::get<1>(d));
      int limit = k - c0;
      if constexpr (kCausal) limit = cute::min(limit, r0 + dr + offset + 1 - c0);
      if (dc >= limit) acc(i) = -INFINITY;
    }
  }
};

// Example 88's warp-specialized mainloop with our loads (GQA, varlen) and per-sequence problem sizes.
// Q is loaded by its own producer warp (our kernel's Q warp).  Fusion is Base's mask.
template <class Base, class Fusion, bool kFaOverlap = false, bool kFaChain = false>
struct FaMainloop : Base {
  using typename Base::Element;
  using typename Base::MainloopPipeline;
  using typename Base::MainloopPipelineQ;
  using typename Base::PipelineState;
  using typename Base::PipelineStateQ;
  using typename Base::SharedStorage;
  using typename Base::TileShape;
  using typename Base::TileShapePV;
  using typename Base::TileShapeQK;
  static constexpr int NumMmaWarpGroups = Base::NumMmaWarpGroups;

  struct Arguments {
    typename Base::Arguments tensors;   // Q/K/V pointers and strides, already in their TMA views
    float scale;                        // softmax scale (> 0)
    int num_kv_heads;                   // q head h reads k/v head h / (H / num_kv_heads)
    FaLengths q, k;                     // lengths (cu_seqlens for varlen); max_len is the problem's
    int q_rows, kv_rows;                // row extents of the TMA views (S, or the packed T)
    int q_batch_extent, kv_batch_extent;  // extents of the TMA views' batch modes (B, or 1)
  };

  struct Params : Base::Params {
    int group;                          // q heads per k/v head
    int num_kv_heads;
    FaLengths q, k;
    int q_rows, kv_rows;
    int q_batch_extent, kv_batch_extent;
  };

  template <class ProblemShape>
  static bool can_implement(ProblemShape const &ps, Arguments const &args) {
    int const heads = cute::get<1>(ps);
    return cute::get<4>(ps) == cute::get<2>(TileShape{}) && args.scale > 0.f && args.num_kv_heads > 0 &&
           heads % args.num_kv_heads == 0;
  }

  // Q's descriptor over (B, Hq); K's and V's over (B, Hkv).  Descriptor types do not depend on the
  // extents, so each comes from the base's own builder with the right shape.
  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const &ps, Arguments const &args, void *workspace) {
    using namespace cute;
    auto const q_shape = make_shape(args.q_batch_extent, get<1>(ps), args.q_rows, args.kv_rows, get<4>(ps));
    auto const kv_shape = make_shape(args.kv_batch_extent, args.num_kv_heads, args.q_rows, args.kv_rows, get<4>(ps));
    Params p;
    static_cast<typename Base::Params &>(p) = Base::to_underlying_arguments(q_shape, args.tensors, workspace);
    typename Base::Params const kv = Base::to_underlying_arguments(kv_shape, args.tensors, workspace);
    p.tma_load_k = kv.tma_load_k;
    p.tma_load_v = kv.tma_load_v;
    p.scale_softmax = args.scale;
    p.scale_softmax_log2 = args.scale * static_cast<float>(M_LOG2E);
    p.group = get<1>(ps) / args.num_kv_heads;
    p.num_kv_heads = args.num_kv_heads;
    p.q = args.q;
    p.k = args.k;
    p.q_rows = args.q_rows;
    p.kv_rows = args.kv_rows;
    p.q_batch_extent = args.q_batch_extent;
    p.kv_batch_extent = args.kv_batch_extent;
    return p;
  }

  template <class BlkCoord, class ProblemShape>
  CUTLASS_DEVICE static auto sequence_problem(Params const &params, ProblemShape const &ps, BlkCoord const &blk) {
    int const b = int(cute::get<2, 0>(blk));
    return cute::make_shape(cute::get<0>(ps), cute::get<1>(ps), params.q.seq(b).len, params.k.seq(b).len,
                            cute::get<4>(ps));
  }

  // A TMA view of `shape` with its row mode (`row_mode`) shifted by seq.row_offset, cut into the
  // tiles `step` picks out of `tile` (as example 88's loads do).
  template <int kRowMode, class Tma, class Shape3, class Tile, class Step>
  CUTLASS_DEVICE static auto tiles(Tma const &tma, Shape3 const &shape, FaSeq const &seq, Tile const &tile,
                                   Step const &step) {
    using namespace cute;
    Tensor m = tma.get_tma_tensor(shape);
    auto offset = [&] {
      if constexpr (kRowMode == 0) {
        return make_coord(seq.row_offset, _0{}, make_coord(_0{}, _0{}));
      } else {
        return make_coord(_0{}, seq.row_offset, make_coord(_0{}, _0{}));
      }
    }();
    return local_tile(domain_offset(offset, m), tile, make_coord(_, _, _), step);
  }

  template <class SmemLayout, class Tma, class G, class Storage>
  CUTLASS_DEVICE static auto tma_state(Tma const &tma, G const &g, Storage &storage) {
    using namespace cute;
    Tensor s = make_tensor(make_smem_ptr(storage.data()), SmemLayout{});
    auto block_tma = tma.get_slice(0);
    return make_tuple(block_tma.partition_S(g), block_tma.partition_D(s));
  }

  template <class BlkCoord, class ProblemShape, class LoadWarpBarrier>
  CUTLASS_DEVICE void load_maybe_q(BlkCoord const &blk, Params const &params, ProblemShape const &ps,
                                   MainloopPipelineQ &pipeline_q, PipelineStateQ &smem_pipe_write_q,
                                   SharedStorage &storage, LoadWarpBarrier &load_warp_barrier, bool do_barrier) {
    using namespace cute;
    using X = Underscore;
    int const lane_predicate = cute::elect_one_sync();
    int const b = int(get<2, 0>(blk)), h = int(get<2, 1>(blk));
    FaSeq const seq = params.q.seq(b);
    auto const shape = make_shape(params.q_rows, get<4>(ps), make_shape(params.q_batch_extent, get<1>(ps)));
    Tensor gQ_all = tiles<0>(params.tma_load_q, shape, seq, TileShapeQK{}, Step<_1, X, _1>{});
    Tensor gQ_seq = gQ_all(_, _, _, _0{}, make_coord(seq.batch_coord, h));          // (rows, D, row tiles)
    // This CTA's row tiles: NumMmaWarpGroups * m + (0, 1, ...), one per consumer warpgroup.
    Tensor gQ = make_tensor(gQ_seq.data() + NumMmaWarpGroups * int(get<0>(blk)) * stride<2>(gQ_seq), gQ_seq.layout());
    typename Base::LoadQ load_q{params.tma_load_q, pipeline_q, storage.smem_q};
    auto state = tma_state<typename Base::SmemLayoutQ>(params.tma_load_q, gQ, storage.smem_q);
    auto q_tile_iter = cute::make_coord_iterator(Int<NumMmaWarpGroups>{});
    CUTLASS_PRAGMA_UNROLL
    for (int t = 0; t < NumMmaWarpGroups; ++t) {
      int count = 1;
      load_q.step(q_tile_iter, state, smem_pipe_write_q, lane_predicate, count);
      if (t == 0 && do_barrier) {
        load_warp_barrier.arrive();
        load_warp_barrier.wait(/*phase=*/0);
        do_barrier = false;
      }
    }
  }

  template <bool kLoadQ, class BlkCoord, class ProblemShape, class LoadWarpBarrier>
  CUTLASS_DEVICE void load_kv_maybe_q(int, BlkCoord const &blk, Params const &params, ProblemShape const &ps,
                                      MainloopPipeline &pipeline, PipelineState &smem_pipe_write,
                                      MainloopPipelineQ &, PipelineStateQ &, SharedStorage &storage,
                                      LoadWarpBarrier &load_warp_barrier, bool do_barrier) {
    static_assert(!kLoadQ, "Q has its own producer warp");
    using namespace cute;
    using X = Underscore;
    int const lane_predicate = cute::elect_one_sync();
    int const b = int(get<2, 0>(blk)), kv_head = int(get<2, 1>(blk)) / params.group;
    FaSeq const seq = params.k.seq(b);
    int const trip = Fusion{}.get_trip_count(blk, TileShape{}, sequence_problem(params, ps, blk));
    auto const heads = make_shape(params.kv_batch_extent, params.num_kv_heads);
    auto const coord = make_coord(seq.batch_coord, kv_head);

    // K tiles (BN rows, D); V tiles of its transposed view (D, BN rows).
    Tensor gK = tiles<0>(params.tma_load_k, make_shape(params.kv_rows, get<4>(ps), heads), seq, TileShapeQK{},
                         Step<X, _1, _1>{})(_, _, _, _0{}, coord);
    Tensor gV = tiles<1>(params.tma_load_v, make_shape(get<4>(ps), params.kv_rows, heads), seq, TileShapePV{},
                         Step<X, _1, _1>{})(_, _, _0{}, _, coord);
    typename Base::LoadK load_k{params.tma_load_k, pipeline, storage.smem_k};
    typename Base::LoadV load_v{params.tma_load_v, pipeline, storage.smem_v};
    auto state_k = tma_state<typename Base::SmemLayoutK>(params.tma_load_k, gK, storage.smem_k);
    auto state_v = tma_state<typename Base::SmemLayoutV>(params.tma_load_v, gV, storage.smem_v);

    auto k_tile_iter = cute::make_coord_iterator(trip);
    int k_tile_count = 2 * trip;
    load_k.template step<false>(k_tile_iter, state_k, smem_pipe_write, lane_predicate, k_tile_count);
    if (do_barrier) {
      load_warp_barrier.arrive();
      load_warp_barrier.wait(/*phase=*/0);
    }
    load_v.template step<true>(k_tile_iter, state_v, smem_pipe_write, lane_predicate, k_tile_count);
    CUTLASS_PRAGMA_NO_UNROLL
    while (k_tile_count > 0) {
      load_k.template step<false>(k_tile_iter, state_k, smem_pipe_write, lane_predicate, k_tile_count);
      load_v.template step<true>(k_tile_iter, state_v, smem_pipe_write, lane_predicate, k_tile_count);
    }
  }

  // Example 88's mainloop issues a step's QK^T, waits for it, runs the softmax, then issues that step's
  // PV.  Here step j issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back, as FA3's
  // intra-warpgroup pipelining does, waits for S_j (wait<1>), runs its softmax, waits for the PV and
  // rescales O.  The softmax was meant to run under the PV, but ptxas (nvcc 13.0) hoists the second
  // wait above it (SASS: no MUFU.EX2 between DEPBAR.LE 1 and DEPBAR.LE 0): what this loop gains over
  // example 88's is the back-to-back issue, measured on short tiles (generator/attention/heuristics.py).
  // P_{j-1} (16-bit) and S_j (fp32) are live together: 32 more registers a thread.  kOverlap false:
  // example 88's own loop.
  template <class BlkCoord, class ProblemShape, class PipelineReducer, class PipelineStateReducer, class OrderBarrier>
  CUTLASS_DEVICE auto compute(BlkCoord const &blk, BlkCoord const &wg, Params const &params, ProblemShape const &ps_all,
                              MainloopPipeline &pipeline, PipelineState &smem_pipe_read,
                              MainloopPipelineQ &pipeline_q, PipelineStateQ &smem_pipe_read_q,
                              PipelineReducer &pipeline_reducer, PipelineStateReducer &smem_pipe_write_reducer,
                              SharedStorage &storage, OrderBarrier &math_wg_order_barrier) {
    auto const ps = sequence_problem(params, ps_all, blk);
    if constexpr (!kOverlap) {
      return Base::compute(blk, wg, params, ps, pipeline, smem_pipe_read, pipeline_q, smem_pipe_read_q,
                           pipeline_reducer, smem_pipe_write_reducer, storage, math_wg_order_barrier);
    } else {
      return overlapped(blk, wg, params, ps, pipeline, smem_pipe_read, pipeline_q, smem_pipe_read_q, storage,
                        math_wg_order_barrier);
    }
  }

  static constexpr bool kOverlap = kFaOverlap && !Base::kIsMainloopLocked;

  // The chained-tiles entry (below): the kernel passes the S_0 it carries between tiles.
  template <class BlkCoord, class ProblemShape, class OrderBarrier, class AccQK>
  CUTLASS_DEVICE auto compute_chained(BlkCoord const &blk, BlkCoord const &wg, Params const &params,
                                      ProblemShape const &ps_all, MainloopPipeline &pipeline,
                                      PipelineState &smem_pipe_read, MainloopPipelineQ &pipeline_q,
                                      PipelineStateQ &smem_pipe_read_q, SharedStorage &storage,
                                      OrderBarrier &math_wg_order_barrier, AccQK &acc_qk, bool issue_next) {
    return overlapped(blk, wg, params, sequence_problem(params, ps_all, blk), pipeline, smem_pipe_read, pipeline_q,
                      smem_pipe_read_q, storage, math_wg_order_barrier, acc_qk, issue_next);
  }

  // Chained tiles (the overlapped mainloop of a persistent kernel, two Q stages per consumer warpgroup):
  // after issuing a tile's last PV, a warpgroup issues the next tile's first QK^T, so that QK^T runs
  // under this tile's softmax tail and epilogue instead of opening the next tile with the tensor cores
  // idle.  The kernel carries that S_0 (acc_qk) from one tile's call to the next.
  static constexpr bool kChain = kFaChain;
  static_assert(!kChain || (kOverlap && Base::kIsPersistent), "chained tiles: the persistent overlapped mainloop");
  static_assert(!kChain || Base::StagesQ::value == 2 * NumMmaWarpGroups, "chained tiles: two Q stages a warpgroup");

  CUTLASS_DEVICE static auto make_acc_qk() {
    return cute::partition_fragment_C(typename Base::TiledMmaQK{}, cute::take<0, 2>(TileShapeQK{}));
  }

  // Issues S = Q K^T from Q stage q and K stage k into acc_qk, without waiting for it.  Chained tiles
  // issue every S_0 unconditionally: a wgmma issued on one branch only made the compiler merge its
  // accumulators with register copies, and ptxas then serialised the wgmmas (C7515).
  template <class AccQK>
  CUTLASS_DEVICE static void issue_qk(int q, int k, SharedStorage &storage, AccQK &acc_qk) {
    using namespace cute;
    typename Base::TiledMmaQK tiled_mma_qk;
    auto thr_mma_qk = tiled_mma_qk.get_thread_slice(int(threadIdx.x));
    Tensor sQ = make_tensor(make_smem_ptr(storage.smem_q.data()), typename Base::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(storage.smem_k.data()), typename Base::SmemLayoutK{});
    Tensor tSrQ = thr_mma_qk.make_fragment_A(thr_mma_qk.partition_A(sQ));
    Tensor tSrK = thr_mma_qk.make_fragment_B(thr_mma_qk.partition_B(sK));
    warpgroup_fence_operand(acc_qk);
    warpgroup_arrive();
    cutlass::fmha::collective::gemm_zero_acc(tiled_mma_qk, tSrQ(_, _, _, q), tSrK(_, _, _, k), acc_qk);
    warpgroup_commit_batch();
  }

  // Chained tiles: the first tile's S_0, before the kernel's tile loop.
  template <class AccQK>
  CUTLASS_DEVICE static void issue_first_qk(MainloopPipeline &pipeline, PipelineState const &k_stage,
                                            MainloopPipelineQ &pipeline_q, PipelineStateQ const &q_stage,
                                            SharedStorage &storage, AccQK &acc_qk) {
    pipeline_q.consumer_wait(q_stage);
    pipeline.consumer_wait(k_stage);
    issue_qk(q_stage.index(), k_stage.index(), storage, acc_qk);
  }

  template <class BlkCoord, class ProblemShape, class OrderBarrier>
  CUTLASS_DEVICE auto overlapped(BlkCoord const &blk, BlkCoord const &wg, Params const &params, ProblemShape const &ps,
                                 MainloopPipeline &pipeline, PipelineState &smem_pipe_read,
                                 MainloopPipelineQ &pipeline_q, PipelineStateQ &smem_pipe_read_q,
                                 SharedStorage &storage, OrderBarrier &math_wg_order_barrier) {
    auto acc_qk = make_acc_qk();
    return overlapped(blk, wg, params, ps, pipeline, smem_pipe_read, pipeline_q, smem_pipe_read_q, storage,
                      math_wg_order_barrier, acc_qk, false);
  }

  // kChain: this tile's S_0 is already in acc_qk (issued by the kernel or the previous call), and this
  // call issues the next tile's before it returns: `issue_next` (there is a next tile) or, for the
  // CTA's last tile, a stand-in on this tile's own Q stage and V_last, whose result nobody reads.
  template <class BlkCoord, class ProblemShape, class OrderBarrier, class AccQK>
  CUTLASS_DEVICE auto overlapped(BlkCoord const &blk, BlkCoord const &wg, Params const &params, ProblemShape const &ps,
                                 MainloopPipeline &pipeline, PipelineState &smem_pipe_read,
                                 MainloopPipelineQ &pipeline_q, PipelineStateQ &smem_pipe_read_q,
                                 SharedStorage &storage, OrderBarrier &math_wg_order_barrier, AccQK &acc_qk,
                                 bool issue_next) {
    using namespace cute;
    using namespace cutlass::fmha::collective;
    using TiledMmaQK = typename Base::TiledMmaQK;
    using TiledMmaPV = typename Base::TiledMmaPV;
    int const thread_idx = int(threadIdx.x);

    TiledMmaQK tiled_mma_qk;
    auto thr_mma_qk = tiled_mma_qk.get_thread_slice(thread_idx);
    TiledMmaPV tiled_mma_pv;
    auto thr_mma_pv = tiled_mma_pv.get_thread_slice(thread_idx);
    Tensor sV = make_tensor(make_smem_ptr(storage.smem_v.data()), typename Base::SmemLayoutV{});
    Tensor tOrV = thr_mma_pv.make_fragment_B(thr_mma_pv.partition_B(sV));

    int const trip = Fusion{}.get_trip_count(blk, TileShape{}, ps);
    int const unmasked = Fusion{}.get_unmasked_trip_count(blk, TileShape{}, ps);

    Tensor cP = make_identity_tensor(take<0, 2>(TileShapeQK{}));
    Tensor tPcP = thr_mma_qk.partition_C(cP);
    tPcP.data() = tPcP.data() + E<0>{} * get<0>(wg) * get<0>(TileShapeQK{});

    Tensor acc_pv = partition_fragment_C(tiled_mma_pv, take<0, 2>(TileShapePV{}));
    CollectiveSoftmax<float, Fusion, Params> softmax{params};
    auto state = softmax.init(acc_pv, tiled_mma_pv);
    auto &s_max = get<0>(state);
    auto &a_sum = get<1>(state);
    auto const target = reduction_target_n(tiled_mma_qk);
    constexpr int kTargetRank = decltype(rank(target))::value;
    float const scale = params.scale_softmax_log2;

    // Row maxima over S's columns and the row's quad (the reduction target), then P = exp2(scale * (S - max)),
    // and this thread's share of each row's sum.  Returns exp2(scale * (old max - new max)) per row.
    auto softmax_step = [&](auto &acc, bool first) {
      Tensor acc_mn = make_tensor(acc.data(), layout_acc_mn(tiled_mma_qk, acc.layout()));
      Tensor correction = make_fragment_like(s_max);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size<0>(acc_mn); ++i) {
        float m = first ? acc_mn(i, 0) : s_max(i);
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < size<1>(acc_mn); ++j) m = ::fmaxf(m, acc_mn(i, j));
        for_each(make_seq<kTargetRank>{}, [&](auto r) {
          CUTLASS_PRAGMA_UNROLL
          for (int j = 1; j < shape<r>(target); j *= 2) {
            m = ::fmaxf(m, __shfl_xor_sync(0xffffffffu, m, stride<r>(target) * j));
          }
        });
        float const m_used = m == -INFINITY ? 0.f : m;
        correction(i) = first ? 1.f : ::exp2f((s_max(i) - m_used) * scale);
        s_max(i) = m;
        float sum = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < size<1>(acc_mn); ++j) {
          acc_mn(i, j) = ::exp2f(scale * acc_mn(i, j) - scale * m_used);
          sum += acc_mn(i, j);
        }
        a_sum(i) = first ? sum : a_sum(i) * correction(i) + sum;
      }
      return correction;
    };

    PipelineStateQ const q_stage = smem_pipe_read_q;
    pipeline_q.consumer_wait(smem_pipe_read_q);

    // Step 0: S_0 alone (ordered against the other warpgroup's first QK^T, as example 88 orders them),
    // or already issued (chained tiles, not ordered).
    if constexpr (!kChain) {
      pipeline.consumer_wait(smem_pipe_read);
      math_wg_order_barrier.wait();
      issue_qk(q_stage.index(), smem_pipe_read.index(), storage, acc_qk);
      math_wg_order_barrier.arrive();
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_qk);
    pipeline.consumer_release(smem_pipe_read);              // K_0
    ++smem_pipe_read;
    PipelineState v_stage = smem_pipe_read;                  // V_0
    ++smem_pipe_read;
    if (unmasked <= 0) Fusion{}.before_softmax(acc_qk, tPcP, ps);
    softmax_step(acc_qk, true);
    auto p_prev = make_acc_into_op<Element>(acc_qk, typename TiledMmaPV::LayoutA_TV{});

    CUTLASS_PRAGMA_NO_UNROLL
    for (int j = 1; j < trip; ++j) {
      tPcP.data() = tPcP.data() + E<1>{} * get<1>(TileShapeQK{});
      pipeline.consumer_wait(smem_pipe_read);                // K_j
      issue_qk(q_stage.index(), smem_pipe_read.index(), storage, acc_qk);
      pipeline.consumer_wait(v_stage);                       // V_{j-1}
      warpgroup_fence_operand(acc_pv);
      warpgroup_fence_operand(p_prev);
      warpgroup_arrive();
      // One code path for the first PV (which zeroes O) and the rest: a branch between wgmma.fence and
      // the MMAs made ptxas fence again (C7519).
      tiled_mma_pv.accumulate_ = j == 1 ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
      gemm_reset_zero_acc(tiled_mma_pv, p_prev, tOrV(_, _, _, v_stage.index()), acc_pv);
      warpgroup_commit_batch();
      warpgroup_wait<1>();                                   // S_j is in; the PV may still run
      warpgroup_fence_operand(acc_qk);
      pipeline.consumer_release(smem_pipe_read);             // K_j
      ++smem_pipe_read;
      if (j >= unmasked) Fusion{}.before_softmax(acc_qk, tPcP, ps);
      auto correction = softmax_step(acc_qk, false);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_pv);
      warpgroup_fence_operand(p_prev);
      pipeline.consumer_release(v_stage);                    // V_{j-1}
      v_stage = smem_pipe_read;                              // V_j
      ++smem_pipe_read;
      Tensor acc_pv_mn = make_tensor(acc_pv.data(), layout_acc_mn(tiled_mma_pv, acc_pv.layout()));
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size<0>(acc_pv_mn); ++i) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < size<1>(acc_pv_mn); ++c) acc_pv_mn(i, c) *= correction(i);
      }
      p_prev = make_acc_into_op<Element>(acc_qk, typename TiledMmaPV::LayoutA_TV{});
    }

    pipeline.consumer_wait(v_stage);                         // V_last
    warpgroup_fence_operand(acc_pv);
    warpgroup_fence_operand(p_prev);
    warpgroup_arrive();
    tiled_mma_pv.accumulate_ = trip == 1 ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
    gemm_reset_zero_acc(tiled_mma_pv, p_prev, tOrV(_, _, _, v_stage.index()), acc_pv);
    warpgroup_commit_batch();
    if (Base::kIsPersistent) pipeline_q.consumer_release(q_stage);
    if constexpr (kChain) {
      // The next tile's S_0: its Q is this warpgroup's other stage, its K_0 the ring's next stage.  The
      // last tile's stand-in reads this tile's Q stage and V_last, both released by the time it runs but
      // never reloaded: no load follows a CTA's last tile.
      PipelineStateQ q_next = smem_pipe_read_q;
      q_next.advance(NumMmaWarpGroups);
      if (issue_next) {
        pipeline_q.consumer_wait(q_next);
        pipeline.consumer_wait(smem_pipe_read);
      }
      issue_qk(issue_next ? q_next.index() : q_stage.index(), issue_next ? smem_pipe_read.index() : v_stage.index(),
               storage, acc_qk);
      warpgroup_wait<1>();                                   // the PV; S_0 runs on under the tail and epilogue
    } else {
      warpgroup_wait<0>();
    }
    warpgroup_fence_operand(acc_pv);
    if (Base::kIsPersistent) pipeline.consumer_release(v_stage);
    Tensor lse = softmax.tail(state, acc_pv, tiled_mma_pv);
    return make_tuple(acc_pv, lse);
  }
};

// O from the PV accumulators (already divided by the softmax sum), staged in shared memory in the TMA's
// 128-byte swizzle (a warp's 4-byte stores to 8 rows land in 8 different bank groups), then stored by one
// TMA store per warpgroup tile, which drains while the warpgroup goes on to its next tile.  (A build without
// the global stores ran causal 1k calls 9% faster at D = 128 and 4% at D = 64 on an H100; the TMA store won
// back 0-4% against 16-byte stores of every thread, same run.)  A tile that passes its sequence's end is
// stored by the threads, whole 16-byte chunks of the rows inside: with varlen the TMA view's next rows are
// the next sequence's (fixed-length tiles would be clipped at Sq, but take the same path).  LSE by one
// thread of each row's quad.
// A sequence's rows are at o + (start + row) * o_row (varlen) or o + b * o_batch + row * o_row.
template <class Element, int kHeadDim>
struct FaEpilogue {
  static constexpr int kRows = 64;                                   // a consumer warpgroup's Q rows
  static constexpr int kChunks = kHeadDim * int(sizeof(Element)) / 16;   // 16-byte chunks of a row
  static constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
  static_assert(kChunks % 8 == 0 && kRows * kChunks % kThreads == 0, "rows of whole 128-byte swizzle blocks");
  using SmemLayoutO = decltype(cute::tile_to_shape(cute::GMMA::Layout_K_SW128_Atom<Element>{},
                                                   cute::Shape<cute::Int<kRows>, cute::Int<kHeadDim>>{}));
  // O's TMA view, as Q's (see the top): rows (S, or the packed T), D, (batch extent, H); strides in elements.
  using ViewO = cute::Layout<cute::Shape<int, cute::Int<kHeadDim>, cute::Shape<int, int>>,
                             cute::Stride<int, cute::_1, cute::Stride<int, int>>>;
  using TmaStoreO = decltype(cute::make_tma_copy(cute::SM90_TMA_STORE{},
                                                 cute::make_tensor(cute::make_gmem_ptr(static_cast<Element *>(nullptr)), ViewO{}),
                                                 SmemLayoutO{}));

  struct Arguments {
    Element *o;
    int64_t o_row, o_batch, o_head;          // strides in elements (< 2^31); rows 16-byte aligned (Python allocates O)
    float *lse;                              // null: not written
    int64_t lse_batch, lse_head;             // rows at stride 1; varlen: start + row
    FaLengths q;
    int rows, batch_extent;                  // O's TMA view: S and B, or the packed T and 1 (varlen)
  };
  struct Params : Arguments {
    TmaStoreO tma_store_o;
  };

  // Byte offset in SmemLayoutO of 16-byte chunk `chunk` of row `row_base + row`, where row % 8 == 0 and
  // row_base % 8 == swizzle: 64-column (128-byte) blocks of kRows rows, a row's chunks XOR (row % 8) in each.
  CUTLASS_DEVICE static int chunk_offset(int row, int chunk, int swizzle) {
    return (chunk / 8) * kRows * 128 + row * 128 + ((chunk % 8) ^ swizzle) * 16;
  }

  // One warpgroup's O tile.  Without a persistent scheduler the kernel overlays it on the mainloop's
  // storage, where it falls on the warpgroup's own Q stage (same size and layout): the warpgroup has read
  // its Q by now and no one reloads it.  The TMA swizzles by address bits 7-9 where chunk_offset uses the
  // row within the tile: tiles on 1024-byte boundaries (like the mainloop's Q/K/V tiles) agree.
  struct alignas(1024) TensorStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutO>> o;
  };
  static_assert(sizeof(TensorStorage) % 1024 == 0, "O tiles one after another stay on 1024-byte boundaries");

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const &ps, Arguments const &args, void * = nullptr) {
    using namespace cute;
    bool const varlen = args.q.cu != nullptr;
    auto const view = make_layout(make_shape(args.rows, Int<kHeadDim>{}, make_shape(args.batch_extent, int(get<1>(ps)))),
                                  make_stride(int(args.o_row), _1{}, make_stride(int(varlen ? args.o_row : args.o_batch),
                                                                                  int(args.o_head))));
    Params p;
    static_cast<Arguments &>(p) = args;
    p.tma_store_o = make_tma_copy(SM90_TMA_STORE{}, make_tensor(make_gmem_ptr(args.o), view), SmemLayoutO{});
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptor(Params const &p) { cute::prefetch_tma_descriptor(p.tma_store_o.get_tma_descriptor()); }

  // The warpgroup's last TMA store has read its O tile (before the CTA exits).
  CUTLASS_DEVICE static void drain() {
    if (int(threadIdx.x) % kThreads == 0) cute::tma_store_wait<0>();
  }

  template <class TileShape, class BlkCoord, class ResultTuple, class TiledMma, class ProblemShape>
  CUTLASS_DEVICE void operator()(TileShape const &tile, BlkCoord const &wg_coord, ResultTuple const &result,
                                 TiledMma const &tiled_mma, ProblemShape const &ps, Params const &p,
                                 TensorStorage &storage) {
    using namespace cute;
    static_assert(int(get<0>(TileShape{})) == kRows && int(get<1>(TileShape{})) == kHeadDim, "O tile");
    auto const &acc = get<0>(result);
    auto const &lse = get<1>(result);
    int const b = int(get<2, 0>(wg_coord)), h = int(get<2, 1>(wg_coord));
    FaSeq const seq = p.q.seq(b);
    bool const varlen = p.q.cu != nullptr;
    int const m = int(get<0>(wg_coord));
    int const row0 = m * kRows;
    int const thread = int(threadIdx.x) % kThreads;
    // One named barrier per consumer warpgroup: ids 1..3 past CUTLASS's 8 reserved ones (9..11).
    cutlass::arch::NamedBarrier const barrier(kThreads, cutlass::canonical_warp_group_idx());

    Tensor sO = make_tensor(make_smem_ptr(storage.o.data()), SmemLayoutO{});
    auto thr_mma = tiled_mma.get_thread_slice(thread);
    Tensor coords = thr_mma.partition_C(make_identity_tensor(take<0, 2>(tile)));   // (row, col) like acc
    // A thread's rows are equal mod 8 and its columns start below 8 and step by 8 (wgmma's accumulator
    // layout): each value's chunk offset is compile-time but for one XOR with a per-thread constant.
    // (CuTe's swizzled tensor computed every address at run time and spilled at D = 128.)
    int const row_first = int(get<0>(coords(0))), col_first = int(get<1>(coords(0)));
    char *staged = reinterpret_cast<char *>(storage.o.data()) + row_first * 128 + col_first * int(sizeof(Element));
    cutlass::NumericArrayConverter<Element, float, 2> convert;
    drain();                                       // the previous tile's TMA store has read the tile
    barrier.sync();                                // and so have the previous tile's thread stores
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {       // values i, i + 1 are columns c, c + 1 of one row
      int const dr = int(get<0>(coords(i))) - row_first, dc = int(get<1>(coords(i))) - col_first;
      cutlass::Array<float, 2> pair;
      pair[0] = acc(i);
      pair[1] = acc(i + 1);
      cutlass::Array<Element, 2> const out = convert(pair);
      *reinterpret_cast<uint32_t *>(staged + chunk_offset(dr, dc / 8, row_first % 8)) =
          reinterpret_cast<uint32_t const &>(out);
    }
    cutlass::arch::fence_view_async_shared();      // the staged tile, visible to the TMA
    barrier.sync();

    if (row0 + kRows <= seq.len) {
      if (thread == 0) {
        Tensor mO = domain_offset(make_coord(seq.row_offset, _0{}, make_coord(_0{}, _0{})),
                                  p.tma_store_o.get_tma_tensor(make_shape(p.rows, Int<kHeadDim>{},
                                                                          make_shape(p.batch_extent, int(get<1>(ps))))));
        Tensor gO = local_tile(mO(_, _, make_coord(seq.batch_coord, h)), Shape<Int<kRows>, Int<kHeadDim>>{}, make_coord(m, _0{}));
        auto tma = p.tma_store_o.get_slice(0);
        copy(p.tma_store_o, tma.partition_S(sO), tma.partition_D(gO));
        tma_store_arrive();
      }
    } else {
      // Whole rows out: a pass covers kThreads / kChunks rows; a thread keeps its chunk across passes.
      constexpr int kRowsPerPass = kThreads / kChunks;
      int const row_in_pass = thread / kChunks, chunk = thread % kChunks;
      int const rows_left = seq.len - row0 - row_in_pass;        // this thread's rows still in the sequence
      Element *o = p.o + (varlen ? seq.row_offset * p.o_row : b * p.o_batch) + h * p.o_head +
                   (row0 + row_in_pass) * p.o_row + chunk * (16 / int(sizeof(Element)));
      CUTLASS_PRAGMA_UNROLL
      for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
        if (pass * kRowsPerPass < rows_left) {
          int const row = pass * kRowsPerPass + row_in_pass;
          *reinterpret_cast<cute::uint128_t *>(o + pass * kRowsPerPass * p.o_row) = *reinterpret_cast<cute::uint128_t const *>(
              reinterpret_cast<char const *>(storage.o.data()) + row * 128 + chunk_offset(0, chunk, row % 8));
        }
      }
    }
    if (p.lse != nullptr) {
      Tensor coords_mn = make_tensor(coords.data(), cutlass::fmha::collective::layout_acc_mn(tiled_mma, coords.layout()));
      if (get<1>(coords_mn(0, 0)) == 0) {
        float *out = p.lse + h * p.lse_head + (varlen ? seq.row_offset : b * p.lse_batch);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size<0>(coords_mn); ++i) {
          int const row = row0 + int(get<0>(coords_mn(i, 0)));
          if (row < seq.len) out[row] = lse(i);
        }
      }
    }
  }
};

// One CTA per (Q tile, head, batch): grid (tiles, H, B).  Causal tiles further down
// see more keys; they start first, so the short ones fill the tail.
template <bool kHeaviestFirst>
struct FaTileScheduler {
  struct Params {
    dim3 grid;
  };
  bool valid_ = true;

  CUTLASS_DEVICE FaTileScheduler(Params const &) {}

  template <class ProblemSize, class ClusterShape, class TileShape>
  static Params to_underlying_arguments(ProblemSize const &ps, cutlass::KernelHardwareInfo, ClusterShape const &,
                                        TileShape const &tile) {
    return {dim3(cute::ceil_div(cute::get<2>(ps), cute::get<0>(tile)), cute::get<1>(ps), cute::get<0>(ps))};
  }

  static dim3 get_grid_shape(Params const &params) { return params.grid; }

  CUTLASS_DEVICE bool is_valid() { return valid_; }

  CUTLASS_DEVICE auto get_block_coord() {
    int const m = kHeaviestFirst ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);
    return cute::make_coord(m, cute::_0{}, cute::make_coord(int(blockIdx.z), int(blockIdx.y)));
  }

  CUTLASS_DEVICE FaTileScheduler &operator++() {
    valid_ = false;
    return *this;
  }
};

// Persistent and causal: one CTA per SM walks the tiles in an order that balances the SMs and
// keeps K/V in L2.  The K/V tiles a Q tile row m sees grow linearly with m (bottom-right causal), so
// a head's rows m and mb - 1 - m together are the same work for every m, and with an odd mb so are the
// middle rows of two heads: the CTAs take such pairs (units), one a round of gridDim.x units, and every
// CTA's rounds weigh the same.  The units past the last whole round go out as single tiles, heaviest
// first, every other round in reverse, so the tail is short.  The heads are cut into sections whose
// K/V fit in L2 (kL2Bytes); a section's units go out before the next's.  (Example 88's persistent order,
// Q tile fastest and each CTA striding by the grid, hands a CTA the same few rows again and again.
// Rounds of single tiles, heaviest row first, had left some CTAs 10-17% more steps than others wherever
// the rounds straddled two rows: D = 64 at 1k and 2k, D = 128 at other batch sizes.  This order ran
// D = 64 causal 1k 7% faster on two H100s, and D = 128 1k, where those rounds happened to balance at
// B = 16, 0-3% slower: perf/results/h100_sweep_attention.txt.)  Where the units make fewer than three
// rounds, the tail (a whole unit, then a tile) outweighs the rounds' balance: such problems take rounds
// of single tiles, heaviest row first, as before.
struct FaCausalPersistentScheduler {
  // About half an H100's L2: the K/V of a section.  Sized per Q head (the problem size has no K/V head
  // count), so with GQA a section's K/V take 1 / group of it: smaller sections, same order.  Pairs of
  // rows take sections of at most kMaxSectionHeads heads, so that short sequences' sections keep many
  // CTAs on each head at once: at 1k-2k, sections of 16-32 heads ran up to 7% faster than the 48-96 that
  // fit 24 MB (D = 128 causal 1k), and from 4k on sections under 24 MB lost 1-4% (H100,
  // perf/results/h100_sweep_attention.txt, runs C and D).
  static constexpr int64_t kL2Bytes = int64_t(24) << 20;
  static constexpr int64_t kMaxSectionHeads = 32;

  struct Params {
    int num_m_blocks, num_heads, heads_total, grid;
    int last_section;                        // the index of the last section (it may hold fewer heads)
    cutlass::FastDivmod per_section;         // units a whole section
    cutlass::FastDivmod section_heads, last_heads;
    int whole_rounds;                        // rounds of `grid` whole units (single tiles: rounds of tiles)
    int rest_units;                          // units past them, handed out as tiles (single tiles: tiles past them)
    int single_tiles;                        // fewer than kMinRounds rounds of units: rounds of single tiles
  };
  static constexpr int kMinRounds = 3;

  // A section of `heads` heads: mb / 2 pairs of rows a head, and with an odd mb the middle rows two heads
  // a unit (the last alone when `heads` is odd).
  CUTLASS_HOST_DEVICE static int units_of(int heads, int mb) { return heads * (mb / 2) + (mb & 1) * ((heads + 1) / 2); }

  // The state is one counter: a consumer warpgroup keeps it in a register through the mainloop (the
  // params stay in the kernel's parameter space; the three-warpgroup kernels have none to spare).  Slot k
  // of this CTA: in the whole rounds, round k / 2, the unit's first tile or second; past them, index
  // k - 2 * whole_rounds into the rest, where a CTA has at most two slots (c and 2 * grid - 1 - c:
  // 2 * rest_units < 2 * grid).
  Params const &params;
  int k = 0;

  CUTLASS_DEVICE FaCausalPersistentScheduler(Params const &p) : params(p) { skip_holes(); }

  // This CTA's slot count.
  CUTLASS_DEVICE int end() const {
    int const c = int(blockIdx.x), g = int(gridDim.x);
    if (params.single_tiles) {
      int const r = params.whole_rounds;
      return r + (((r & 1) ? g - 1 - c : c) < params.rest_units ? 1 : 0);
    }
    int const rest = 2 * params.rest_units;
    return 2 * params.whole_rounds + (c < rest ? 1 : 0) + (2 * g - 1 - c < rest ? 1 : 0);
  }

  template <class ProblemSize, class ClusterShape, class TileShape>
  static Params to_underlying_arguments(ProblemSize const &ps, cutlass::KernelHardwareInfo hw_info,
                                        ClusterShape const &, TileShape const &tile) {
    int const m_blocks = cute::ceil_div(int(cute::get<2>(ps)), int(cute::get<0>(tile)));
    int const heads = int(cute::get<0>(ps)) * int(cute::get<1>(ps));
    int64_t const kv_bytes_per_head = int64_t(cute::get<3>(ps)) * int64_t(cute::get<4>(ps)) * 2 * 2;   // K and V, 16 bit
    int const fit = int(cute::max(int64_t(1), cute::min(int64_t(heads), kL2Bytes / cute::max(int64_t(1), kv_bytes_per_head))));
    int section = cute::min(fit, int(kMaxSectionHeads));
    // With an odd mb, a section of an odd head count ends with a lone middle row, half a unit: sections of
    // one head (K/V over 12 MB a head, a long cache) made every (mb / 2 + 1)-th unit a half, and the CTAs
    // that never drew one set the time (up to 25% over the old order).  Even sections leave at most the
    // last one odd.
    if ((m_blocks & 1) && (section & 1) && section < heads) section = cute::max(2, section - 1);
    int const sms = hw_info.sm_count > 0 ? hw_info.sm_count
                                         : cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
    int const grid = int(cute::min(int64_t(m_blocks) * heads, int64_t(sms)));
    int last = (heads - 1) / section;
    int const units = last * units_of(section, m_blocks) + units_of(heads - last * section, m_blocks);   // < 2^31:
    // the launcher refuses problems of 2^31 tiles or more
    bool const single_tiles = units / grid < kMinRounds;
    int const items = single_tiles ? m_blocks * heads : units;
    if (single_tiles) {   // the order as before, sections as large as L2 allows
      section = fit;
      last = (heads - 1) / section;
    }
    Params p;
    p.num_m_blocks = m_blocks;
    p.num_heads = int(cute::get<1>(ps));
    p.heads_total = heads;
    p.grid = grid;
    p.last_section = last;
    p.per_section = cutlass::FastDivmod(single_tiles ? section * m_blocks : units_of(section, m_blocks));
    p.section_heads = cutlass::FastDivmod(section);
    p.last_heads = cutlass::FastDivmod(heads - last * section);
    p.whole_rounds = items / grid;
    p.rest_units = items - p.whole_rounds * grid;
    p.single_tiles = single_tiles;
    return p;
  }

  static dim3 get_grid_shape(Params const &params) { return dim3(params.grid, 1, 1); }

  // This CTA's place in round r: every other round in reverse.
  CUTLASS_DEVICE static int slot(int r) {
    int const g = int(gridDim.x), c = int(blockIdx.x);
    return r * g + ((r & 1) ? g - 1 - c : c);
  }

  // Tile `second` (0 or 1) of unit t: its Q tile row (-1: a one-tile unit has no second) and head.  Units
  // go by section, then pair (heaviest row first), then head (batch-major, head fastest: GQA groups
  // adjacent); with an odd mb, a section's units of two middle rows come last.
  // Single tiles: tile t by section, then row (heaviest first), then head.
  CUTLASS_DEVICE void tile(int t, int second, int &m, int &head) const {
    int s, i;
    params.per_section(s, i, t);
    bool const last = s == params.last_section;
    int const here = last ? int(params.last_heads) : int(params.section_heads);
    int const mb = params.num_m_blocks, pairs = params.single_tiles ? mb : mb / 2;
    head = s * int(params.section_heads);
    if (i < here * pairs) {
      int p, h;
      (last ? params.last_heads : params.section_heads)(p, h, i);
      head += h;
      m = second ? p : mb - 1 - p;
    } else {
      int const h = 2 * (i - here * pairs) + second;
      head += h;
      m = h < here ? pairs : -1;
    }
  }

  // Slot k's tile.  The rest's tiles, heaviest first: the first tiles of its units, then their second
  // tiles from the last unit back (a one-tile unit leaves a hole).
  CUTLASS_DEVICE void tile_of(int slot_k, int &m, int &head) const {
    if (params.single_tiles) {
      tile(slot(slot_k), 0, m, head);
      return;
    }
    int const whole = 2 * params.whole_rounds;
    if (slot_k < whole) {
      tile(slot(slot_k >> 1), slot_k & 1, m, head);
    } else {
      int const i = slot(slot_k - whole), r = params.rest_units, first = params.whole_rounds * params.grid;
      tile(i < r ? first + i : first + 2 * r - 1 - i, i >= r, m, head);
    }
  }

  // Holes (odd mb only) come at most three in a row: a whole round's one-tile unit, then the CTA's two
  // slots in the rest.  A fixed count of checks keeps the code straight.
  CUTLASS_DEVICE void skip_holes() {
    if ((params.num_m_blocks & 1) && !params.single_tiles) {
      CUTLASS_PRAGMA_UNROLL
      for (int n = 0; n < 3; ++n) {
        int m, head;
        if (k < end()) {
          tile_of(k, m, head);
          if (m < 0) ++k;
        }
      }
    }
  }

  CUTLASS_DEVICE bool is_valid() const { return k < end(); }

  CUTLASS_DEVICE auto get_block_coord() const {
    int m, head;
    tile_of(k, m, head);
    return cute::make_coord(m, cute::_0{}, cute::make_coord(head / params.num_heads, head % params.num_heads));
  }

  CUTLASS_DEVICE FaCausalPersistentScheduler &operator++() {
    ++k;
    skip_holes();
    return *this;
  }
};

// What Sm90Launcher asks of a device-level adapter (the GEMM families use CUTLASS's).
template <class Kernel>
struct FaAdapter {
  using Arguments = typename Kernel::Arguments;
  static cutlass::Status can_implement(Arguments const &args) {
    return Kernel::can_implement(args) ? cutlass::Status::kSuccess : cutlass::Status::kErrorInvalidProblem;
  }
  static size_t get_workspace_size(Arguments const &) { return 0; }
  static dim3 get_grid_shape(typename Kernel::Params const &params) { return Kernel::get_grid_shape(params); }
};

// The kernel's arguments from a problem in flash-attn's terms (strides in elements, < 2^31: Python
// checks).  Varlen tensors get the packed TMA views described at the top of this file.
template <class Kernel, class Element, class Problem>
typename Kernel::Arguments fa_arguments(Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using namespace cute;
  bool const varlen = p.cu_q != nullptr;
  auto view = [&](void const *ptr, int64_t row, int64_t batch, int64_t head) {
    auto stride = make_stride(int(row), _1{}, make_stride(int(varlen ? row : batch), int(head)));
    return make_tuple(static_cast<Element const *>(ptr), stride);
  };
  auto [q, dq] = view(p.q, p.q_row, p.q_batch, p.q_head);
  auto [k, dk] = view(p.k, p.k_row, p.k_batch, p.k_head);
  auto [v, dv] = view(p.v, p.v_row, p.v_batch, p.v_head);
  FaLengths const lengths_q{static_cast<int const *>(p.cu_q), p.max_q};
  FaLengths const lengths_k{static_cast<int const *>(p.cu_k), p.max_k};
  typename Kernel::Arguments args{
      make_shape(p.batch, p.num_heads, p.max_q, p.max_k, p.head_dim),
      {{q, dq, k, dk, v, dv},
       p.scale,
       p.num_kv_heads,
       lengths_q,
       lengths_k,
       varlen ? p.total_q : p.max_q,
       varlen ? p.total_k : p.max_k,
       varlen ? 1 : p.batch,
       varlen ? 1 : p.batch},
      {static_cast<Element *>(p.o), p.o_row, p.o_batch, p.o_head, static_cast<float *>(p.lse), p.lse_batch,
       p.lse_head, lengths_q, varlen ? p.total_q : p.max_q, varlen ? 1 : p.batch},
      hw_info};
  return args;
}

}  // namespace fused_gemm
