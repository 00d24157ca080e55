// Stand-in for AscendC's host-side tiling-data class optiling::TCubeTiling (tests only; see
// tests/cpp/README.md). Written from the field list of the CANN asc-devkit TCubeTiling documentation; no vendor
// code is copied.
//
// Every field has `void set_<field>(int32_t)` and `int32_t get_<field>() const`, as on the real class. In
// addition the stand-in counts, per field, how often its setter was called and keeps the last value set, in
// process-wide tables, so a test can check that an emitted fragment sets every field exactly once:
// tiler_standin::report() prints one line per field and returns the number of fields not set exactly once.
#ifndef TILER_TCUBE_STANDIN_H
#define TILER_TCUBE_STANDIN_H

#include <cstdint>
#include <cstdio>

// The 50 int32_t fields of TCubeTiling, in the struct's order.
#define TILER_TCUBE_FIELDS(X)                                                                                   \
    X(usedCoreNum) X(M) X(N) X(Ka) X(Kb) X(singleCoreM) X(singleCoreN) X(singleCoreK) X(baseM) X(baseN)      \
    X(baseK) X(depthA1) X(depthB1) X(stepM) X(stepN) X(isBias) X(transLength) X(iterateOrder) X(shareMode)    \
    X(shareL1Size) X(shareL0CSize) X(shareUbSize) X(batchM) X(batchN) X(singleBatchM) X(singleBatchN)         \
    X(stepKa) X(stepKb) X(depthAL1CacheUB) X(depthBL1CacheUB) X(dbL0A) X(dbL0B) X(dbL0C) X(ALayoutInfoB)      \
    X(ALayoutInfoS) X(ALayoutInfoN) X(ALayoutInfoG) X(ALayoutInfoD) X(BLayoutInfoB) X(BLayoutInfoS)           \
    X(BLayoutInfoN) X(BLayoutInfoG) X(BLayoutInfoD) X(CLayoutInfoB) X(CLayoutInfoS1) X(CLayoutInfoN)          \
    X(CLayoutInfoG) X(CLayoutInfoS2) X(BatchNum) X(mxTypePara)

namespace tiler_standin {

enum TCubeField : int {
#define TILER_TCUBE_ENUM(name) field_##name,
    TILER_TCUBE_FIELDS(TILER_TCUBE_ENUM)
#undef TILER_TCUBE_ENUM
        FIELD_COUNT
};
static_assert(FIELD_COUNT == 50, "TCubeTiling has 50 fields");

inline const char *const FIELD_NAMES[FIELD_COUNT] = {
#define TILER_TCUBE_NAME(name) #name,
    TILER_TCUBE_FIELDS(TILER_TCUBE_NAME)
#undef TILER_TCUBE_NAME
};

inline int set_calls[FIELD_COUNT] = {};
inline std::int32_t last_value[FIELD_COUNT] = {};
// Fields the stand-in MultiCoreMatmulTiling::GetTiling left to "the API's own choice" (lib/matmul/bmm_tiling.h).
inline bool api_chosen[FIELD_COUNT] = {};

// Forgets every recorded call, value and API choice (between the two forms of one test program).
inline void reset()
{
    for (int i = 0; i < FIELD_COUNT; ++i) {
        set_calls[i] = 0;
        last_value[i] = 0;
        api_chosen[i] = false;
    }
}

inline void record(TCubeField field, std::int32_t value) {
    ++set_calls[field];
    last_value[field] = value;
}

// Prints "<field> <value> <calls>" per field to `out`; returns how many fields were not set exactly once.
inline int report(std::FILE *out) {
    int bad = 0;
    for (int i = 0; i < FIELD_COUNT; ++i) {
        std::fprintf(out, "%s %ld %d\n", FIELD_NAMES[i], static_cast<long>(last_value[i]), set_calls[i]);
        if (set_calls[i] != 1) {
            std::fprintf(stderr, "TCubeTiling field %s set %d times (want exactly once)\n", FIELD_NAMES[i],
                         set_calls[i]);
            ++bad;
        }
    }
    return bad;
}

}  // namespace tiler_standin

namespace optiling {

class TCubeTiling {
public:
#define TILER_TCUBE_ACCESSORS(name)                                                                             \
    void set_##name(std::int32_t value) {                                                                      \
        name##_ = value;                                                                                       \
        tiler_standin::record(tiler_standin::field_##name, value);                                             \
    }                                                                                                          \
    std::int32_t get_##name() const { return name##_; }
    TILER_TCUBE_FIELDS(TILER_TCUBE_ACCESSORS)
#undef TILER_TCUBE_ACCESSORS

private:
#define TILER_TCUBE_MEMBER(name) std::int32_t name##_ = 0;
    TILER_TCUBE_FIELDS(TILER_TCUBE_MEMBER)
#undef TILER_TCUBE_MEMBER
};

}  // namespace optiling

// Host tiling code usually sits inside namespace optiling; a pasted fragment may name the class either way.
using optiling::TCubeTiling;

#endif  // TILER_TCUBE_STANDIN_H
