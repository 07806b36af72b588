// The MUFU's exp2 rate on this GPU, by operand type: does a packed half-precision ex2 (f16x2, bf16x2) give two
// results for one fp32 slot?  Attention's softmax at D = 64 is bound by exp2s, so this decides whether a packed
// exponential can lift it.  Each thread runs 8 independent chains; rate = results / (SM clocks x SMs).
//   bash perf/device_check.sh mufu-rate   (nvcc ... perf/mufu_rate.cu -o /tmp/mufu_rate && /tmp/mufu_rate)
#include <cstdio>
#include <cuda_runtime.h>

template <int kOp>
__device__ __forceinline__ unsigned step(unsigned x) {
  unsigned y;
  if constexpr (kOp == 0) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=r"(y) : "r"(x));
  else if constexpr (kOp == 1) asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  else if constexpr (kOp == 2) asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
  else asm volatile("ex2.approx.f16 %0, %1;" : "=h"(*reinterpret_cast<unsigned short *>(&y)) : "h"(static_cast<unsigned short>(x)));
  return y ^ 0x80008000u;   // keep the argument negative and bounded: 2^-|x| stays in (0, 1]
}

template <int kOp>
__global__ void rate(unsigned *out, int iters, long long *clocks) {
  unsigned v[8];
  for (int i = 0; i < 8; ++i) v[i] = (threadIdx.x * 8 + i) | 0xbc00bc00u;
  long long t0 = clock64();
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = step<kOp>(v[i]);
  }
  long long t1 = clock64();
  unsigned s = 0;
  for (int i = 0; i < 8; ++i) s ^= v[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) clocks[blockIdx.x] = t1 - t0;
}

template <int kOp>
void run(const char *name, int per_instr, int sms) {
  int const threads = 1024, blocks = sms * 2, iters = 4096;
  unsigned *out; long long *clk;
  cudaMalloc(&out, sizeof(unsigned) * threads * blocks);
  cudaMalloc(&clk, sizeof(long long) * blocks);
  rate<kOp><<<blocks, threads>>>(out, 64, clk);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  rate<kOp><<<blocks, threads>>>(out, iters, clk);
  cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  long long h[1024]; cudaMemcpy(h, clk, sizeof(long long) * blocks, cudaMemcpyDeviceToHost);
  double mean_clk = 0; for (int i = 0; i < blocks; ++i) mean_clk += double(h[i]) / blocks;
  double instr = double(threads) * blocks * iters * 8;
  // two CTAs share each SM, so an SM's clocks are one CTA's
  double per_sm_clk = instr / sms / mean_clk;
  printf("%-22s %8.2f instr/clk/SM %8.2f results/clk/SM  %8.1f G results/s\n", name, per_sm_clk,
         per_sm_clk * per_instr, instr * per_instr / (ms * 1e-3) / 1e9);
  cudaFree(out); cudaFree(clk);
}

int main() {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  run<0>("ex2.approx.ftz.f32", 1, p.multiProcessorCount);
  run<1>("ex2.approx.f16x2", 2, p.multiProcessorCount);
  run<2>("ex2.approx.ftz.bf16x2", 2, p.multiProcessorCount);
  run<3>("ex2.approx.f16", 1, p.multiProcessorCount);
  return 0;
}
