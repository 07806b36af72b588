// What every generated library shares at its C ABI: status codes, feature bits, the per-thread
// error message, and the guard that keeps C++ exceptions from crossing into Python.
#pragma once

#include <exception>
#include <string>
#include <utility>

#define FG_OK 0
#define FG_ERR_INVALID 1    // the problem does not fit this kernel (alignment, shape, workspace, launch option)
#define FG_ERR_CUTLASS 2    // CUTLASS refused or failed; fg_last_error() has its status string
#define FG_ERR_CUDA 3       // a CUDA runtime call failed; fg_last_error() has the CUDA message
#define FG_ERR_INTERNAL 4   // a C++ exception reached the ABI boundary and was caught there

#define FG_FEATURE_PDL 1u   // built with grid-dependency control: launches may use PDL

#define FG_EXPORT extern "C" __attribute__((visibility("default")))

namespace fused_gemm {

#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
constexpr unsigned kFeatures = FG_FEATURE_PDL;
#else
constexpr unsigned kFeatures = 0;
#endif

constexpr int kMaxDevices = 64;

inline std::string &last_error() {
  static thread_local std::string message;
  return message;
}

inline int fail(int code, std::string message) noexcept {
  try {
    last_error() = std::move(message);
  } catch (...) {  // out of memory while reporting: the code alone still says what kind of failure
  }
  return code;
}

// Every export runs its body through this: whatever C++ throws becomes FG_ERR_INTERNAL + message.
template <class Fn>
int guarded(Fn &&body) noexcept {
  try {
    return body();
  } catch (std::exception const &e) {
    return fail(FG_ERR_INTERNAL, std::string("C++ exception: ") + e.what());
  } catch (...) {
    return fail(FG_ERR_INTERNAL, "unknown C++ exception");
  }
}

}  // namespace fused_gemm
