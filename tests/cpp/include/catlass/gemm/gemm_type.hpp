// Stand-in for catlass/gemm/gemm_type.hpp (tests only; see tests/cpp/README.md): an operand's element type
// and global-memory layout bundled into one type.
#ifndef TILER_STANDIN_CATLASS_GEMM_GEMM_TYPE_HPP
#define TILER_STANDIN_CATLASS_GEMM_GEMM_TYPE_HPP

#include "catlass/catlass.hpp"
#include "catlass/layout/layout.hpp"

namespace Catlass::Gemm {

template <class Element_, class Layout_>
struct GemmType {
    using Element = Element_;
    using Layout = Layout_;
};

}  // namespace Catlass::Gemm

#endif
