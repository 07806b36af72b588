// The warp-specialized forward kernel that runs FaMainloop and FaEpilogue (sm90_fmha.hpp): the roles
// of CUTLASS example 88's kernel (one producer warpgroup whose K/V warp and Q warp issue TMA loads,
// 2 or 3 consumer warpgroups of 64 Q rows each), without its reducer warp (a no-op in the forward
// pass), and with a choice example 88 does not give: whether the consumers take turns at the epilogue.
//
// Example 88 always orders the epilogues (its `if constexpr (kIsEpilogueLocked) ;` ends at the stray
// semicolon): a warpgroup's epilogue waits for the previous warpgroup's epilogue of the same tile, the
// first's for the last's of the CTA's previous tile.  The same barrier (two turns a warpgroup per tile)
// keeps a second round-robin for each tile's first QK^T; a kernel with one turn a tile (free epilogues,
// or chained tiles with ordered ones) keeps one round-robin, in which the first warpgroup may run up to
// two turns ahead of the last.  Neither order wins everywhere (perf/sweep_attention.py --epilogues, H100 and H200): free epilogues
// (kOrderedEpilogue false) gain 1-3.5% at D = 64 on short tiles without a mask and on long causal
// ones, turns win 2.4-4.7% on short causal tiles at D = 64, the rest ties; so the choice is per kernel
// (AttentionSpec.ordered_epilogue, from generator/attention/heuristics.py's table).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/pipeline.hpp"

namespace fused_gemm {

// kCtasPerSm: 2 for one consumer warpgroup a CTA (64-row Q tiles), so that one CTA's tile start, softmax
// tail and epilogue run under the other's GEMMs.
template <class Mainloop, class Epilogue, class Scheduler, bool kOrderedEpilogue, int kCtasPerSm = 1>
struct FaKernel {
  static constexpr bool kPersistent = Mainloop::kIsPersistent;   // the mainloop releases Q stages only then
  static constexpr int NumMmaWarpGroups = Mainloop::NumMmaWarpGroups;
  using TileShape = typename Mainloop::TileShape;
  using ClusterShape = typename Mainloop::ClusterShape;
  static_assert(cute::size(ClusterShape{}) == 1, "the loads and pipelines below assume one CTA a cluster");

  using PipelineQ = typename Mainloop::MainloopPipelineQ;     // a Q stage per consumer warpgroup (two: chained tiles)
  using PipelineKV = typename Mainloop::MainloopPipeline;     // the K/V ring
  using StateQ = cutlass::PipelineState<PipelineQ::Stages>;
  using StateKV = cutlass::PipelineState<PipelineKV::Stages>;
  // The consumers' turns (see the top): each tile's first QK^T, unless chained, and the epilogues when
  // kOrderedEpilogue.
  using OrderBarrier = cutlass::OrderedSequenceBarrier<2, NumMmaWarpGroups>;

  // A persistent CTA's next tile loads while this one's epilogue stages O, so the O tiles need their
  // own memory; one tile per CTA lets the epilogue reuse the mainloop's (see FaEpilogue).
  struct TensorStruct {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::TensorStorage epilogue[NumMmaWarpGroups];
  };
  union TensorUnion {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::TensorStorage epilogue[NumMmaWarpGroups];
  };
  // The overlay: warpgroup c's O tile covers Q stage c (the mainloop's storage opens with the Q stages).
  static_assert(kPersistent || sizeof(typename Epilogue::TensorStorage) == Mainloop::kOuterLoadBytes,
                "an O tile must cover exactly its warpgroup's Q stage");
  struct SharedStorage {
    std::conditional_t<kPersistent, TensorStruct, TensorUnion> tensors;
    alignas(16) typename PipelineKV::SharedStorage kv;
    alignas(16) typename PipelineQ::SharedStorage q;
    alignas(16) typename OrderBarrier::SharedStorage order;
    alignas(16) cutlass::arch::ClusterBarrier load_warps;   // the first Q and K_0 loads go before the rest
  };
  static constexpr int SharedStorageSize = sizeof(SharedStorage);
  // kCtasPerSm CTAs an SM: 228 KB of shared memory, 1 KB of it reserved per CTA (the spec sizes the K/V ring).
  static_assert(kCtasPerSm * (SharedStorageSize + 1024) <= 228 * 1024, "kCtasPerSm CTAs do not fit an SM");
  static_assert(kCtasPerSm == 1 || NumMmaWarpGroups == 1, "two CTAs an SM hold one consumer warpgroup each");

