// Stand-in for CANN's tiling/platform/platform_ascendc.h (tests only; see tests/cpp/README.md): the platform
// object a host tiling function builds from its context and hands to the Matmul tiling API. Here it carries the
// buffer sizes the stand-in tiling API checks against, from macros a test may set (defaults: Atlas A2's).
#ifndef TILER_STANDIN_TILING_PLATFORM_PLATFORM_ASCENDC_H
#define TILER_STANDIN_TILING_PLATFORM_PLATFORM_ASCENDC_H

#include <cstdint>

#ifndef TILER_STANDIN_L1_BYTES
#define TILER_STANDIN_L1_BYTES 524288
#endif
#ifndef TILER_STANDIN_L0C_BYTES
#define TILER_STANDIN_L0C_BYTES 131072
#endif
#ifndef TILER_STANDIN_AIC_CORES
#define TILER_STANDIN_AIC_CORES 20
#endif

namespace fe {
class PlatFormInfos;
}

namespace platform_ascendc {

enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6, RESERVED };

class PlatformAscendC {
public:
    PlatformAscendC() = default;
    explicit PlatformAscendC(fe::PlatFormInfos *) {}
    void GetCoreMemSize(const CoreMemType &memType, std::uint64_t &size) const
    {
        size = memType == CoreMemType::L1 ? TILER_STANDIN_L1_BYTES
               : memType == CoreMemType::L0_C ? TILER_STANDIN_L0C_BYTES
                                               : 0;
    }
    std::uint32_t GetCoreNumAic() const { return TILER_STANDIN_AIC_CORES; }
};

}  // namespace platform_ascendc

#endif
