// An epilogue-visitor-tree leaf: a vector broadcast over the tile, along its rows (kMode 0: one value
// per output row, fp8's per-token scales) or its columns (kMode 1: one per output column, per-channel
// scales or a bias), read ahead by the epilogue's producer-load warp and kept in fp32.
//
// CUTLASS's Sm90ColBroadcast / Sm90RowBroadcast load their slice of the vector when the consumer
// warpgroups start a tile's epilogue, and wait for it there: an L2 round trip (~1 us) per output tile
// in which the tensor cores stand idle, since a cooperative kernel's next mainloop starts only after
// the epilogue.  At fp8's rate a 128x128x128 tile of K = 4096 computes in ~9 us, so the wait costs
// several percent.  Here the warp that feeds the epilogue's load pipeline (idle when C is not read)
// copies tile t's slice into shared memory as it enters tile t's first epilogue stage, which it does
// as soon as the consumers free that stage, a whole mainloop ahead of them; the pipeline's full barrier
// (each of the warp's lanes arrives after its own stores) makes the values visible to the consumers.
//
// Two slots, by the tile's parity: the producer writes tile t + 2's slot once the consumers have freed
// the load stage of iteration (t + 2) S - StagesC (S subtiles a tile), and they have left tile t once they
// freed its last, t S + S - 1: so StagesC <= S + 1, which CUTLASS's builder gives (StagesC = min(S, 4),
// or with C's buffer reused at most max(min(S, 4), min(S, 2) + 1)) and every kernel using this node
// asserts (slots_suffice, below).  The slot and the subtile both come from the load pipeline's iteration
// count, which the producer's step() and the consumers' previsit() see alike; kernels that store one
// subtile at a time (stream-K's separate reduction) break that count and must not use this node.  The
// batch index is not read: one vector for every batch, like the broadcasts it replaces.
#pragma once

#include "fused_gemm/evt/sm90_node.hpp"

namespace fused_gemm {

template <int kMode, class CtaTileShapeMNK, class Element = float>
struct Sm90PrefetchedVector : Sm90NodeWithoutWorkspace {
  static_assert(kMode == 0 || kMode == 1, "0: a value per row (M), 1: a value per column (N)");
  static constexpr int kExtent = cute::size<kMode>(CtaTileShapeMNK{});
  static constexpr int kSlots = 2;

  struct SharedStorage {
    alignas(16) float values[kSlots][kExtent];
  };

  struct Arguments {
    Element const *ptr = nullptr;   // [M] (kMode 0) or [N] (kMode 1), contiguous
  };

  using Params = Arguments;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const &, Arguments const &args) {
    return args.ptr != nullptr;
  }

  CUTLASS_HOST_DEVICE Sm90PrefetchedVector() {}

  CUTLASS_HOST_DEVICE Sm90PrefetchedVector(Params const &params, SharedStorage const &shared)
      : ptr(params.ptr), smem(const_cast<float *>(&shared.values[0][0])) {}

