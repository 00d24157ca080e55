// Stand-in for catlass/gemm/kernel/splitk_matmul.hpp (tests only; see tests/cpp/README.md): the split-K kernel
// SplitkMatmul<BlockMmad, BlockEpilogue, BlockScheduler, ReduceAdd> and its reduce stage
// SplitkReduceAdd<ArchTag, ElementAccumulator, ElementOut, STAGES, COMPUTE_LENGTH>, host side only. The kernel
// picks its split factor itself from the problem, the L1 tile and Arguments::aicCoreNum (GetSplitkFactor,
// restated here so a test can run it on an emitted entry).
#ifndef TILER_STANDIN_CATLASS_GEMM_KERNEL_SPLITK_MATMUL_HPP
#define TILER_STANDIN_CATLASS_GEMM_KERNEL_SPLITK_MATMUL_HPP

#include <cstddef>
#include <type_traits>

#include "catlass/catlass.hpp"
#include "catlass/gemm_coord.hpp"

namespace Catlass::Gemm::Kernel {

// Sums the split-K partials (ElementAccumulator, in the workspace) and casts them to ElementOut, in STAGES
// buffers of COMPUTE_LENGTH elements of UB.
template <class ArchTag_, class ElementAccumulator_, class ElementOut_, std::uint32_t STAGES,
          std::uint32_t COMPUTE_LENGTH>
struct SplitkReduceAdd {
    using ArchTag = ArchTag_;
    using ElementAccumulator = ElementAccumulator_;
    using ElementOut = ElementOut_;
    static_assert(std::uint64_t(STAGES) * COMPUTE_LENGTH * sizeof(ElementAccumulator) <= ArchTag::UB_SIZE,
                  "[catlass] SplitkReduceAdd exceeds UB: STAGES * COMPUTE_LENGTH * sizeof(accumulator) > UB_SIZE");
};

template <class BlockMmad_, class BlockEpilogue_, class BlockScheduler_, class ReduceAdd_>
class SplitkMatmul {
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
    using ReduceAdd = ReduceAdd_;

    static_assert(std::is_constructible_v<BlockScheduler, GemmCoord const &, GemmCoord const &, std::uint32_t>,
                  "[catlass] SplitkMatmul builds its BlockScheduler from (problem shape, L1 tile, split factor): "
                  "SplitkGemmIdentityBlockSwizzle");
    // The blocks write ElementC partials to the workspace, which the reduce stage reads as its accumulator type
    // (tiler's check: CATLASS reinterprets the workspace, so a mismatch is wrong results, not a compile error).
    static_assert(std::is_same_v<typename ReduceAdd::ElementAccumulator, ElementC>,
                  "[tiler] SplitkReduceAdd's ElementAccumulator must be CType's element (the workspace partials)");
    static_assert(std::is_same_v<typename ReduceAdd::ArchTag, ArchTag>,
                  "[tiler] SplitkReduceAdd's ArchTag must be the block's");

    struct Params {
        GemmCoord problemShape;
        GM_ADDR ptrA = nullptr;
        GM_ADDR ptrB = nullptr;
        GM_ADDR ptrC = nullptr;
        GM_ADDR ptrWorkspace = nullptr;
        std::uint32_t splitkFactor = 1;
    };

    // What the host passes: the problem, the cube cores the split is sized for, the bytes of one partial, and
    // the three matrices in global memory.
    struct Arguments {
        GemmCoord problemShape;
        std::uint32_t aicCoreNum;
        std::size_t workspaceElementSize;
        GM_ADDR ptrA;
        GM_ADDR ptrB;
        GM_ADDR ptrC;
    };

    // The split factor: at most 2, 4, 8 or 16 slices as K is at most 1024, 2048, 4096 or more; the cores per L1
    // tile within that (at least one), raised while fewer tiles than cores and one more slice adds no round of
    // tiles; at most the L1 K tiles; at least 2 past K = 8192 and 4 past K = 32768.
    static std::uint32_t GetSplitkFactor(std::uint32_t m, std::uint32_t n, std::uint32_t k, std::uint32_t cores)
    {
        auto ceil_div = [](std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; };
        const std::uint32_t cap = k <= 1024 ? 2 : k <= 2048 ? 4 : k <= 4096 ? 8 : 16;
        const std::uint32_t tiles = ceil_div(m, L1TileShape::M) * ceil_div(n, L1TileShape::N);
        std::uint32_t factor = cores / tiles < cap ? cores / tiles : cap;
        factor = factor > 1 ? factor : 1;
        if (tiles < cores) {
            while (factor + 1 <= cap && ceil_div(tiles * factor, cores) >= ceil_div(tiles, cores) * factor) {
                ++factor;
            }
        }
        const std::uint32_t kTiles = ceil_div(k, L1TileShape::K);
        factor = kTiles < factor ? kTiles : factor;
        if (k > 8192 && factor < 2) {
            factor = 2;
        }
        if (k > 32768 && factor < 4) {
            factor = 4;
        }
        return factor;
    }

    static bool CanImplement(Arguments const &) { return true; }
    static std::size_t GetWorkspaceSize(Arguments const &args)
    {
        const GemmCoord &p = args.problemShape;
        return args.workspaceElementSize * p.m() * p.n() * GetSplitkFactor(p.m(), p.n(), p.k(), args.aicCoreNum);
    }
    static Params ToUnderlyingArguments(Arguments const &args, std::uint8_t *workspace)
    {
        const GemmCoord &p = args.problemShape;
        return Params{p, args.ptrA, args.ptrB, args.ptrC, workspace,
                      GetSplitkFactor(p.m(), p.n(), p.k(), args.aicCoreNum)};
    }
};

}  // namespace Catlass::Gemm::Kernel

#endif
