// The gated int4 kernels' CUTLASS arguments: the int4 family's mixed-input mainloop (the weight is
// quantize_int4(pack_gate_up(w_gate, w_up)), the kernel's A operand) with the pair epilogue of the
// gated family (GatedPairOp, swap-AB: a thread holds packed rows m and m + 8, a gate and its up).
#pragma once

#include "fused_gemm/gated/sm90_gated.hpp"   // GatedPairOp, and the pair epilogue it plugs into
#include "fused_gemm/int4/sm90_int4.hpp"

namespace fused_gemm {

// Kernel provides: Problem (FgInt4Problem: n = the packed weight's 2I rows), GemmKernel,
// ElementMma, kZeros, epilogue_arguments(Problem).  A stream-K kernel runs with its scheduler's
// defaults (Int4Op refuses other launch options for gated specs).
template <class Kernel>
typename cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>::Arguments int4_gated_arguments(
    typename Kernel::Problem const &p, cutlass::KernelHardwareInfo const &hw_info) {
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {static_cast<int>(p.n), static_cast<int>(p.m), static_cast<int>(p.k), 1},
                                int4_mainloop_arguments<Kernel>(p),
                                Kernel::epilogue_arguments(p),
                                hw_info};
  set_scheduler_arguments(args.scheduler, p);
  return args;
}

}  // namespace fused_gemm
