// Stand-in for catlass/catlass.hpp (tests only; see tests/cpp/README.md).
#ifndef TILER_STANDIN_CATLASS_CATLASS_HPP
#define TILER_STANDIN_CATLASS_CATLASS_HPP
#include "catlass_standin.hpp"
#endif
