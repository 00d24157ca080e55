// Stand-in for catlass/gemm/kernel/basic_matmul.hpp (tests only; see tests/cpp/README.md): the plain matmul
// kernel, BasicMatmul<BlockMmad, BlockEpilogue, BlockScheduler>, with its host-side interface (Arguments,
// Params, CanImplement, GetWorkspaceSize, ToUnderlyingArguments). No device code. Instantiating it instantiates
// the block (the BlockMmad rules run) and checks that the scheduler is one BasicMatmul can build.
#ifndef TILER_STANDIN_CATLASS_GEMM_KERNEL_BASIC_MATMUL_HPP
#define TILER_STANDIN_CATLASS_GEMM_KERNEL_BASIC_MATMUL_HPP

#include <cstddef>
#include <type_traits>

#include "catlass/catlass.hpp"
#include "catlass/gemm_coord.hpp"
#include "catlass/matrix_coord.hpp"

namespace Catlass::Gemm::Kernel {

template <class BlockMmad_, class BlockEpilogue_, class BlockScheduler_>
class BasicMatmul {
public:
    using BlockMmad = BlockMmad_;
    using ArchTag = typename BlockMmad::ArchTag;
    using L1TileShape = typename BlockMmad::L1TileShape;
    using ElementA = typename BlockMmad::ElementA;
    using LayoutA = typename BlockMmad::LayoutA;
    using ElementB = typename BlockMmad::ElementB;
    using LayoutB = typename BlockMmad::LayoutB;
    using ElementC = typename BlockMmad::ElementC;
    using LayoutC = typename BlockMmad::LayoutC;
    using ElementAccumulator = typename BlockMmad::ElementAccumulator;
    using BlockScheduler = BlockScheduler_;

    // The kernel builds its scheduler from the problem shape and the L1 tile's M x N.
    static_assert(std::is_constructible_v<BlockScheduler, GemmCoord const &, MatrixCoord const &>,
                  "[catlass] BasicMatmul builds its BlockScheduler from (problem shape, L1 tile M x N): "
                  "GemmIdentityBlockSwizzle, not the split-K scheduler");

    struct Params {
        GemmCoord problemShape;
        GM_ADDR ptrA = nullptr;
        GM_ADDR ptrB = nullptr;
        GM_ADDR ptrC = nullptr;
    };

    // What the host passes: the problem and the three matrices in global memory.
    struct Arguments {
        GemmCoord problemShape;
        GM_ADDR ptrA;
        GM_ADDR ptrB;
        GM_ADDR ptrC;
    };

    static bool CanImplement(Arguments const &) { return true; }
    static std::size_t GetWorkspaceSize(Arguments const &) { return 0; }
    static Params ToUnderlyingArguments(Arguments const &args, std::uint8_t *)
    {
        return Params{args.problemShape, args.ptrA, args.ptrB, args.ptrC};
    }
};

}  // namespace Catlass::Gemm::Kernel

#endif