  Element const *ptr = nullptr;
  float *smem = nullptr;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return true; }

  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  CUTLASS_DEVICE bool is_zero() const { return false; }

  // For a static_assert beside the kernel's CollectiveEpilogue (the comment at the top).
  template <class CollectiveEpilogue>
  static constexpr bool slots_suffice() {
    return CollectiveEpilogue::DispatchPolicy::StagesC <=
           (kSlots - 1) * subtiles_per_tile<typename CollectiveEpilogue::EpilogueTile>() + 1;
  }

  template <class EpilogueTile>
  static constexpr int subtiles_per_tile() {
    return cute::size(cute::shape_div(cute::take<0, 2>(CtaTileShapeMNK{}), EpilogueTile{}));
  }

  template <int kSubtiles>
  struct ProducerLoadCallbacks : cutlass::epilogue::fusion::EmptyProducerLoadCallbacks {
    Element const *src;   // the tile's first value
    int valid;            // values of this tile inside the problem
    float *smem;
    int lane;

    CUTLASS_DEVICE ProducerLoadCallbacks(Element const *src, int valid, float *smem, int lane)
        : src(src), valid(valid), smem(smem), lane(lane) {}

    CUTLASS_DEVICE void step(uint64_t *, int epi_m, int epi_n, int load_iteration, bool) {
      if (epi_m != 0 || epi_n != 0) {
        return;   // one copy per tile, at its first subtile
      }
      float *dst = smem + ((load_iteration / kSubtiles) % kSlots) * kExtent;
      using Chunk = cutlass::AlignedArray<Element, 4>;
      bool const vector_ok = reinterpret_cast<uintptr_t>(src) % sizeof(Chunk) == 0;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 4 * lane; i < kExtent; i += 4 * cutlass::NumThreadsPerWarp) {
        float4 v;
        if (vector_ok && i + 4 <= valid) {
          Chunk const c = *reinterpret_cast<Chunk const *>(src + i);
          v = make_float4(float(c[0]), float(c[1]), float(c[2]), float(c[3]));
        } else {   // the problem's edge, or an unaligned vector (only through the C ABI: Python checks
                   // alignment); rows past the edge read 0
          v.x = i + 0 < valid ? float(src[i + 0]) : 0.f;
          v.y = i + 1 < valid ? float(src[i + 1]) : 0.f;
          v.z = i + 2 < valid ? float(src[i + 2]) : 0.f;
          v.w = i + 3 < valid ? float(src[i + 3]) : 0.f;
        }
        *reinterpret_cast<float4 *>(dst + i) = v;
      }
      // No fence: this lane's arrive on the stage's full barrier (producer_commit, right after) releases
      // these stores, and the consumers' wait on it acquires them.
    }
  };

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const &args) {
    static_assert(kExtent % 4 == 0, "tile extent a multiple of 4");
    using EpilogueTile = cute::remove_cvref_t<decltype(args.epi_tile)>;
    constexpr int kSubtiles = subtiles_per_tile<EpilogueTile>();
    int const extent = static_cast<int>(cute::get<kMode>(args.problem_shape_mnkl));
    int const first = static_cast<int>(cute::get<kMode>(args.tile_coord_mnkl)) * kExtent;
    return ProducerLoadCallbacks<kSubtiles>(ptr + first, extent - first, smem,
                                            args.thread_idx % cutlass::NumThreadsPerWarp);
  }

  template <int kSubtiles, class STensor, class RTensor>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    STensor slot0;    // (CPY,CPY_M,CPY_N,EPI_M,EPI_N): this thread's values in slot 0, one mode stride 0
    RTensor values;   // (CPY,CPY_M,CPY_N): those of the current subtile

    CUTLASS_DEVICE ConsumerStoreCallbacks(STensor slot0, RTensor values) : slot0(slot0), values(values) {}

    // After the consumers' wait on the subtile's load stage, so its slot is filled.
    CUTLASS_DEVICE void previsit(int epi_m, int epi_n, int load_iteration, bool) {
      using namespace cute;
      Tensor slot = make_tensor(slot0.data() + ((load_iteration / kSubtiles) % kSlots) * kExtent, slot0.layout());
      copy(filter_zeros(slot(_, _, _, epi_m, epi_n)), filter_zeros(values));
    }

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const &,
                                                             int epi_v, int, int) {
      cutlass::Array<float, FragmentSize> frg;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        frg[i] = values(epi_v * FragmentSize + i);
      }
      return frg;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const &args) {
    using namespace cute;
    using EpilogueTile = remove_cvref_t<decltype(args.epi_tile)>;
    constexpr int kSubtiles = subtiles_per_tile<EpilogueTile>();
    auto const stride = conditional_return<kMode == 0>(Stride<_1, _0>{}, Stride<_0, _1>{});
    Tensor tile = make_tensor(make_smem_ptr(static_cast<float const *>(smem)),
                              make_layout(take<0, 2>(CtaTileShapeMNK{}), stride));   // (CTA_M,CTA_N)
    Tensor slot0 = cutlass::epilogue::fusion::sm90_partition_for_epilogue<ReferenceSrc>(
        tile, args.epi_tile, args.tiled_copy, args.thread_idx);                        // (CPY,CPY_M,CPY_N,EPI_M,EPI_N)
    Tensor values = make_tensor_like<float>(take<0, 3>(slot0));                        // (CPY,CPY_M,CPY_N)
    return ConsumerStoreCallbacks<kSubtiles, decltype(slot0), decltype(values)>(slot0, values);
  }
};

}  // namespace fused_gemm
