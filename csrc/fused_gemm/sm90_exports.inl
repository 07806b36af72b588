// The C ABI of one generated library.  Included once, at the end of a generated translation
// unit, after it has defined `FgKernel` (see templates/gemm_sm90.cu.j2).
#define FG_EXPORT extern "C" __attribute__((visibility("default")))

FG_EXPORT int fg_abi_version(void) { return FG_ABI_VERSION; }

FG_EXPORT const char *fg_spec_uri(void) { return FgKernel::kUri; }

FG_EXPORT const char *fg_last_error(void) { return fused_gemm::last_error().c_str(); }

FG_EXPORT int fg_can_implement(const FgProblem *p) {
  return fused_gemm::Sm90Launcher<FgKernel>::can_implement(*p);
}

FG_EXPORT size_t fg_workspace_size(const FgProblem *p) {
  return fused_gemm::Sm90Launcher<FgKernel>::workspace_size(*p);
}

FG_EXPORT int fg_run(const FgProblem *p) { return fused_gemm::Sm90Launcher<FgKernel>::run(*p); }
