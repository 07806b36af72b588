// The int4 family's layout of the weight codes and its CUTLASS arguments from FgInt4Problem
// (generator/int4/abi.py), in the caller's terms: the swap (D^T = W . X^T) is applied here.
#pragma once

#include <type_traits>

#include "cute/atom/mma_traits_sm90_gmma.hpp"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/gemm/sm90_stream_k.hpp"

namespace fused_gemm {

// The order in which the weight's codes sit in memory: CUTLASS's compute_memory_reordering_atom
// (tools/util/include/cutlass/util/mixed_dtype_utils.hpp, whose header drags in curand, so it is
// restated here) with the [0,2,4,6,1,3,5,7] value shuffle of example 55.  Each thread's 8 codes of
// a 16x16 (N x K) block are one 32-bit word, in the order the int4 -> 16-bit converter extracts
// them, so the mainloop reads shared memory 32 bits at a time and converts with a few PRMT/LOP3s.
// fused_gemm/int4/weight.py (REORDER_ATOM) writes exactly this order; tests check it against the
// table this atom prints.
template <class ElementMma>
constexpr auto int4_reordering_atom() {
  using namespace cute;
  using ValueShuffle = Layout<Shape<_2, _4>, Stride<_4, _1>>;   // [0,2,4,6,1,3,5,7]
  using MmaAtom = decltype(SM90::GMMA::rs_op_selector<ElementMma, ElementMma, float, Shape<_64, _16, _32>>());
  using MmaTraits = MMA_Traits<MmaAtom>;
  auto mk_shape_mma = select<0, 2>(typename MmaTraits::Shape_MNK{});
  auto tv_layout_mma = typename MmaTraits::ALayout{};
  ValueShuffle val_layout{};
  // One warp's (m, k) -> (thread, value) map; warps split the wgmma's A along M.
  auto tv_tiler_warp = make_shape(Int<32>{}, size<1>(tv_layout_mma));
  auto mk_shape_warp = shape_div(mk_shape_mma, size(typename MmaTraits::ThrID{}) / Int<32>{});
  auto tv_layout_mma_warp = make_layout_like(composition(tv_layout_mma, tv_tiler_warp));
  auto mk_layout_mma_warp = right_inverse(tv_layout_mma_warp).with_shape(mk_shape_warp);
  auto mk_layout_mma_trgt = blocked_product(mk_layout_mma_warp, Layout<Shape<_1, _1>>{});
  // Each thread's values contiguous, in the shuffled order.
  auto val_to_offset = logical_product(val_layout, size<1>(tv_layout_mma) / size(val_layout));
  auto thr_to_offset = make_layout(size<0>(tv_layout_mma_warp));
  auto tv_to_offset = select<1, 0>(logical_product(val_to_offset, thr_to_offset));
  return composition(tv_to_offset, mk_layout_mma_trgt);
}

// The weight [N, K] (batch 1) as the mainloop's A: 16x16 atoms, N-blocks first, then K-blocks.
template <class ElementMma>
using Int4WeightLayout = decltype(cute::tile_to_shape(
    int4_reordering_atom<ElementMma>(),
    cute::Layout<cute::Shape<int, int, int>, cute::Stride<int64_t, cute::_1, int64_t>>{}));

// The mixed-input mainloop's arguments from FgInt4Problem (the weight is the kernel's A: [N, K] codes,
// scales [K/group, N]).  Kernel provides: Problem, GemmKernel, ElementMma, kZeros.
template <class Kernel>
typename Kernel::GemmKernel::CollectiveMainloop::Arguments int4_mainloop_arguments(typename Kernel::Problem const &p) {
  using Mainloop = typename Kernel::GemmKernel::CollectiveMainloop;
  using ElementQuant = typename Mainloop::ElementA;
  using ElementX = typename Mainloop::ElementB;
  using ElementScale = typename Mainloop::ElementScale;
  int const n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  typename Mainloop::Arguments mainloop{};
  mainloop.ptr_A = static_cast<ElementQuant const *>(p.w);
  mainloop.dA = cute::tile_to_shape(int4_reordering_atom<typename Kernel::ElementMma>(), cute::make_shape(n, k, 1));
  mainloop.ptr_B = static_cast<ElementX const *>(p.a);
  mainloop.dB = leading_dim_stride<typename Kernel::GemmKernel::StrideB>(p.lda);
  mainloop.ptr_S = static_cast<ElementScale const *>(p.scales);
  mainloop.dS = typename Mainloop::StrideScale{cute::_1{}, p.n, 0};   // [K/group, N] row-major
  mainloop.group_size = static_cast<int>(p.group_size);
  if constexpr (Kernel::kZeros) {
    mainloop.ptr_Z = static_cast<ElementScale const *>(p.zeros);
  }
  return mainloop;
}

// Kernel provides: Problem, GemmKernel, ElementMma, kStreamK, kZeros, fusion_arguments(Problem).
template <class Kernel>
typename cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>::Arguments int4_arguments(
    typename Kernel::Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;
  using ElementCPtr = std::conditional_t<std::is_void_v<ElementC>, void, ElementC>;
  int const n = static_cast<int>(p.n), m = static_cast<int>(p.m), k = static_cast<int>(p.k);

  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {n, m, k, 1},
      int4_mainloop_arguments<Kernel>(p),
      {Kernel::fusion_arguments(p),
       static_cast<ElementCPtr const *>(p.c), leading_dim_stride<typename GemmKernel::StrideC>(p.ldc),
       static_cast<ElementD *>(p.d), leading_dim_stride<typename GemmKernel::StrideD>(p.ldd)},
      hw_info};
  set_scheduler_arguments(args.scheduler, p);
  if constexpr (Kernel::kStreamK) {
    auto &sched = args.scheduler;
    sched.splits = p.splits > 0 ? p.splits : 1;
    sched.decomposition_mode =
        static_cast<std::remove_reference_t<decltype(sched.decomposition_mode)>>(p.decomposition);
    sched.reduction_mode = static_cast<std::remove_reference_t<decltype(sched.reduction_mode)>>(p.reduction);
  }
  return args;
}

}  // namespace fused_gemm
