// Stand-in for catlass/arch/arch.hpp (tests only; see tests/cpp/README.md): the A2 arch tag and its
// on-chip buffer capacities in bytes, the numbers the block-level static_asserts compare against.
#ifndef TILER_STANDIN_CATLASS_ARCH_ARCH_HPP
#define TILER_STANDIN_CATLASS_ARCH_ARCH_HPP

#include "catlass/catlass.hpp"

namespace Catlass::Arch {

struct AtlasA2 {
    static constexpr std::uint32_t BIAS_SIZE = 1024;
    static constexpr std::uint32_t FIXBUF_SIZE = 7 * 1024;
    static constexpr std::uint32_t UB_SIZE = 192 * 1024;
    static constexpr std::uint32_t L1_SIZE = 512 * 1024;
    static constexpr std::uint32_t L0A_SIZE = 64 * 1024;
    static constexpr std::uint32_t L0B_SIZE = 64 * 1024;
    static constexpr std::uint32_t L0C_SIZE = 128 * 1024;
};

}  // namespace Catlass::Arch

#endif
