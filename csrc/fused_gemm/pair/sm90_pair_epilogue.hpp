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
//
// A PairOp may instead take a whole tile at once when the weight is on the kernel's N side (no
// swap-AB), by defining kTileStore = true and
//   template <int kTokens, int kBlocks>
//   static void store_tile(Params const &, float (&values)[kTokens][kBlocks][4], int const (&token)[kTokens],
//                          int tokens, int col0, int packed_rows)
// where values[r][b] = (first0, first1, second0, second1) are the thread's packed columns
// (col0 + 16b, +1, +8, +9) of token slot r.  Knowing the tile's whole shape at compile time lets it
// work out per-tile facts once and use vector loads and stores (the per-group interface above spends
// most of its instructions on addressing).
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "fused_gemm/common/sm90_launcher.hpp"
#include "fused_gemm/evt/sm90_node.hpp"

namespace fused_gemm {

template <class PairOp, class = void>
struct has_tile_store : std::false_type {};
template <class PairOp>
struct has_tile_store<PairOp, std::void_t<decltype(PairOp::kTileStore)>> : std::bool_constant<PairOp::kTileStore> {};

// Its Params are its Arguments and it needs no workspace, as our EVT nodes: the kernel layer calls the
// same hooks on a collective epilogue.
template <class PairOp, bool kSwapAB, class ElementD_>
class Sm90PairEpilogue : public Sm90NodeWithoutWorkspace {
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
    int const tokens = kSwapAB ? N : M;
    int const packed_rows = kSwapAB ? M : N;
    if constexpr (!kSwapAB && has_tile_store<PairOp>::value) {
      whole_tile<Fragment<FrgLayout>>(thread_coords, accumulators, tokens, packed_rows);
    } else {
      batched<Fragment<FrgLayout>>(thread_coords, accumulators, tokens, packed_rows);
    }
  }

 private:
  // Where things are in a thread's accumulator fragment (value index i, linear).
  template <class FrgLayout>
  struct Fragment {
    static constexpr int kValues = cute::size<0>(FrgLayout{});  // values per fragment: 4 * N/8
    static constexpr int kMmaM = cute::size<1>(FrgLayout{});
    static constexpr int kMmaN = cute::size<2>(FrgLayout{});
    static constexpr int kTotal = kValues * kMmaM * kMmaN;
    static constexpr int kPartner = kSwapAB ? 2 : 4;             // the value 8 packed rows further on
    // The thread's tokens: one per (row half, MMA_M) without swap-AB; one per (value pair, column
    // group, MMA_N) with it, where tokens run along the fragment's N side.
    static constexpr int kRows = kSwapAB ? 2 * (kValues / 4) * kMmaN : 2 * kMmaM;
    static constexpr int kBlocks = (kValues / 8) * kMmaN;        // 16-column blocks (no swap-AB)

    CUTLASS_DEVICE static constexpr bool first_of_pair(int i) {
      int const v = i % kValues;
      return kSwapAB ? ((v / 2) % 2 == 0) : ((v / 4) % 2 == 0);
    }
    CUTLASS_DEVICE static constexpr int row_of(int i) {        // value -> the thread's token slot
      int const v = i % kValues;
      return kSwapAB ? v % 2 + 2 * (v / 4) + 2 * (kValues / 4) * (i / (kValues * kMmaM))
                     : (v / 2) % 2 + 2 * ((i / kValues) % kMmaM);
    }
    CUTLASS_DEVICE static constexpr int value_of_row(int r) {  // a value of token slot r
      return kSwapAB ? r % 2 + 4 * ((r / 2) % (kValues / 4)) + kValues * kMmaM * (r / (2 * (kValues / 4)))
                     : 2 * (r % 2) + kValues * (r / 2);
    }
    CUTLASS_DEVICE static constexpr int first_value(int r, int b) {  // no swap-AB: slot r, block b's first
      return 2 * (r % 2) + 8 * (b % (kValues / 8)) + kValues * (r / 2 + kMmaM * (b / (kValues / 8)));
    }
    template <class Coord>
    CUTLASS_DEVICE static int token_of(Coord const &coord) {
      return kSwapAB ? int(cute::get<1>(coord)) : int(cute::get<0>(coord));
    }
    template <class Coord>
    CUTLASS_DEVICE static int packed_row_of(Coord const &coord) {
      return kSwapAB ? int(cute::get<0>(coord)) : int(cute::get<1>(coord));
    }
  };

