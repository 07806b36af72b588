// The MUFU's exp2 rate on this GPU, by operand type: does a packed half-precision ex2 (f16x2, bf16x2) give two
// results for one fp32 slot?  Attention's softmax at D = 64 is bound by exp2s, so this decides whether a packed
// exponential can lift it.  Each thread runs 8 independent chains; the rate is results a second, and beside it the
// ratio to the fp32 instruction's.
//   bash perf/device_check.sh mufu-rate   (nvcc ... perf/mufu_rate.cu -o /tmp/mufu_rate && /tmp/mufu_rate)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "cuda_check.cuh"

template <int kOp>
__device__ __forceinline__ unsigned step(unsigned x) {
  unsigned y;
  if constexpr (kOp == 0) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=r"(y) : "r"(x));
  else if constexpr (kOp == 1) asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  else if constexpr (kOp == 2) asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  else {
    unsigned short h;
    asm volatile("ex2.approx.f16 %0, %1;" : "=h"(h) : "h"(static_cast<unsigned short>(x)));
    y = h;
  }
  return y ^ 0x80008000u;   // keep the argument negative and bounded: 2^-|x| stays in (0, 1]
}

template <int kOp>
__global__ void rate(unsigned *out, int iters) {
  unsigned v[8];
  for (int i = 0; i < 8; ++i) v[i] = (threadIdx.x * 8 + i) | 0xbc00bc00u;
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = step<kOp>(v[i]);
  }
  unsigned s = 0;
  for (int i = 0; i < 8; ++i) s ^= v[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int kOp>
double run(const char *name, int per_instr, int sms, double f32_rate) {
  int const threads = 1024, blocks = sms * 2, iters = 4096;
  unsigned *out;
  CHECK(cudaMalloc(&out, sizeof(unsigned) * threads * blocks));
  rate<kOp><<<blocks, threads>>>(out, 64);   // warm-up
  CHECK(cudaGetLastError());
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a));
  rate<kOp><<<blocks, threads>>>(out, iters);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  double const results = double(threads) * blocks * iters * 8 * per_instr / (ms * 1e-3);
  printf("%-22s %8.1f G results/s  %6.1f G results/s an SM  %5.2fx ex2.f32\n", name, results / 1e9,
         results / 1e9 / sms, f32_rate > 0 ? results / f32_rate : 1.0);
  CHECK(cudaFree(out));
  return results;
}

int main() {
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  double const f32 = run<0>("ex2.approx.ftz.f32", 1, p.multiProcessorCount, 0);
  run<1>("ex2.approx.f16x2", 2, p.multiProcessorCount, f32);
  run<2>("ex2.approx.ftz.bf16x2", 2, p.multiProcessorCount, f32);
  run<3>("ex2.approx.f16", 1, p.multiProcessorCount, f32);
  return 0;
}
