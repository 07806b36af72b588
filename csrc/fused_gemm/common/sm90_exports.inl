// The C ABI of an sm90 kernel library (any family).  Included once, at the end of a generated
// translation unit, after it has defined `FgKernel` (see templates/common/sm90.j2).  Every body
// runs under guarded(): no C++ exception crosses into the caller.
#include "fused_gemm/common/exports.inl"

namespace {
using Launcher = fused_gemm::Sm90Launcher<FgKernel>;
}

FG_EXPORT int fg_prepare(int device) {
  return fused_gemm::guarded([&] { return Launcher::prepare_device(device); });
}

FG_EXPORT int fg_can_implement(const FgKernel::Problem *p) {
  return fused_gemm::guarded([&] { return Launcher::can_implement(*p); });
}

FG_EXPORT int fg_workspace_size(const FgKernel::Problem *p, size_t *bytes) {
  return fused_gemm::guarded([&] { return Launcher::workspace_size(*p, bytes); });
}

FG_EXPORT int fg_run(const FgKernel::Problem *p) {
  return fused_gemm::guarded([&] { return Launcher::run(*p); });
}
