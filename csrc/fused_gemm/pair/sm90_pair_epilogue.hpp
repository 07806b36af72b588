// An sm90 collective epilogue that works on pairs of accumulator rows of the weight that are 8
// apart, straight from registers to global memory (no shared memory, no TMA store).
//
// Why: fusions like SwiGLU (act(gate) * up) and RoPE (rotate q[j] with q[j + D/2]) combine two
// output columns of the GEMM.  Packing the weight so that partners sit 8 rows apart inside each
// 16-row block puts both in the same thread's wgmma accumulator fragment, whichever side of the
// MMA the weight is on:
//   * weight on the kernel's N side: a thread holds columns n and n + 8 (fragment values v, v + 4);
//   * weight on the kernel's M side (swap-AB): a thread holds rows m and m + 8 (values v, v + 2).
// The sm90 wgmma C fragment is ((2, 2, N/8), MMA_M, MMA_N) with value strides (col+1, row+8, col+8).
//
// PairOp supplies Arguments (= Params), Row (what it needs of one token: made once per tile, before
// any load of a group, so that per-token reads such as a position wait for memory once), Inputs
// (what it reads from memory for one pair group), kBatchValues (fragment values per batch: more is
// fewer waits for memory, more registers) and
//   static Row row(Params const &, int token, int tokens)
//   template <bool kSwapAB> static Inputs load(Params const &, Row const &row0, Row const &row1,
//                                              int packed_row, int packed_rows)
//   template <bool kSwapAB> static void apply(Params const &, Row const &row0, Row const &row1,
//                                             Inputs const &, int packed_row, float first0, float first1,
//                                             float second0, float second1, int packed_rows)
// where (first0, second0) are the pair at (row0's token, packed_row) / (.., packed_row + 8) and
// (first1, second1) the next value the thread holds: the next packed row's pair of the same token
// (row1 is row0), or with swap-AB the same packed row of the next token (row1).  apply() checks
// bounds and stores.  Groups are done in batches: every load of a batch first, then every apply, so
// a batch waits for memory once instead of once per group (an epilogue warp has no other warp on its
// scheduler to hide the latency), and the next batch's loads go out before this batch is applied.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "fused_gemm/common/sm90_launcher.hpp"

namespace fused_gemm {

template <class PairOp, bool kSwapAB, class ElementD_>
class Sm90PairEpilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  // The kernel layer names these; this epilogue addresses its outputs itself (PairOp).
  using ElementC = ElementD_;
  using ElementD = ElementD_;
  using StrideC = cute::Stride<int64_t, cute::_1, int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using ThreadEpilogueOp = PairOp;  // GemmUniversalAdapter names it; nothing here uses it

