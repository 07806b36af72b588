// The GEMM family's CUTLASS arguments from its Problem (generator/gemm/abi.py), in the caller's
// terms: swap-AB is applied here, so Python never sees it.
#pragma once

#include <type_traits>

#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/gemm/sm90_stream_k.hpp"

namespace fused_gemm {

// Kernel provides: Problem, GemmKernel, kSwapAB, kStreamK, fusion_arguments(Problem).
template <class Kernel>
typename cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>::Arguments gemm_arguments(
    typename Kernel::Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using ElementA = typename Gemm::ElementA;
  using ElementB = typename Gemm::ElementB;
  using ElementC = typename GemmKernel::ElementC;
  using ElementD = typename GemmKernel::ElementD;
  using ElementCPtr = std::conditional_t<std::is_void_v<ElementC>, void, ElementC>;
  // swap-AB runs D^T[N,M] = B[N,K] . A[M,K]^T: the weight becomes the kernel's A operand.
  int64_t const M = Kernel::kSwapAB ? p.n : p.m;
  int64_t const N = Kernel::kSwapAB ? p.m : p.n;
  void const *ptr_a = Kernel::kSwapAB ? p.b : p.a;
  void const *ptr_b = Kernel::kSwapAB ? p.a : p.b;
  int64_t const ld_a = Kernel::kSwapAB ? p.ldb : p.lda;
  int64_t const ld_b = Kernel::kSwapAB ? p.lda : p.ldb;

  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(M), static_cast<int>(N), static_cast<int>(p.k), 1},
      {static_cast<ElementA const *>(ptr_a), leading_dim_stride<typename GemmKernel::StrideA>(ld_a),
       static_cast<ElementB const *>(ptr_b), leading_dim_stride<typename GemmKernel::StrideB>(ld_b)},
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
