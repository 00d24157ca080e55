// Stand-in for catlass/matrix_coord.hpp (tests only; see tests/cpp/README.md): a (row, column) pair, what the
// plain block scheduler takes as the L1 tile's M x N.
#ifndef TILER_STANDIN_CATLASS_MATRIX_COORD_HPP
#define TILER_STANDIN_CATLASS_MATRIX_COORD_HPP

#include "catlass/catlass.hpp"

namespace Catlass {

struct MatrixCoord {
    using Index = std::uint32_t;
    MatrixCoord() = default;
    MatrixCoord(Index row, Index column) : row_(row), column_(column) {}
    Index row() const { return row_; }
    Index column() const { return column_; }

private:
    Index row_ = 0;
    Index column_ = 0;
};

}  // namespace Catlass

#endif
