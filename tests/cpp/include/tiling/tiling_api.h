// Stand-in for CANN's host tiling header tiling/tiling_api.h (tests only; see tests/cpp/README.md): it brings in
// optiling::TCubeTiling and the Matmul tiling API (matmul_tiling::MultiCoreMatmulTiling).
#ifndef TILER_STANDIN_TILING_TILING_API_H
#define TILER_STANDIN_TILING_TILING_API_H
#include "lib/matmul/bmm_tiling.h"
#include "tiler_tcube_standin.h"
#endif
