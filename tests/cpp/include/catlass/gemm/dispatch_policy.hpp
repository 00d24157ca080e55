// Stand-in for catlass/gemm/dispatch_policy.hpp (tests only; see tests/cpp/README.md): the two A2 block
// policies tiler emits. A policy only carries its arch tag and its stage counts; the rules on them are checked
// where the policy meets the tile shapes, in BlockMmad (catlass/gemm/block/block_mmad.hpp).
#ifndef TILER_STANDIN_CATLASS_GEMM_DISPATCH_POLICY_HPP
#define TILER_STANDIN_CATLASS_GEMM_DISPATCH_POLICY_HPP

#include "catlass/arch/arch.hpp"
#include "catlass/catlass.hpp"

namespace Catlass::Gemm {

// Ping-pong block (the split-K kernel's): two stages in L1, L0A and L0B, one L0C tile.
template <bool ENABLE_UNIT_FLAG_ = false>
struct MmadAtlasA2Pingpong {
    using ArchTag = Arch::AtlasA2;
    static constexpr std::uint32_t STAGES = 2;
    static constexpr bool ENABLE_UNIT_FLAG = ENABLE_UNIT_FLAG_;
};

// Preload-async block: loads of L1 tiles are issued PRELOAD_STAGES tiles ahead of the mmads that use them.
// No defaults: all seven arguments are spelt out.
template <std::uint32_t PRELOAD_STAGES_, std::uint32_t L1_STAGES_, std::uint32_t L0A_STAGES_,
          std::uint32_t L0B_STAGES_, std::uint32_t L0C_STAGES_, bool ENABLE_UNIT_FLAG_, bool ENABLE_SHUFFLE_K_>
struct MmadAtlasA2PreloadAsync {
    using ArchTag = Arch::AtlasA2;
    static constexpr std::uint32_t PRELOAD_STAGES = PRELOAD_STAGES_;
    static constexpr std::uint32_t L1_STAGES = L1_STAGES_;
    static constexpr std::uint32_t L0A_STAGES = L0A_STAGES_;
    static constexpr std::uint32_t L0B_STAGES = L0B_STAGES_;
    static constexpr std::uint32_t L0C_STAGES = L0C_STAGES_;
    static constexpr bool ENABLE_UNIT_FLAG = ENABLE_UNIT_FLAG_;
    static constexpr bool ENABLE_SHUFFLE_K = ENABLE_SHUFFLE_K_;
};

}  // namespace Catlass::Gemm

#endif
