// Stand-in for catlass/gemm_coord.hpp (tests only; see tests/cpp/README.md): the compile-time tile shape
// GemmShape and the run-time problem shape GemmCoord (M, N, K).
#ifndef TILER_STANDIN_CATLASS_GEMM_COORD_HPP
#define TILER_STANDIN_CATLASS_GEMM_COORD_HPP

#include "catlass/catlass.hpp"

namespace Catlass {

template <std::uint32_t M_ = 1, std::uint32_t N_ = 1, std::uint32_t K_ = 1>
struct GemmShape {
    static constexpr std::uint32_t M = M_;
    static constexpr std::uint32_t N = N_;
    static constexpr std::uint32_t K = K_;
    static constexpr std::int64_t MN = std::int64_t(M) * N;
    static constexpr std::int64_t MK = std::int64_t(M) * K;
    static constexpr std::int64_t KN = std::int64_t(K) * N;
    static constexpr std::int64_t MNK = std::int64_t(M) * N * K;
};

// A problem (or block) extent in M, N and K, built from three indices as in CATLASS.
struct GemmCoord {
    using Index = std::uint32_t;
    GemmCoord() = default;
    GemmCoord(Index m, Index n, Index k) : m_(m), n_(n), k_(k) {}
    Index m() const { return m_; }
    Index n() const { return n_; }
    Index k() const { return k_; }

private:
    Index m_ = 0;
    Index n_ = 0;
    Index k_ = 0;
};

}  // namespace Catlass

#endif
