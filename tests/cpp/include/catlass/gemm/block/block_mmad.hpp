// Stand-in for catlass/gemm/block/block_mmad.hpp (tests only; see tests/cpp/README.md): the block-level mmad
// template. The primary template is never usable; each dispatch policy has a specialisation whose
// static_asserts restate CATLASS's compile-time checks of that block.
#ifndef TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_HPP
#define TILER_STANDIN_CATLASS_GEMM_BLOCK_BLOCK_MMAD_HPP

#include "catlass/catlass.hpp"
#include "catlass/gemm/dispatch_policy.hpp"
#include "catlass/gemm/gemm_type.hpp"
#include "catlass/gemm/helper.hpp"
#include "catlass/gemm_coord.hpp"
#include "catlass/layout/layout.hpp"

namespace Catlass::Gemm::Block {

// Ten parameters, as in CATLASS: six named by the emitted code, then BiasType, TileCopy and TileMmad (defaults in
// CATLASS: no bias, the arch's default copies and mmad; `void` here, nothing uses them) and Enable (for
// specialisations that test a condition). A seventh argument given by mistake is taken as BiasType, as CATLASS
// would; an eleventh is an error.
template <class DispatchPolicy, class L1TileShape, class L0TileShape, class AType, class BType, class CType,
          class BiasType = void, class TileCopy = void, class TileMmad = void, class Enable = void>
struct BlockMmad {
    static_assert(DEPENDENT_FALSE<DispatchPolicy>,
                  "[catlass] BlockMmad has no block for this dispatch policy (the stand-in has "
                  "MmadAtlasA2PreloadAsync and MmadAtlasA2Pingpong)");
};

}  // namespace Catlass::Gemm::Block

#include "catlass/gemm/block/block_mmad_pingpong.hpp"
#include "catlass/gemm/block/block_mmad_preload_async.hpp"

#endif
