// Stand-in for catlass/layout/layout.hpp (tests only; see tests/cpp/README.md). The real layouts carry shapes
// and strides; for compile checks only their identity matters, so they are empty tags here.
#ifndef TILER_STANDIN_CATLASS_LAYOUT_LAYOUT_HPP
#define TILER_STANDIN_CATLASS_LAYOUT_LAYOUT_HPP

#include "catlass/catlass.hpp"

namespace Catlass::layout {

struct RowMajor {};     // ND, row-major
struct ColumnMajor {};  // ND, column-major (a transposed operand)
struct zN {};           // fractal NZ format ("zN": z-ordered fractals in N-ordered columns)
struct nZ {};           // fractal ZN format

}  // namespace Catlass::layout

#endif
