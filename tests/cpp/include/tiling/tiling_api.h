// Stand-in for CANN's host tiling header tiling/tiling_api.h, which brings in optiling::TCubeTiling (tests only;
// see tests/cpp/README.md).
#ifndef TILER_STANDIN_TILING_TILING_API_H
#define TILER_STANDIN_TILING_TILING_API_H
#include "tiler_tcube_standin.h"
#endif
