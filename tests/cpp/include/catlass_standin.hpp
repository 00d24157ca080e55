// Stand-in for the CATLASS/AscendC basics that tiler's emitted CATLASS fragments rely on (tests only).
// Written for tiler's tests from the names and rules in CATLASS's public headers; no vendor code is copied.
// See tests/cpp/README.md.
#ifndef TILER_CATLASS_STANDIN_HPP
#define TILER_CATLASS_STANDIN_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

// AscendC's 16-bit element types (kernel_operator.h on a real toolchain): opaque 2-byte structs here.
struct half {
    std::uint16_t bits;
};
struct bfloat16_t {
    std::uint16_t bits;
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "half and bfloat16_t are 2 bytes");

namespace Catlass {

// false, but only once T is known: for static_asserts in primary templates that must never be used.
template <class T>
inline constexpr bool DEPENDENT_FALSE = false;

// Bits of one element (the alignment checks are stated in bits).
template <class T>
struct SizeOfBits {
    static constexpr std::uint32_t value = static_cast<std::uint32_t>(sizeof(T) * 8);
};

// One C0 block of the cube unit: 32 bytes.
inline constexpr std::uint32_t BYTE_PER_C0 = 32;

}  // namespace Catlass

// AscendC's global-memory address type (kernel_operator.h): a byte pointer on the host side.
#ifndef GM_ADDR
#define GM_ADDR std::uint8_t *
#endif

#endif  // TILER_CATLASS_STANDIN_HPP
