// Stand-in for catlass/gemm/block/block_swizzle.hpp (tests only; see tests/cpp/README.md): the block
// schedulers, which map a core's task index to an output tile. SwizzleOffset is the width of a swizzle band
// (at least 1); SwizzleDirection picks the band's axis (0: bands of rows, along M; 1: bands of columns, along N).
#ifndef TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_SWIZZLE_HPP
#define TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_SWIZZLE_HPP

#include "catlass/catlass.hpp"
#include "catlass/gemm_coord.hpp"
#include "catlass/matrix_coord.hpp"

namespace Catlass::Gemm::Block {

template <std::uint32_t SwizzleOffset = 1, std::uint32_t SwizzleDirection = 0>
struct GemmIdentityBlockSwizzle {
    // Built from the problem shape and the L1 tile's M x N (what BasicMatmul passes); host-side stand-ins.
    GemmIdentityBlockSwizzle() = default;
    GemmIdentityBlockSwizzle(GemmCoord const &, MatrixCoord const &) {}
    GemmIdentityBlockSwizzle(GemmCoord const &, MatrixCoord const &, MatrixCoord const &) {}
    static constexpr std::uint32_t SWIZZLE_OFFSET = SwizzleOffset;
    static constexpr std::uint32_t SWIZZLE_DIRECTION = SwizzleDirection;
    static_assert(SwizzleOffset >= 1, "[catlass] SwizzleOffset must be at least 1");
    static_assert(SwizzleDirection == 0 || SwizzleDirection == 1, "[catlass] SwizzleDirection must be 0 or 1");
};

// The split-K kernel's scheduler: the same swizzle over (tile, K slice) tasks.
template <std::uint32_t SwizzleOffset = 1, std::uint32_t SwizzleDirection = 0>
struct SplitkGemmIdentityBlockSwizzle {
    // Built from the problem shape, the L1 tile's M x N x K and the split factor (what SplitkMatmul passes).
    SplitkGemmIdentityBlockSwizzle() = default;
    SplitkGemmIdentityBlockSwizzle(GemmCoord const &, GemmCoord const &, std::uint32_t = 1) {}
    static constexpr std::uint32_t SWIZZLE_OFFSET = SwizzleOffset;
    static constexpr std::uint32_t SWIZZLE_DIRECTION = SwizzleDirection;
    static_assert(SwizzleOffset >= 1, "[catlass] SwizzleOffset must be at least 1");
    static_assert(SwizzleDirection == 0 || SwizzleDirection == 1, "[catlass] SwizzleDirection must be 0 or 1");
};

}  // namespace Catlass::Gemm::Block

#endif
