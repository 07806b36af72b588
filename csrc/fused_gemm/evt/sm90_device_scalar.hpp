// An epilogue-visitor-tree leaf: alpha (a host float) times kCount fp32 scalars that live on the
// GPU (fp8's per-tensor scales), broadcast over the tile.
//
// CUTLASS's Sm90ScalarBroadcast can read scalars through pointers too, but it loads them when the
// fusion callbacks are constructed, at the very start of the kernel, before griddepcontrol.wait:
// under programmatic dependent launch the kernel may then start while the kernel that writes the
// scales (the dynamic quantizer, right before the GEMM) is still running, and read a stale scale.
// This node loads them when a consumer builds its store callbacks for a tile, after waiting on the
// grids it depends on (a no-op without PDL, or once they are done): a few cached loads per tile.
#pragma once

#include "cutlass/arch/grid_dependency_control.h"
#include "fused_gemm/evt/sm90_node.hpp"

namespace fused_gemm {

template <int kCount>
struct Sm90DeviceScalar : Sm90NodeWithoutWorkspace {
  static_assert(kCount >= 1, "at least one scalar on the GPU (otherwise Sm90ScalarBroadcast)");

  struct SharedStorage {};

  struct Arguments {
    float alpha = 1.f;
    float const *ptrs[kCount] = {};   // each points at one fp32
  };

  using Params = Arguments;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const &, Arguments const &args) {
    for (int i = 0; i < kCount; ++i) {
      if (args.ptrs[i] == nullptr) return false;
    }
    return true;
  }

  CUTLASS_HOST_DEVICE Sm90DeviceScalar() {}

  CUTLASS_HOST_DEVICE Sm90DeviceScalar(Params const &params, SharedStorage const &) : params_ptr(&params) {}

  Params const *params_ptr = nullptr;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }

  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  CUTLASS_DEVICE bool is_zero() const { return false; }   // unknown until loaded: never skip work on it

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const &) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE explicit ConsumerStoreCallbacks(float scalar) : scalar(scalar) {}

    float scalar;

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const &,
                                                             int, int, int) {
      cutlass::Array<float, FragmentSize> frg;
      frg.fill(scalar);
      return frg;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const &) {
    cutlass::arch::wait_on_dependent_grids();   // the scales' writer is done and its stores are visible
    float scalar = params_ptr->alpha;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kCount; ++i) {
      scalar *= *params_ptr->ptrs[i];
    }
    return ConsumerStoreCallbacks(scalar);
  }
};

}  // namespace fused_gemm
