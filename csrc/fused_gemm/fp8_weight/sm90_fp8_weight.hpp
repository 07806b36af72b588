// The int4 family's fp8-weight (W8A16) kernels: CUTLASS arguments from FgInt4Problem
// (generator/int4/abi.py), in the caller's terms (the swap, D^T = W . X^T, is applied here).
//
// The weight is e4m3 [N, K] row-major as it is (fused_gemm.quantize_fp8_weight's, nn.Linear's
// layout): no reordering.  int4 codes are reordered so that a thread's eight nibbles arrive in one
// 32-bit word in the converter's order; an e4m3 pair (k, k+1) is already adjacent in a K-major row,
// and the converter (cvt.rn.f16x2.e4m3x2) takes exactly such a pair (the SASS is one LDS.U16 and one
// F2FP.F16.E4M3 a pair; bf16 adds CUTLASS's trip through f32, three more), so the plain layout
// loses nothing and the same tensor serves fp8_linear (W8A8) too.
//
// The mainloop only converts (CUTLASS's DirectConvert mode: it refuses a scale pointer): every e4m3
// value is exact in bf16 and fp16, and one scale per output channel factors out of the K sum, so the
// epilogue multiplies the fp32 accumulator by p.scales[n] (its first step, rendered by the
// template).  That skips the mainloop's scale loads and multiplies and the rounding of
// scale * code to 16 bits.
//
// Kept apart from csrc/fused_gemm/int4 (and in these kernels' cache keys only, through
// Int4Spec.csrc_includes), so the int4 kernels built before it stay valid.  The tail (the epilogue's
// arguments and the tile scheduler's) is int4_arguments' and gemm_arguments'.
#pragma once

#include <type_traits>

#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/gemm/sm90_stream_k.hpp"

namespace fused_gemm {

// Kernel provides: Problem, GemmKernel, kStreamK, fusion_arguments(Problem).
template <class Kernel>
typename cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>::Arguments fp8_weight_arguments(
    typename Kernel::Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using Mainloop = typename GemmKernel::CollectiveMainloop;
  using ElementQuant = typename Mainloop::ElementA;
  using ElementX = typename Mainloop::ElementB;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;
  using ElementCPtr = std::conditional_t<std::is_void_v<ElementC>, void, ElementC>;
  static_assert(Mainloop::KernelConversionMode == cutlass::detail::ConversionMode::DirectConvert,
                "fp8 weights are converted only: their per-channel scale is an epilogue step");
  int const n = static_cast<int>(p.n), m = static_cast<int>(p.m), k = static_cast<int>(p.k);

  typename Mainloop::Arguments mainloop{};
  mainloop.ptr_A = static_cast<ElementQuant const *>(p.w);
  mainloop.dA = leading_dim_stride<typename Mainloop::StrideA>(p.k);   // [N, K] contiguous rows
  mainloop.ptr_B = static_cast<ElementX const *>(p.a);
  mainloop.dB = leading_dim_stride<typename Mainloop::StrideB>(p.lda);

  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {n, m, k, 1},
      mainloop,
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
