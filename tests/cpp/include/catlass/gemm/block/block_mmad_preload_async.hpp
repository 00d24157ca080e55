// Stand-in for catlass/gemm/block/block_mmad_preload_async.hpp (tests only; see tests/cpp/README.md):
// the compile-time checks of the preload-async block, restated as static_asserts.
#ifndef TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_PRELOAD_ASYNC_HPP
#define TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_PRELOAD_ASYNC_HPP

#include "catlass/gemm/block/block_mmad.hpp"

namespace Catlass::Gemm::Block {

template <std::uint32_t PRELOAD_STAGES_, std::uint32_t L1_STAGES_, std::uint32_t L0A_STAGES_,
          std::uint32_t L0B_STAGES_, std::uint32_t L0C_STAGES_, bool ENABLE_UNIT_FLAG_, bool ENABLE_SHUFFLE_K_,
          class L1TileShape_, class L0TileShape_, class AType_, class BType_, class CType_, class BiasType_,
          class TileCopy_, class TileMmad_>
struct BlockMmad<MmadAtlasA2PreloadAsync<PRELOAD_STAGES_, L1_STAGES_, L0A_STAGES_, L0B_STAGES_, L0C_STAGES_,
                                         ENABLE_UNIT_FLAG_, ENABLE_SHUFFLE_K_>,
                 L1TileShape_, L0TileShape_, AType_, BType_, CType_, BiasType_, TileCopy_, TileMmad_> {
    using DispatchPolicy = MmadAtlasA2PreloadAsync<PRELOAD_STAGES_, L1_STAGES_, L0A_STAGES_, L0B_STAGES_,
                                                   L0C_STAGES_, ENABLE_UNIT_FLAG_, ENABLE_SHUFFLE_K_>;
    using ArchTag = typename DispatchPolicy::ArchTag;
    using L1TileShape = L1TileShape_;
    using L0TileShape = L0TileShape_;
    using ElementA = typename AType_::Element;
    using ElementB = typename BType_::Element;
    using ElementC = typename CType_::Element;
    using LayoutA = typename AType_::Layout;
    using LayoutB = typename BType_::Layout;
    using LayoutC = typename CType_::Layout;
    using ElementAccumulator =
        typename helper::ElementAccumulatorSelector<ElementA, ElementB>::ElementAccumulator;

    static constexpr std::uint32_t PRELOAD_STAGES = PRELOAD_STAGES_;
    static constexpr std::uint32_t L1_STAGES = L1_STAGES_;
    static constexpr std::uint32_t L0A_STAGES = L0A_STAGES_;
    static constexpr std::uint32_t L0B_STAGES = L0B_STAGES_;
    static constexpr std::uint32_t L0C_STAGES = L0C_STAGES_;
    static constexpr bool ENABLE_UNIT_FLAG = ENABLE_UNIT_FLAG_;
    static constexpr bool INT8_INPUT =
        std::is_same_v<ElementA, std::int8_t> || std::is_same_v<ElementB, std::int8_t>;

    // Bytes of one buffer (one stage) of each tile. In 64 bits so that an absurd shape cannot wrap around.
    static constexpr std::uint64_t L1A_TILE_BYTES = std::uint64_t(L1TileShape::M) * L1TileShape::K * sizeof(ElementA);
    static constexpr std::uint64_t L1B_TILE_BYTES = std::uint64_t(L1TileShape::N) * L1TileShape::K * sizeof(ElementB);
    static constexpr std::uint64_t L0A_TILE_BYTES = std::uint64_t(L0TileShape::M) * L0TileShape::K * sizeof(ElementA);
    static constexpr std::uint64_t L0B_TILE_BYTES = std::uint64_t(L0TileShape::K) * L0TileShape::N * sizeof(ElementB);
    // The L0C tile holds the whole L1 M x N block of accumulators.
    static constexpr std::uint64_t L0C_TILE_BYTES =
        std::uint64_t(L1TileShape::M) * L1TileShape::N * sizeof(ElementAccumulator);

    static_assert(std::is_same_v<LayoutC, layout::RowMajor>, "[catlass] LayoutC must be RowMajor");
    static_assert((L1A_TILE_BYTES + L1B_TILE_BYTES) * L1_STAGES <= ArchTag::L1_SIZE,
                  "[catlass] L1TileShape exceeds L1: (L1A + L1B tile bytes) * L1_STAGES > L1_SIZE");
    static_assert(L0A_TILE_BYTES * L0A_STAGES <= ArchTag::L0A_SIZE,
                  "[catlass] L0TileShape exceeds L0A: L0.M * L0.K * sizeof(A) * L0A_STAGES > L0A_SIZE");
    static_assert(L0B_TILE_BYTES * L0B_STAGES <= ArchTag::L0B_SIZE,
                  "[catlass] L0TileShape exceeds L0B: L0.K * L0.N * sizeof(B) * L0B_STAGES > L0B_SIZE");
    static_assert(L0C_TILE_BYTES * L0C_STAGES <= ArchTag::L0C_SIZE,
                  "[catlass] L1TileShape exceeds L0C: L1.M * L1.N * sizeof(accumulator) * L0C_STAGES > L0C_SIZE");
    static_assert(L1TileShape::M == L0TileShape::M && L1TileShape::N == L0TileShape::N,
                  "[catlass] L1TileShape and L0TileShape must have the same M and N");
    static_assert(L0TileShape::K <= L1TileShape::K, "[catlass] L0TileShape::K must not exceed L1TileShape::K");
    static_assert(helper::TileShapeAlignChecker<L1TileShape, L0TileShape, ElementA, ElementB>::ALIGN_BITS == 256,
                  "[catlass] tile shapes must be 32-byte aligned");
    static_assert(PRELOAD_STAGES >= 1, "[catlass] PRELOAD_STAGES must be at least 1");
    static_assert(PRELOAD_STAGES < L1_STAGES, "[catlass] PRELOAD_STAGES must be less than L1_STAGES");
    static_assert(!ENABLE_UNIT_FLAG || L0C_STAGES == 1, "[catlass] ENABLE_UNIT_FLAG requires L0C_STAGES == 1");
    static_assert(!(ENABLE_UNIT_FLAG && INT8_INPUT), "[catlass] ENABLE_UNIT_FLAG must be false for int8_t input");
};

}  // namespace Catlass::Gemm::Block

#endif
