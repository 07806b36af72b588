// CUTLASS's sm90 FP8 mainloop (fp32 promotion: no fast accumulation) with its promotions taken off
// the tensor cores' critical path.
//
// wgmma sums e4m3 products at reduced precision, so the precise mainloop sums each interval of k-tiles
// in a temporary accumulator and adds that into the fp32 result.  CUTLASS's GmmaFP8Accumulation keeps
// one temporary: it waits for every wgmma in flight (warpgroup_wait<0>) before each promotion, and the
// next k-tile's wgmmas, which overwrite the temporary, issue only after the adds.  The two consumer
// warpgroups of a cooperative tile wait on the same stages, so they drain together and the tensor
// cores idle at every promotion.
//
// Here two temporaries alternate between intervals.  An interval's first k-tile issues into the other
// temporary (its first wgmma with scale-d 0: nothing to clear), and once the wait that leaves only
// those wgmmas in flight returns, the interval before is added into the result while they run.
// Nothing waits for an empty pipe but the tile's end.  One more accumulator (64 registers a thread
// for a warpgroup's 64x128).
//
// ptxas serialises the wgmmas (C7514) when it cannot tell which temporary is still being written at a
// promotion: every loop body here is straight-line, each promotion right after a wait<1> that follows
// the other temporary's wgmmas.  (Loops of a run-time interval length tripped it.)  The intervals are
// kIntervalTiles k-tiles (the spec's promotion); k-tiles left over after the last whole pair of
// intervals are promoted one at a time.
//
// Everything else (shared storage, TMA loads, pipeline, arguments, mma_tail) is the base collective's,
// and so is the order of stage releases: a k-tile's stage is released once the next k-tile's wgmmas
// are issued and it has been waited for; mma_tail releases the last.
#pragma once

#include "cutlass/gemm/collective/collective_builder.hpp"

namespace fused_gemm {

template <class Base, int kIntervalTiles>
struct Sm90Fp8PromotionOverlap : Base {
  static_assert(kIntervalTiles >= 1, "a promotion interval is whole k-tiles");
  using Base::Base;

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(typename Base::MainloopPipeline pipeline, typename Base::PipelineState smem_pipe_read,
                          FrgTensorC &accum, int k_tile_count, int thread_idx,
                          typename Base::TensorStorage &shared_tensors, typename Base::Params const &) {
    using namespace cute;
    using TiledMma = typename Base::TiledMma;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), typename Base::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), typename Base::SmemLayoutB{});
    constexpr int kMmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    Layout warp_group_thread_layout = make_layout(Int<kMmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int const warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));   // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));   // (MMA,MMA_N,MMA_K,PIPE)

    Tensor temp0 = make_fragment_like(accum);
    Tensor temp1 = make_fragment_like(accum);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) accum(i) = 0.f;
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) return;

    auto smem_pipe_release = smem_pipe_read;
    bool first = true;
    // One k-tile's wgmmas into temp (overwriting it when `restart`), then a wait that leaves only them
    // in flight, and the previous k-tile's stage released.
    auto step = [&](auto &temp, bool restart) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      int const read_stage = smem_pipe_read.index();
      tiled_mma.accumulate_ = restart ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
      warpgroup_fence_operand(temp);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), temp);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      warpgroup_fence_operand(temp);
      if (!first) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
      first = false;
      ++smem_pipe_read;
    };
    // A finished interval's sums into the fp32 result.
    auto promote = [&](auto &temp) {
      warpgroup_fence_operand(temp);
      warpgroup_fence_operand(accum);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += temp(i);
      warpgroup_fence_operand(accum);
    };
    // An interval's k-tiles after its first, into temp.
    auto rest_of_interval = [&](auto &temp) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 1; i < kIntervalTiles; ++i) step(temp, false);
    };

    // The first interval (or k-tile, for fewer k-tiles than an interval) into temp0.
    int k = 1;
    step(temp0, true);
    if (k_tile_count >= kIntervalTiles) {
      rest_of_interval(temp0);
      k = kIntervalTiles;
    }
    // Whole pairs of intervals; temp0 holds the interval before each.
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k + 2 * kIntervalTiles <= k_tile_count; k += 2 * kIntervalTiles) {
      step(temp1, true);
      promote(temp0);
      rest_of_interval(temp1);
      step(temp0, true);
      promote(temp1);
      rest_of_interval(temp0);
    }
    // What is left (fewer than two intervals), a k-tile at a time.
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k + 2 <= k_tile_count; k += 2) {
      step(temp1, true);
      promote(temp0);
      step(temp0, true);
      promote(temp1);
    }
    if (k < k_tile_count) {
      step(temp1, true);
      promote(temp0);
      warpgroup_wait<0>();
      promote(temp1);
    } else {
      warpgroup_wait<0>();
      promote(temp0);
    }
    warpgroup_fence_operand(accum);
  }
};

}  // namespace fused_gemm