  using ProblemShape = cute::tuple<int, int, int, int, int>;   // (B, H, Sq, Sk, D)
  struct Arguments {
    ProblemShape problem_size;
    typename Mainloop::Arguments mainloop;
    typename Epilogue::Arguments epilogue;
    cutlass::KernelHardwareInfo hw_info;
  };
  struct Params {
    ProblemShape problem_size;
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    typename Scheduler::Params scheduler;
  };

  using ArchTag = cutlass::arch::Sm90;
  static constexpr int MinBlocksPerMultiprocessor = kCtasPerSm;
  static constexpr int MaxThreadsPerBlock = (NumMmaWarpGroups + 1) * cutlass::NumThreadsPerWarpGroup;
  // The CTA's share of the register file split as example 88 splits it: the producers keep 24, the
  // consumers share the rest.
  static constexpr uint32_t kLoadRegisters = 24;
  static constexpr uint32_t kTotalRegisters =
      (64 * 1024 / kCtasPerSm / MaxThreadsPerBlock / 8) * 8 * MaxThreadsPerBlock / cutlass::NumThreadsPerWarpGroup;
  static constexpr uint32_t kMmaRegisters = ((kTotalRegisters - kLoadRegisters) / NumMmaWarpGroups / 8) * 8;

  static bool can_implement(Arguments const &args) { return Mainloop::can_implement(args.problem_size, args.mainloop); }
  static dim3 get_grid_shape(Params const &params) { return Scheduler::get_grid_shape(params.scheduler); }
  static dim3 get_block_shape() { return dim3(MaxThreadsPerBlock, 1, 1); }

  static Params to_underlying_arguments(Arguments const &args, void *workspace) {
    cutlass::KernelHardwareInfo hw_info = args.hw_info;   // a persistent grid has kCtasPerSm CTAs an SM
    if (kCtasPerSm > 1) {
      if (hw_info.sm_count <= 0)
        hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
      hw_info.sm_count *= kCtasPerSm;
    }
    return {args.problem_size, Mainloop::to_underlying_arguments(args.problem_size, args.mainloop, workspace),
            Epilogue::to_underlying_arguments(args.problem_size, args.epilogue, workspace),
            Scheduler::to_underlying_arguments(args.problem_size, hw_info, ClusterShape{}, TileShape{})};
  }

  // Calls f(c) with this warpgroup's consumer index c as a compile-time constant, as example 88 writes
  // its per-warpgroup offsets: used as a runtime value, the index cost the three-warpgroup kernels 32
  // bytes of spills at their 160 registers.
  template <class F>
  CUTLASS_DEVICE static void with_consumer_index(int consumer, F &&f) {
    cute::for_each(cute::make_int_sequence<NumMmaWarpGroups>{}, [&](auto c) {
      if (consumer == c) f(c);
    });
  }

