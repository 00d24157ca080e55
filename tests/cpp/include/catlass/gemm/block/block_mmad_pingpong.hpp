// Stand-in for catlass/gemm/block/block_mmad_pingpong.hpp (tests only; see tests/cpp/README.md): the
// compile-time checks of the ping-pong block (two stages in L1, L0A and L0B; one L0C tile), restated as
// static_asserts.
#ifndef TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_PINGPONG_HPP
#define TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_PINGPONG_HPP

#include "catlass/gemm/block/block_mmad.hpp"

namespace Catlass::Gemm::Block {

template <bool ENABLE_UNIT_FLAG_, class L1TileShape_, class L0TileShape_, class AType_, class BType_,
          class CType_, class BiasType_, class TileCopy_, class TileMmad_>
struct BlockMmad<MmadAtlasA2Pingpong<ENABLE_UNIT_FLAG_>, L1TileShape_, L0TileShape_, AType_, BType_, CType_,
                 BiasType_, TileCopy_, TileMmad_> {
    using DispatchPolicy = MmadAtlasA2Pingpong<ENABLE_UNIT_FLAG_>;
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

    static constexpr std::uint32_t STAGES = DispatchPolicy::STAGES;
    static constexpr bool ENABLE_UNIT_FLAG = ENABLE_UNIT_FLAG_;
    static constexpr bool INT8_INPUT =
        std::is_same_v<ElementA, std::int8_t> || std::is_same_v<ElementB, std::int8_t>;

    static constexpr std::uint64_t L1A_TILE_BYTES = std::uint64_t(L1TileShape::M) * L1TileShape::K * sizeof(ElementA);
    static constexpr std::uint64_t L1B_TILE_BYTES = std::uint64_t(L1TileShape::N) * L1TileShape::K * sizeof(ElementB);
    static constexpr std::uint64_t L0A_TILE_BYTES = std::uint64_t(L0TileShape::M) * L0TileShape::K * sizeof(ElementA);
    static constexpr std::uint64_t L0B_TILE_BYTES = std::uint64_t(L0TileShape::K) * L0TileShape::N * sizeof(ElementB);
    static constexpr std::uint64_t L0C_TILE_BYTES =
        std::uint64_t(L0TileShape::M) * L0TileShape::N * sizeof(ElementAccumulator);

    static_assert(STAGES == 2, "[catlass] the ping-pong block has two stages");
    static_assert(std::is_same_v<LayoutC, layout::RowMajor>, "[catlass] LayoutC must be RowMajor");
    static_assert((L1A_TILE_BYTES + L1B_TILE_BYTES) * STAGES <= ArchTag::L1_SIZE,
                  "[catlass] L1TileShape exceeds L1: (L1A + L1B tile bytes) * STAGES > L1_SIZE");
    static_assert(L0A_TILE_BYTES * STAGES <= ArchTag::L0A_SIZE,
                  "[catlass] L0TileShape exceeds L0A: L0.M * L0.K * sizeof(A) * STAGES > L0A_SIZE");
    static_assert(L0B_TILE_BYTES * STAGES <= ArchTag::L0B_SIZE,
                  "[catlass] L0TileShape exceeds L0B: L0.K * L0.N * sizeof(B) * STAGES > L0B_SIZE");
    static_assert(L0C_TILE_BYTES <= ArchTag::L0C_SIZE,
                  "[catlass] L0TileShape exceeds L0C: L0.M * L0.N * sizeof(accumulator) > L0C_SIZE");
    static_assert(L1TileShape::M == L0TileShape::M && L1TileShape::N == L0TileShape::N,
                  "[catlass] L1TileShape and L0TileShape must have the same M and N");
    static_assert(L0TileShape::K <= L1TileShape::K, "[catlass] L0TileShape::K must not exceed L1TileShape::K");
    static_assert(helper::TileShapeAlignChecker<L1TileShape, L0TileShape, ElementA, ElementB>::ALIGN_BITS == 256,
                  "[catlass] tile shapes must be 32-byte aligned");
    static_assert(!(ENABLE_UNIT_FLAG && INT8_INPUT), "[catlass] ENABLE_UNIT_FLAG must be false for int8_t input");
};

}  // namespace Catlass::Gemm::Block

#endif
