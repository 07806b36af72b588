// The C ABI of a kernel library (any family): the exports every library has, and the four that
// drive its launcher.  Included once, at the end of a generated translation unit, after it has
// defined `FgKernel` and, in an anonymous namespace, `Launcher` (prepare_device, can_implement,
// workspace_size and run on FgKernel::Problem).  Every body runs under guarded(): no C++ exception
// crosses into the caller.
#include "fused_gemm/common/exports.inl"

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