  CUTLASS_DEVICE void operator()(Params const &params, char *smem) {
#if defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
    using namespace cute;
    enum ProducerWarp { kLoadKV = 1, kLoadQ = 2 };
    auto &storage = *reinterpret_cast<SharedStorage *>(smem);
    int const warp_group = cutlass::canonical_warp_group_idx();
    int const producer_warp = cutlass::canonical_warp_idx_sync() % cutlass::NumWarpsPerWarpGroup;
    int const consumer = warp_group - 1;                    // -1: the producer warpgroup
    int const lane_predicate = cute::elect_one_sync();

    if (warp_group == 0 && producer_warp == 0 && lane_predicate) {
      Mainloop::prefetch_tma_descriptors(params.mainloop);
      Epilogue::prefetch_tma_descriptor(params.epilogue);
    }

    typename PipelineQ::Params q_params;
    q_params.transaction_bytes = Mainloop::kOuterLoadBytes;
    q_params.is_leader = lane_predicate && warp_group == 0 && producer_warp == kLoadQ;
    q_params.num_consumers = cutlass::NumThreadsPerWarpGroup;   // each Q stage belongs to one warpgroup
    typename PipelineKV::Params kv_params;
    kv_params.transaction_bytes = Mainloop::kInnerLoadBytes;
    kv_params.is_leader = lane_predicate && warp_group == 0 && producer_warp == kLoadKV;
    kv_params.num_consumers = NumMmaWarpGroups * cutlass::NumThreadsPerWarpGroup;
    if (warp_group == 0) {
      q_params.role = producer_warp == kLoadQ ? PipelineQ::ThreadCategory::Producer : PipelineQ::ThreadCategory::NonParticipant;
      kv_params.role = producer_warp == kLoadKV ? PipelineKV::ThreadCategory::Producer : PipelineKV::ThreadCategory::NonParticipant;
    } else {
      q_params.role = PipelineQ::ThreadCategory::Consumer;
      kv_params.role = PipelineKV::ThreadCategory::Consumer;
    }
    PipelineQ pipeline_q(storage.q, q_params, Shape<_1, _1, _1>{});
    PipelineKV pipeline_kv(storage.kv, kv_params, ClusterShape{});

    typename OrderBarrier::Params order_params;
    order_params.group_id = consumer;
    order_params.group_size = cutlass::NumThreadsPerWarpGroup;
    OrderBarrier order(storage.order, order_params);

    if (warp_group == 0 && producer_warp == 0 && lane_predicate) storage.load_warps.init(2 * cutlass::NumThreadsPerWarp);
    cutlass::arch::fence_barrier_init();
    __syncthreads();   // barriers initialised and visible before anyone waits on them

    Scheduler scheduler{params.scheduler};
    Mainloop mainloop;
    if (warp_group == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegisters>();
      if (producer_warp == kLoadKV) {
        StateKV write = cutlass::make_producer_start_state<PipelineKV>();
        StateQ unused_q = cutlass::make_producer_start_state<PipelineQ>();
        bool first = true;
        CUTLASS_PRAGMA_NO_UNROLL
        for (; scheduler.is_valid(); ++scheduler) {
          mainloop.template load_kv_maybe_q<false>(0, scheduler.get_block_coord(), params.mainloop, params.problem_size,
                                                   pipeline_kv, write, pipeline_q, unused_q, storage.tensors.mainloop,
                                                   storage.load_warps, first);
          first = false;
        }
      } else if (producer_warp == kLoadQ) {
        StateQ write = cutlass::make_producer_start_state<PipelineQ>();
        bool first = true;
        CUTLASS_PRAGMA_NO_UNROLL
        for (; scheduler.is_valid(); ++scheduler) {
          mainloop.load_maybe_q(scheduler.get_block_coord(), params.mainloop, params.problem_size, pipeline_q, write,
                                storage.tensors.mainloop, storage.load_warps, first);
          first = false;
        }
      }
      return;
    }

    cutlass::arch::warpgroup_reg_alloc<kMmaRegisters>();
    StateKV read_kv;
    StateQ read_q;
    int unused_reducer = 0, unused_reducer_state = 0;   // example 88's mainloop signature; the forward pass has none
    auto acc_qk = Mainloop::make_acc_qk();              // chained tiles: the next tile's S_0, issued early
    if constexpr (Mainloop::kChain) {
      if (scheduler.is_valid()) {
        StateQ q = read_q;
        with_consumer_index(consumer, [&](auto c) { q.advance(c); });
        Mainloop::issue_first_qk(pipeline_kv, read_kv, pipeline_q, q, storage.tensors.mainloop, acc_qk);
      }
    }
    CUTLASS_PRAGMA_NO_UNROLL
    for (; scheduler.is_valid(); ++scheduler) {
      auto const blk = scheduler.get_block_coord();
      auto wg = blk;                                            // this warpgroup's 64 rows of the Q tile
      get<0>(wg) = NumMmaWarpGroups * get<0>(blk);
      with_consumer_index(consumer, [&](auto c) {
        get<0>(wg) += c;
        read_q.advance(c);                                      // and its Q stage
      });
      auto result = [&] {
        if constexpr (Mainloop::kChain) {
          Scheduler next = scheduler;
          ++next;
          bool const issue_next = next.is_valid();
          return mainloop.compute_chained(blk, wg, params.mainloop, params.problem_size, pipeline_kv, read_kv,
                                          pipeline_q, read_q, storage.tensors.mainloop, order, acc_qk, issue_next);
        } else {
          return mainloop.compute(blk, wg, params.mainloop, params.problem_size, pipeline_kv, read_kv, pipeline_q,
                                  read_q, unused_reducer, unused_reducer_state, storage.tensors.mainloop, order);
        }
      }();
      with_consumer_index(consumer, [&](auto c) { read_q.advance(NumMmaWarpGroups - c); });
      if constexpr (kOrderedEpilogue) order.wait();
      Epilogue{}(typename Mainloop::TileShapePV{}, wg, result, typename Mainloop::TiledMmaPV{}, params.problem_size,
                 params.epilogue, storage.tensors.epilogue[consumer]);
      if constexpr (kOrderedEpilogue) order.arrive();
    }
    if constexpr (Mainloop::kChain) cute::warpgroup_wait<0>();   // the last tile's stand-in S_0
    Epilogue::drain();                                            // the last TMA store has read its O tile
#endif
  }
};

}  // namespace fused_gemm
