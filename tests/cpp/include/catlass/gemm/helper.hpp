// Stand-in for catlass/gemm/helper.hpp (tests only; see tests/cpp/README.md): the accumulator type of a pair
// of input element types, and the 32-byte alignment rule on tile extents (CATLASS's TileShapeAlignChecker).
#ifndef TILER_STANDIN_CATLASS_GEMM_HELPER_HPP
#define TILER_STANDIN_CATLASS_GEMM_HELPER_HPP

#include "catlass/catlass.hpp"
#include "catlass/gemm/gemm_type.hpp"
#include "catlass/layout/layout.hpp"

namespace Catlass::Gemm::helper {

// The cube unit accumulates 16-bit floats and fp32 in fp32, int8 in int32; mixed inputs have no accumulator.
template <class ElementA, class ElementB>
struct ElementAccumulatorSelector {
    static_assert(DEPENDENT_FALSE<ElementA>,
                  "[catlass] no accumulator for these input element types: A and B must both be half, "
                  "bfloat16_t, float or int8_t");
};
template <>
struct ElementAccumulatorSelector<half, half> {
    using ElementAccumulator = float;
};
template <>
struct ElementAccumulatorSelector<bfloat16_t, bfloat16_t> {
    using ElementAccumulator = float;
};
template <>
struct ElementAccumulatorSelector<float, float> {
    using ElementAccumulator = float;
};
template <>
struct ElementAccumulatorSelector<std::int8_t, std::int8_t> {
    using ElementAccumulator = std::int32_t;
};

// Every tile extent, times its operand's element width, is a whole number of 32-byte (256-bit) C0 blocks:
// A's element for the M and K extents, B's for K and N, at L1 and at L0.
template <class L1TileShape, class L0TileShape, class ElementA, class ElementB, std::uint32_t ALIGN_BYTES = 32>
struct TileShapeAlignChecker {
    static constexpr std::uint32_t ALIGN_BITS = ALIGN_BYTES * 8;
    static constexpr std::uint32_t BITS_A = SizeOfBits<ElementA>::value;
    static constexpr std::uint32_t BITS_B = SizeOfBits<ElementB>::value;

    static_assert(L1TileShape::M * BITS_A % ALIGN_BITS == 0,
                  "[catlass] L1TileShape::M is not 32-byte aligned (M * bits(ElementA) % 256 != 0)");
    static_assert(L1TileShape::K * BITS_A % ALIGN_BITS == 0,
                  "[catlass] L1TileShape::K is not 32-byte aligned for A (K * bits(ElementA) % 256 != 0)");
    static_assert(L1TileShape::K * BITS_B % ALIGN_BITS == 0,
                  "[catlass] L1TileShape::K is not 32-byte aligned for B (K * bits(ElementB) % 256 != 0)");
    static_assert(L1TileShape::N * BITS_B % ALIGN_BITS == 0,
                  "[catlass] L1TileShape::N is not 32-byte aligned (N * bits(ElementB) % 256 != 0)");
    static_assert(L0TileShape::M * BITS_A % ALIGN_BITS == 0,
                  "[catlass] L0TileShape::M is not 32-byte aligned (M * bits(ElementA) % 256 != 0)");
    static_assert(L0TileShape::K * BITS_A % ALIGN_BITS == 0,
                  "[catlass] L0TileShape::K is not 32-byte aligned for A (K * bits(ElementA) % 256 != 0)");
    static_assert(L0TileShape::K * BITS_B % ALIGN_BITS == 0,
                  "[catlass] L0TileShape::K is not 32-byte aligned for B (K * bits(ElementB) % 256 != 0)");
    static_assert(L0TileShape::N * BITS_B % ALIGN_BITS == 0,
                  "[catlass] L0TileShape::N is not 32-byte aligned (N * bits(ElementB) % 256 != 0)");
};

}  // namespace Catlass::Gemm::helper

#endif