  struct SharedStorage {};
  using TensorStorage = SharedStorage;
  using Arguments = typename PairOp::Arguments;
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const &, Arguments const &args, void *) {
    return args;
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const &, Arguments const &) {
    return 0;
  }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *, cudaStream_t,
                                              cutlass::CudaHostAdapter * = nullptr) {
    return cutlass::Status::kSuccess;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const &problem_shape, Arguments const &) {
    // Pairs live in 16-row blocks of the packed weight.
    return (cute::get<kSwapAB ? 0 : 1>(problem_shape) % 16) == 0;
  }

  CUTLASS_HOST_DEVICE
  Sm90PairEpilogue(Params const &params, SharedStorage const & = SharedStorage()) : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_mnk,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const &accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char *) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    static_assert(size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2,
                  "expected the sm90 wgmma C fragment ((2, 2, N/8), MMA_M, MMA_N)");
    static_assert(kSwapAB || size<0, 2>(FrgLayout{}) % 2 == 0, "the tile's N must be a multiple of 16");
    static_assert(!kSwapAB || size<0>(BlockShapeMNK{}) % 16 == 0, "the tile's M must be a multiple of 16");

    int const M = get<0>(problem_shape_mnkl);
    int const N = get<1>(problem_shape_mnkl);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    Tensor coords = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_mnk),
                               make_coord(m_coord, n_coord));                      // (BLK_M, BLK_N) -> (m, n)
    Tensor thread_coords = tiled_mma.get_thread_slice(thread_idx).partition_C(coords);  // like the accumulators
    static_assert(decltype(size(thread_coords))::value == decltype(size(accumulators))::value);

    constexpr int kValues = size<0>(FrgLayout{});           // values per fragment: 4 * N/8
    constexpr int kMmaM = size<1>(FrgLayout{});
    constexpr int kMmaN = size<2>(FrgLayout{});
    constexpr int kPartner = kSwapAB ? 2 : 4;                // the value 8 packed rows further on
    constexpr int kTotal = decltype(size(accumulators))::value;
    constexpr int kBatch = kTotal < PairOp::kBatchValues ? kTotal : PairOp::kBatchValues;  // values per batch
    static_assert(kTotal % kBatch == 0 && kBatch % 8 == 0);
    // The thread's tokens: one per (row half, MMA_M) without swap-AB; one per (value pair, column
    // group, MMA_N) with it, where tokens run along the fragment's N side.
    constexpr int kRows = kSwapAB ? 2 * (kValues / 4) * kMmaN : 2 * kMmaM;
    int const tokens = kSwapAB ? N : M;
    int const packed_rows = kSwapAB ? M : N;
    auto first_of_pair = [](int i) {
      int const v = i % kValues;
      return kSwapAB ? ((v / 2) % 2 == 0) : ((v / 4) % 2 == 0);
    };
    auto row_of = [](int i) {                                // fragment value -> the thread's token slot
      int const v = i % kValues;
      return kSwapAB ? v % 2 + 2 * (v / 4) + 2 * (kValues / 4) * (i / (kValues * kMmaM))
                     : (v / 2) % 2 + 2 * ((i / kValues) % kMmaM);
    };
    auto value_of_row = [](int r) {                          // a fragment value of token slot r
      return kSwapAB ? r % 2 + 4 * ((r / 2) % (kValues / 4)) + kValues * kMmaM * (r / (2 * (kValues / 4)))
                     : 2 * (r % 2) + kValues * (r / 2);
    };
    auto token_of = [](auto coord) { return kSwapAB ? int(get<1>(coord)) : int(get<0>(coord)); };
    auto packed_row_of = [](auto coord) { return kSwapAB ? int(get<0>(coord)) : int(get<1>(coord)); };

    typename PairOp::Row rows[kRows];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < kRows; ++r) {
      rows[r] = PairOp::row(params_, token_of(thread_coords(value_of_row(r))), tokens);
    }
    // Software-pipelined batches: a batch's loads are issued before the previous batch is applied,
    // so their wait overlaps that work.
    using Inputs = typename PairOp::Inputs;
    constexpr int kGroups = kBatch / 4;                      // pair groups (4 values) per batch
    auto load_batch = [&](int base, Inputs (&inputs)[kGroups]) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = base, g = 0; i < base + kBatch; i += 2) {
        if (first_of_pair(i)) {
          inputs[g++] = PairOp::template load<kSwapAB>(params_, rows[row_of(i)], rows[row_of(i + 1)],
                                                       packed_row_of(thread_coords(i)), packed_rows);
        }
      }
    };
    Inputs next[kGroups];
    load_batch(0, next);
    CUTLASS_PRAGMA_UNROLL
    for (int base = 0; base < kTotal; base += kBatch) {
      Inputs inputs[kGroups];
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kGroups; ++g) inputs[g] = next[g];
      if (base + kBatch < kTotal) load_batch(base + kBatch, next);
      CUTLASS_PRAGMA_UNROLL
      for (int i = base, g = 0; i < base + kBatch; i += 2) {
        if (first_of_pair(i)) {
          PairOp::template apply<kSwapAB>(params_, rows[row_of(i)], rows[row_of(i + 1)], inputs[g++],
                                          packed_row_of(thread_coords(i)), accumulators(i), accumulators(i + 1),
                                          accumulators(i + kPartner), accumulators(i + kPartner + 1), packed_rows);
        }
      }
    }
  }

 private:
  Params params_;
};

// What the sm90 warp-specialized kernels call (load/store pipelines that do nothing).
template <class PairOp, bool kSwapAB, class ElementD>
using Sm90PairCollectiveEpilogue =
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Sm90PairEpilogue<PairOp, kSwapAB, ElementD>>;

// CUTLASS arguments of a pair-epilogue GEMM: x [M, K] times a packed weight [weight_rows, K]
// (swap-AB puts the weight on the kernel's A side).  Kernel provides: Problem (m, k, a, lda, b,
// ldb, swizzle, raster), GemmKernel, kSwapAB, epilogue_arguments(Problem).
template <class Kernel>
typename cutlass::gemm::device::GemmUniversalAdapter<typename Kernel::GemmKernel>::Arguments pair_gemm_arguments(
    typename Kernel::Problem const &p, int64_t weight_rows, cutlass::KernelHardwareInfo const &hw_info) {
  using GemmKernel = typename Kernel::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using ElementA = typename Gemm::ElementA;
  using ElementB = typename Gemm::ElementB;
  int64_t const M = Kernel::kSwapAB ? weight_rows : p.m;
  int64_t const N = Kernel::kSwapAB ? p.m : weight_rows;
  void const *ptr_a = Kernel::kSwapAB ? p.b : p.a;
  void const *ptr_b = Kernel::kSwapAB ? p.a : p.b;
  int64_t const ld_a = Kernel::kSwapAB ? p.ldb : p.lda;
  int64_t const ld_b = Kernel::kSwapAB ? p.lda : p.ldb;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {static_cast<int>(M), static_cast<int>(N), static_cast<int>(p.k), 1},
      {static_cast<ElementA const *>(ptr_a), leading_dim_stride<typename GemmKernel::StrideA>(ld_a),
       static_cast<ElementB const *>(ptr_b), leading_dim_stride<typename GemmKernel::StrideB>(ld_b)},
      Kernel::epilogue_arguments(p),
      hw_info};
  set_scheduler_arguments(args.scheduler, p);
  return args;
}

}  // namespace fused_gemm