  // The PairOp's store_tile: values[r][b] for token slot r = (row half, MMA_M) and block
  // b = (16-column group, MMA_N), in column order.
  template <class F, class ThreadCoords, class Accumulators>
  CUTLASS_DEVICE void whole_tile(ThreadCoords const &thread_coords, Accumulators const &accumulators, int tokens,
                                 int packed_rows) {
    float values[F::kRows][F::kBlocks][4];
    int token[F::kRows];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < F::kRows; ++r) {
      token[r] = F::token_of(thread_coords(F::first_value(r, 0)));
      CUTLASS_PRAGMA_UNROLL
      for (int b = 0; b < F::kBlocks; ++b) {
        int const i = F::first_value(r, b);
        values[r][b][0] = accumulators(i);
        values[r][b][1] = accumulators(i + 1);
        values[r][b][2] = accumulators(i + F::kPartner);
        values[r][b][3] = accumulators(i + F::kPartner + 1);
      }
    }
    PairOp::store_tile(params_, values, token, tokens, F::packed_row_of(thread_coords(0)), packed_rows);
  }

  // The per-group path: a Row per token slot, then batches of pair groups (see the top of this file).
  template <class F, class ThreadCoords, class Accumulators>
  CUTLASS_DEVICE void batched(ThreadCoords const &thread_coords, Accumulators const &accumulators, int tokens,
                              int packed_rows) {
    constexpr int kBatch = F::kTotal < PairOp::kBatchValues ? F::kTotal : PairOp::kBatchValues;  // values per batch
    static_assert(F::kTotal % kBatch == 0 && kBatch % 8 == 0);
    typename PairOp::Row rows[F::kRows];
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < F::kRows; ++r) {
      rows[r] = PairOp::row(params_, F::token_of(thread_coords(F::value_of_row(r))), tokens);
    }
    // Software-pipelined batches: a batch's loads are issued before the previous batch is applied,
    // so their wait overlaps that work.
    using Inputs = typename PairOp::Inputs;
    constexpr int kGroups = kBatch / 4;                      // pair groups (4 values) per batch
    auto load_batch = [&](int base, Inputs (&inputs)[kGroups]) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = base, g = 0; i < base + kBatch; i += 2) {
        if (F::first_of_pair(i)) {
          inputs[g++] = PairOp::template load<kSwapAB>(params_, rows[F::row_of(i)], rows[F::row_of(i + 1)],
                                                       F::packed_row_of(thread_coords(i)), packed_rows);
        }
      }
    };
    Inputs next[kGroups];
    load_batch(0, next);
    CUTLASS_PRAGMA_UNROLL
    for (int base = 0; base < F::kTotal; base += kBatch) {
      Inputs inputs[kGroups];
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kGroups; ++g) inputs[g] = next[g];
      if (base + kBatch < F::kTotal) load_batch(base + kBatch, next);
      CUTLASS_PRAGMA_UNROLL
      for (int i = base, g = 0; i < base + kBatch; i += 2) {
        if (F::first_of_pair(i)) {
          PairOp::template apply<kSwapAB>(params_, rows[F::row_of(i)], rows[F::row_of(i + 1)], inputs[g++],
                                          F::packed_row_of(thread_coords(i)), accumulators(i), accumulators(i + 1),
                                          accumulators(i + F::kPartner), accumulators(i + F::kPartner + 1),
                                          packed_rows);
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
