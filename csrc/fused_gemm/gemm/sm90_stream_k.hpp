// A stream-K tile scheduler that compiles with griddepcontrol (PDL) enabled.
//
// CUTLASS 4.2's PersistentTileSchedulerSm90StreamK::is_last_tile() is const but passes the
// member unit_iter_start_ to a function taking it by non-const reference, so any kernel built
// with CUTLASS_ENABLE_GDC_FOR_SM90 (the only caller) fails to compile.  We derive from it and
// redefine is_last_tile() on a copy of the scheduler, which is what the original comment intends
// ("it needs a copy").  Select it with the tag fused_gemm::StreamKScheduler.
#pragma once

#include "cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

namespace fused_gemm {

struct StreamKScheduler {};  // tag, used like cutlass::gemm::StreamKScheduler

template <class TileShape, class ClusterShape>
class Sm90StreamKScheduler
    : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;

 public:
  using Base::Base;

  CUTLASS_DEVICE bool is_last_tile(typename Base::WorkTileInfo work_tile_info, uint32_t advance_count = 1) const {
    if (this->continue_current_work(work_tile_info)) {
      return false;
    }
    Base next = *this;  // looking ahead must not move this scheduler
    next.advance_to_next_work(advance_count);
    return not next.get_current_work().is_valid();
  }
};

}  // namespace fused_gemm

namespace cutlass::gemm::kernel::detail {

template <class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<fused_gemm::StreamKScheduler, arch::Sm90, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = fused_gemm::Sm90StreamKScheduler<TileShape, ClusterShape>;
};

}  // namespace cutlass::gemm::kernel::detail
