// Example 41's kernel_forward.h includes <curand_kernel.h> unconditionally but uses cuRAND only for
// dropout, under HAS_PYTORCH (never defined here).  Minimal CUDA installs and the pip toolchain ship
// no cuRAND, so sm80 attention builds put this folder on the include path: this header forwards to
// the real one where it exists and is empty otherwise.
#pragma once
#if __has_include_next(<curand_kernel.h>)
#include_next <curand_kernel.h>
#endif
