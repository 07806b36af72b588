// How fast can any kernel read a decode weight once, in a CUDA graph of back-to-back calls?  Issue 9's
// decode bar is <= 1.2x the HBM floor (weight bytes / copy bandwidth); at 4096 x 4096 (32 MiB) the
// shipped kernels sit at 1.2-1.4x on the H200.  This times kernels that only read (no math), so the
// part of that gap a weight-streaming kernel can close is measured rather than guessed:
//   ldg    each CTA streams its slice of the buffer (from a 128-byte line; slices were unaligned before
//          2026-11-28) with ld.global.nc loads of 16 bytes (of 4 or 8 where named), U a thread in flight
//          (U loads, then their use: ptxas keeps them in flight only because the uses come last);
//   bulk   one thread a CTA issues cp.async.bulk copies into a shared-memory ring (mbarriers), the
//          other warps read each chunk from shared memory and free it.
// Each with and without PDL (launch_dependents at the start, every load after griddepcontrol.wait).
// --int4: issue 8's int4 decode shapes (N x K / 2 bytes) with ldg kernels of 4-, 8- and 16-byte loads a lane
// (the int4 decode kernel loads a 4-byte word a lane), so its floor bars have a read-alone reference too.
// Standalone (no torch); perf/device_check.sh step stream-floor builds and runs it on the GPU machine
// (STREAM_FLOOR_ARGS=--int4 for the int4 table):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a perf/stream_read_floor.cu -o stream_read_floor
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.cuh"

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__device__ __forceinline__ uint4 ldg_stream(uint4 const *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ldg_stream(uint2 const *p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ldg_stream(uint32_t const *p) {   // the int4 decode kernel's load: a word a lane
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
__device__ __forceinline__ uint32_t fold(uint2 v) { return v.x ^ v.y; }
__device__ __forceinline__ uint32_t fold(uint32_t v) { return v; }

struct Args {
  char const *src;
  size_t bytes;          // the whole buffer
  unsigned *sink;        // written only if the xor of everything hits a magic value: keeps the loads
  int pdl_early;
};

__device__ __forceinline__ void finish(Args const &a, uint32_t acc) {
  if (acc == 0x9e3779b9u) a.sink[blockIdx.x] = acc;
}

// Contiguous slices per CTA, loads of V (16 bytes unless named: a warp's load is 32 V), U per thread in flight.
template <int U, class V = uint4>
__global__ void ldg(Args a) {
  if (a.pdl_early) pdl_launch();
  pdl_wait();
  size_t const n = a.bytes / sizeof(V);
  constexpr size_t kLineElems = 128 / sizeof(V);   // slices start on 128-byte lines, as a decode kernel's loads do
  size_t const per_cta = ((n + gridDim.x - 1) / gridDim.x + kLineElems - 1) / kLineElems * kLineElems;
  size_t const begin = blockIdx.x * per_cta, end = min(begin + per_cta, n);
  V const *src = reinterpret_cast<V const *>(a.src);
  uint32_t acc = 0;
  for (size_t i = begin + threadIdx.x; i < end; i += size_t(blockDim.x) * U) {
    V v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      size_t const j = i + size_t(u) * blockDim.x;
      v[u] = j < end ? ldg_stream(src + j) : V{};
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= fold(v[u]);
  }
  if (!a.pdl_early) pdl_launch();
  finish(a, acc);
}

// Bulk copies into a ring of `stages` chunks of `chunk` bytes; warp 0's lane 0 produces, the other
// warps consume.
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(uint32_t(__cvta_generic_to_shared(bar))), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(uint32_t(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(uint32_t(__cvta_generic_to_shared(bar))) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" ::"r"(uint32_t(__cvta_generic_to_shared(bar))),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, void const *src, uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          uint32_t(__cvta_generic_to_shared(dst))),
      "l"(src), "r"(bytes), "r"(uint32_t(__cvta_generic_to_shared(bar)))
      : "memory");
}

constexpr int kMaxStages = 16;

__global__ void bulk(Args a, int chunk, int stages) {
  extern __shared__ __align__(128) char ring[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  int const consumers = blockDim.x / 32 - 1;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], consumers);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (a.pdl_early) pdl_launch();
  size_t const per_cta = (a.bytes / chunk + gridDim.x - 1) / gridDim.x;   // chunks
  size_t const begin = blockIdx.x * per_cta, end = min(begin + per_cta, size_t(a.bytes / chunk));
  int const n = int(end > begin ? end - begin : 0);
  uint32_t acc = 0;
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0) {
      pdl_wait();
      for (int i = 0; i < n; ++i) {
        int const s = i % stages;
        if (i >= stages) mbar_wait(&empty[s], ((i / stages) - 1) & 1);
        mbar_expect_tx(&full[s], chunk);
        bulk_load(ring + size_t(s) * chunk, a.src + (begin + i) * size_t(chunk), chunk, &full[s]);
      }
    }
  } else {
    int const t = threadIdx.x - 32, threads = consumers * 32;
    for (int i = 0; i < n; ++i) {
      int const s = i % stages;
      mbar_wait(&full[s], (i / stages) & 1);
      uint4 const *c = reinterpret_cast<uint4 const *>(ring + size_t(s) * chunk);
      for (int j = t; j < chunk / 16; j += threads) {
        uint4 const v = c[j];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
      __syncwarp();
      if (threadIdx.x % 32 == 0) mbar_arrive(&empty[s]);
    }
  }
  if (!a.pdl_early) pdl_launch();
  finish(a, acc);
}

struct Config {
  char const *name;
  void *fn;
  int ctas_per_sm, threads, smem, chunk, stages, grid = 0;   // grid: CTAs, overriding ctas_per_sm
};

// Median microseconds per call of a captured graph of `calls` calls (instantiated, warmed up, replayed 15
// times; the graph is destroyed).
static float replay_us(cudaGraph_t graph, cudaStream_t stream, int calls) {
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(exec, stream));
  std::vector<float> ts;
  for (int r = 0; r < 15; ++r) {
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms * 1e3f / calls);
  }
  std::sort(ts.begin(), ts.end());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return ts[ts.size() / 2];
}

