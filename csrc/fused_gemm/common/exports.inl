// The exports every family's library has.  Included at the end of a generated translation unit
// that has defined `FgKernel` (kUri, kAbiVersion, Problem).
FG_EXPORT int fg_abi_version(void) { return FgKernel::kAbiVersion; }

FG_EXPORT const char *fg_spec_uri(void) { return FgKernel::kUri; }

FG_EXPORT const char *fg_last_error(void) { return fused_gemm::last_error().c_str(); }

FG_EXPORT unsigned fg_features(void) { return fused_gemm::kFeatures; }

FG_EXPORT size_t fg_problem_size(void) { return sizeof(typename FgKernel::Problem); }
