// What an epilogue-visitor-tree leaf of ours owes CUTLASS's EVT besides its own work, when its Params
// are its Arguments and it needs no workspace: the EVT calls these on every node.
#pragma once

#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"

namespace fused_gemm {

struct Sm90NodeWithoutWorkspace {
  template <class ProblemShape, class Arguments>
  static constexpr Arguments to_underlying_arguments(ProblemShape const &, Arguments const &args, void *) {
    return args;
  }

  template <class ProblemShape, class Arguments>
  static size_t get_workspace_size(ProblemShape const &, Arguments const &) {
    return 0;
  }

  template <class ProblemShape, class Arguments>
  static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *, cudaStream_t,
                                              cutlass::CudaHostAdapter * = nullptr) {
    return cutlass::Status::kSuccess;
  }
};

}  // namespace fused_gemm
