// The C ABI of an sm90 CUTLASS kernel library (GEMM-based families and attention): Sm90Launcher
// drives it.  Included once, at the end of a generated translation unit that has defined `FgKernel`
// (see templates/common/sm90.j2).
namespace {
using Launcher = fused_gemm::Sm90Launcher<FgKernel>;
}

#include "fused_gemm/common/launcher_exports.inl"