static float time_graph(Config const &cfg, std::vector<char *> const &bufs, size_t bytes,
                        unsigned *sink, bool pdl, int sms, cudaStream_t stream) {
  int const calls = 64;
  if (cfg.smem) CHECK(cudaFuncSetAttribute(cfg.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg.smem));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) {
    Args a{bufs[i % bufs.size()], bytes, sink, pdl ? 1 : 0};
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(cfg.grid ? cfg.grid : cfg.ctas_per_sm * sms);
    lc.blockDim = dim3(cfg.threads);
    lc.dynamicSmemBytes = cfg.smem;
    lc.stream = stream;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    if (cfg.chunk) {
      void *params[] = {&a, const_cast<int *>(&cfg.chunk), const_cast<int *>(&cfg.stages)};
      CHECK(cudaLaunchKernelExC(&lc, cfg.fn, params));
    } else {
      void *params[] = {&a};
      CHECK(cudaLaunchKernelExC(&lc, cfg.fn, params));
    }
  }
  CHECK(cudaStreamEndCapture(stream, &graph));
  return replay_us(graph, stream, calls);
}

int main(int argc, char **argv) {
  bool const int4 = argc > 1 && std::string(argv[1]) == "--int4";
  int dev = 0;
  CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  int const sms = prop.multiProcessorCount;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Copy bandwidth as the benches measure it: 2 GiB copied, read + written bytes / time.
  size_t const big = size_t(2) << 30;
  char *s0, *s1;
  CHECK(cudaMalloc(&s0, big));
  CHECK(cudaMalloc(&s1, big));
  CHECK(cudaMemset(s0, 1, big));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> cts;
  for (int r = 0; r < 10; ++r) {
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaMemcpyAsync(s1, s0, big, cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cts.push_back(ms);
  }
  std::sort(cts.begin(), cts.end());
  double const copy_bw = 2.0 * big / (cts[cts.size() / 2] * 1e-3);
  CHECK(cudaFree(s1));

  unsigned *sink;
  CHECK(cudaMalloc(&sink, 1 << 20));
  std::printf("%s, %d SMs, copy bandwidth %.0f GB/s; CUDA graphs of 64 reads over buffers rotated past L2\n",
              prop.name, sms, copy_bw / 1e9);

  struct Shape {
    char const *name;
    size_t rows, cols;
  };
  std::vector<Shape> const bf16_shapes = {{"4096x4096", 4096, 4096}, {"6144x4096", 6144, 4096}, {"14336x4096", 14336, 4096},
                               {"4096x14336", 4096, 14336}};
  std::vector<Shape> const int4_shapes = {{"4096x4096", 4096, 4096}, {"28672x4096", 28672, 4096}, {"4096x14336", 4096, 14336}};
  int const big_smem = 4 * 32768;
  std::vector<Config> const bf16_configs = {
      {"ldg u4 256t x4", (void *)ldg<4>, 4, 256, 0, 0, 0},
      {"ldg u4 512t x2", (void *)ldg<4>, 2, 512, 0, 0, 0},
      {"ldg u8 256t x4", (void *)ldg<8>, 4, 256, 0, 0, 0},
      {"ldg u8 512t x2", (void *)ldg<8>, 2, 512, 0, 0, 0},
      {"ldg u4 1024t x2", (void *)ldg<4>, 2, 1024, 0, 0, 0},
      {"ldg u8 128t x8", (void *)ldg<8>, 8, 128, 0, 0, 0},
      {"ldg u16 256t x2", (void *)ldg<16>, 2, 256, 0, 0, 0},
      {"ldg u4 512t g256", (void *)ldg<4>, 2, 512, 0, 0, 0, 256},
      {"ldg u4 512t g128", (void *)ldg<4>, 2, 512, 0, 0, 0, 128},
      {"ldg u8 256t g256", (void *)ldg<8>, 2, 256, 0, 0, 0, 256},
      {"ldg u4 256t g512", (void *)ldg<4>, 2, 256, 0, 0, 0, 512},
      {"bulk 16K x8 160t x1", (void *)bulk, 1, 160, 8 * 16384, 16384, 8},
      {"bulk 32K x4 160t x1", (void *)bulk, 1, 160, big_smem, 32768, 4},
      {"bulk 8K x12 288t x1", (void *)bulk, 1, 288, 12 * 8192, 8192, 12},
      {"bulk 16K x6 160t x2", (void *)bulk, 2, 160, 6 * 16384, 16384, 6},
      {"bulk 8K x8 160t x2", (void *)bulk, 2, 160, 8 * 8192, 8192, 8},
      {"bulk 4K x16 160t x2", (void *)bulk, 2, 160, 16 * 4096, 4096, 16},
  };
  std::vector<Config> const int4_configs = {
      {"ldg b32 128t x4 U16", (void *)ldg<16, uint32_t>, 4, 128, 0, 0, 0},
      {"ldg b32 128t x4 U32", (void *)ldg<32, uint32_t>, 4, 128, 0, 0, 0},
      {"ldg b32 512t x1 U16", (void *)ldg<16, uint32_t>, 1, 512, 0, 0, 0},
      {"ldg b32 256t x4 U16", (void *)ldg<16, uint32_t>, 4, 256, 0, 0, 0},
      {"ldg b64 128t x4 U8", (void *)ldg<8, uint2>, 4, 128, 0, 0, 0},
      {"ldg b64 128t x4 U16", (void *)ldg<16, uint2>, 4, 128, 0, 0, 0},
      {"ldg b128 128t x4 U4", (void *)ldg<4, uint4>, 4, 128, 0, 0, 0},
      {"ldg b128 128t x4 U8", (void *)ldg<8, uint4>, 4, 128, 0, 0, 0},
      {"ldg b128 256t x4 U4", (void *)ldg<4, uint4>, 4, 256, 0, 0, 0},
  };
  std::printf("%-24s %-12s %9s %9s %9s %9s\n", "kernel", int4 ? "int4 weight" : "weight", "floor us", "us", "/floor",
              "pdl /floor");
  std::vector<Shape> const &shapes = int4 ? int4_shapes : bf16_shapes;
  std::vector<Config> const &configs = int4 ? int4_configs : bf16_configs;
  for (Shape const &sh : shapes) {
    size_t const bytes = int4 ? sh.rows * sh.cols / 2 : sh.rows * sh.cols * 2;
    double const floor_us = bytes / copy_bw * 1e6;
    int const nbuf = int(std::max<size_t>(3, (size_t(3) * prop.l2CacheSize + bytes - 1) / bytes));
    std::vector<char *> bufs(nbuf);
    for (auto &b : bufs) {
      CHECK(cudaMalloc(&b, bytes));
      CHECK(cudaMemset(b, 7, bytes));
    }
    // Copy of the same bytes (cudaMemcpyAsync in a graph) for reference.
    {
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < 64; ++i) CHECK(cudaMemcpyAsync(s0, bufs[i % nbuf], bytes, cudaMemcpyDeviceToDevice, stream));
      CHECK(cudaStreamEndCapture(stream, &graph));
      float const t = replay_us(graph, stream, 64);
      std::printf("%-24s %-12s %9.2f %9.2f %9.3f\n", "memcpy (read+write)", sh.name, floor_us, t, t / floor_us);
    }
    for (Config const &c : configs) {
      float const t = time_graph(c, bufs, bytes, sink, false, sms, stream);
      float const tp = time_graph(c, bufs, bytes, sink, true, sms, stream);
      std::printf("%-24s %-12s %9.2f %9.2f %9.3f %9.3f\n", c.name, sh.name, floor_us, t, t / floor_us, tp / floor_us);
    }
    for (auto b : bufs) CHECK(cudaFree(b));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(s0));
  CHECK(cudaFree(sink));
  return 0;
}
