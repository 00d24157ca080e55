// Stand-in for CANN's lib/matmul/bmm_tiling.h (tests only; see tests/cpp/README.md): the host Matmul tiling
// API's matmul_tiling::MultiCoreMatmulTiling, with the setters the AscendC docs list (names, parameters and
// defaults as documented), and a GetTiling that fills optiling::TCubeTiling only from what the calls fix, as the
// docs describe the fixed-split case:
//   M, N, Ka, Kb            SetOrgShape
//   singleCoreM/N/K         SetSingleShape (-1: the API's choice); singleCoreK < Ka needs EnableMultiCoreSplitK
//   usedCoreNum             ceil(M/singleCoreM) * ceil(N/singleCoreN) * ceil(Ka/singleCoreK), at most SetDim's
//   baseM, baseN            SetFixSplit (multiples of 16; baseM <= singleCoreM and baseN <= singleCoreN rounded
//                           up to 16 and to C0; baseM * baseN * sizeof(C) <= L0C); its baseK may only be -1
//   iterateOrder            SetTraverse or SetMatmulConfigParams' traverse: FIRSTM 0, FIRSTN 1 (NOSET: API's)
//   isBias                  EnableBias / SetBias
//   BatchNum, *LayoutInfo*  SetBatchNum, SetALayout / SetBLayout / SetCLayout (0 when not called)
//   shareMode, mxTypePara   0 (reserved; no MX types)
// Every other field is what the real API decides by its own search (depths, steps, baseK, L0 double buffers,
// its buffer accounting, the batch split): no setter reaches it, and the stand-in cannot know the real choice.
// It writes -1 there and marks the field in tiler_standin::api_chosen, so a test sees exactly which fields the
// caller has to set after GetTiling. GetTiling returns -1 (failure) where the docs say tiling fails.
#ifndef TILER_STANDIN_LIB_MATMUL_BMM_TILING_H
#define TILER_STANDIN_LIB_MATMUL_BMM_TILING_H

#include <cstdint>

#include "tiler_tcube_standin.h"
#include "tiling/platform/platform_ascendc.h"

namespace matmul_tiling {

enum class DataType : std::int32_t {
    DT_FLOAT = 0,
    DT_FLOAT16 = 1,
    DT_INT8 = 2,
    DT_INT32 = 3,
    DT_BF16 = 27,
    DT_INT4 = 29,
    DT_BFLOAT16 = 33,
};
enum class TPosition : std::int32_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, SPM, TSCM, MAX };
enum class CubeFormat : std::int32_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };
enum class MatrixTraverse : std::int32_t { NOSET = 0, FIRSTM = 1, FIRSTN = 2 };
enum class ScheduleType : std::int32_t { INNER_PRODUCT = 0, OUTER_PRODUCT = 1, N_BUFFER_33 = 2 };

struct MatmulConfigParams {
    std::int32_t mmConfigType;
    bool enableL1CacheUB;
    ScheduleType scheduleType;
    MatrixTraverse traverse;
    bool enVecND2NZ;
    MatmulConfigParams(std::int32_t mmConfigTypeIn = 1, bool enableL1CacheUBIn = false,
                       ScheduleType scheduleTypeIn = ScheduleType::INNER_PRODUCT,
                       MatrixTraverse traverseIn = MatrixTraverse::NOSET, bool enVecND2NZIn = false)
        : mmConfigType(mmConfigTypeIn),
          enableL1CacheUB(enableL1CacheUBIn),
          scheduleType(scheduleTypeIn),
          traverse(traverseIn),
          enVecND2NZ(enVecND2NZIn)
    {
    }
};

class MultiCoreMatmulTiling {
public:
    MultiCoreMatmulTiling() = default;
    explicit MultiCoreMatmulTiling(const platform_ascendc::PlatformAscendC &platform)
    {
        platform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, l0cBytes_);
    }
    virtual ~MultiCoreMatmulTiling() = default;

    std::int32_t SetDim(std::int32_t dim)
    {
        dim_ = dim;
        return 0;
    }
    std::int32_t SetAType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans = false)
    {
        return SetOperand(a_, pos, type, dataType, isTrans);
    }
    std::int32_t SetBType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans = false)
    {
        return SetOperand(b_, pos, type, dataType, isTrans);
    }
    std::int32_t SetCType(TPosition pos, CubeFormat type, DataType dataType)
    {
        return SetOperand(c_, pos, type, dataType, false);
    }
    std::int32_t SetBiasType(TPosition pos, CubeFormat type, DataType dataType)
    {
        return SetOperand(bias_, pos, type, dataType, false);
    }
    std::int32_t SetShape(std::int32_t m, std::int32_t n, std::int32_t k)
    {
        shape_[0] = m;
        shape_[1] = n;
        shape_[2] = k;
        return 0;
    }
    std::int32_t SetOrgShape(std::int32_t orgMIn, std::int32_t orgNIn, std::int32_t orgKIn)
    {
        return SetOrgShape(orgMIn, orgNIn, orgKIn, orgKIn);
    }
    std::int32_t SetOrgShape(std::int32_t orgMIn, std::int32_t orgNIn, std::int32_t orgKaIn, std::int32_t orgKbIn)
    {
        org_[0] = orgMIn;
        org_[1] = orgNIn;
        org_[2] = orgKaIn;
        org_[3] = orgKbIn;
        return 0;
    }
    std::int32_t SetSingleShape(std::int32_t singleMIn = -1, std::int32_t singleNIn = -1,
                                std::int32_t singleKIn = -1)
    {
        single_[0] = singleMIn;
        single_[1] = singleNIn;
        single_[2] = singleKIn;
        return 0;
    }
    std::int32_t EnableBias(bool isBiasIn = false)
    {
        isBias_ = isBiasIn;
        return 0;
    }
    std::int32_t SetBias(bool isBiasIn = false) { return EnableBias(isBiasIn); }
    std::int32_t SetFixSplit(std::int32_t baseMIn = -1, std::int32_t baseNIn = -1, std::int32_t baseKIn = -1)
    {
        // the docs: baseK accepts only -1 (the API picks it); baseM and baseN are whole 16-element fractals
        if (baseKIn != -1 || baseMIn == 0 || baseNIn == 0 || (baseMIn != -1 && baseMIn % 16 != 0) ||
            (baseNIn != -1 && baseNIn % 16 != 0)) {
            return -1;
        }
        baseM_ = baseMIn;
        baseN_ = baseNIn;
        return 0;
    }
    std::int32_t SetBufferSpace(std::int32_t l1Size = -1, std::int32_t l0CSize = -1, std::int32_t ubSize = -1,
                                std::int32_t btSize = -1)
    {
        (void)l1Size;
        (void)ubSize;
        (void)btSize;
        if (l0CSize != -1) {
            l0cBytes_ = static_cast<std::uint64_t>(l0CSize);
        }
        return 0;
    }
    std::int32_t SetTraverse(MatrixTraverse traverse)
    {
        traverse_ = traverse;
        return 0;
    }
    // Reserved in the docs ("当前版本暂不支持"): accepted, changes nothing.
    std::int32_t SetDoubleBuffer(bool a, bool b, bool c, bool bias, bool transND2NZ = true, bool transNZ2ND = true)
    {
        (void)a, (void)b, (void)c, (void)bias, (void)transND2NZ, (void)transNZ2ND;
        return 0;
    }
    // Sets the traversal too: NOSET unless given (so it undoes an earlier SetTraverse).
    void SetMatmulConfigParams(std::int32_t mmConfigTypeIn = 1, bool enableL1CacheUBIn = false,
                               ScheduleType scheduleTypeIn = ScheduleType::INNER_PRODUCT,
                               MatrixTraverse traverseIn = MatrixTraverse::NOSET, bool enVecND2NZIn = false)
    {
        SetMatmulConfigParams(
            MatmulConfigParams(mmConfigTypeIn, enableL1CacheUBIn, scheduleTypeIn, traverseIn, enVecND2NZIn));
    }
    void SetMatmulConfigParams(const MatmulConfigParams &configParams)
    {
        mmConfigType_ = configParams.mmConfigType;
        traverse_ = configParams.traverse;
    }
    void EnableMultiCoreSplitK(bool flag) { splitK_ = flag; }
    void SetSplitK(bool flag) { EnableMultiCoreSplitK(flag); }
    std::int32_t SetBatchNum(std::int32_t batch)
    {
        batchNum_ = batch;
        return 0;
    }
    std::int32_t SetALayout(std::int32_t b, std::int32_t s, std::int32_t n, std::int32_t g, std::int32_t d)
    {
        return SetLayout(aLayout_, b, s, n, g, d);
    }
    std::int32_t SetBLayout(std::int32_t b, std::int32_t s, std::int32_t n, std::int32_t g, std::int32_t d)
    {
        return SetLayout(bLayout_, b, s, n, g, d);
    }
    std::int32_t SetCLayout(std::int32_t b, std::int32_t s, std::int32_t n, std::int32_t g, std::int32_t d)
    {
        return SetLayout(cLayout_, b, s, n, g, d);
    }
    std::int32_t GetBaseM() const { return baseM_; }
    std::int32_t GetBaseN() const { return baseN_; }
    std::int32_t GetBaseK() const { return -1; }
    std::int32_t GetSingleShape(std::int32_t &shapeM, std::int32_t &shapeN, std::int32_t &shapeK)
    {
        shapeM = single_[0];
        shapeN = single_[1];
        shapeK = single_[2];
        return 0;
    }
    std::int32_t mmConfigType() const { return mmConfigType_; }  // stand-in only: what SetMatmulConfigParams set

    std::int64_t GetTiling(optiling::TCubeTiling &tiling)
    {
        using namespace tiler_standin;
        if (!a_.set || !b_.set || !c_.set || org_[0] <= 0 || org_[1] <= 0 || org_[2] <= 0 || dim_ <= 0) {
            return -1;
        }
        const std::int32_t m = org_[0], n = org_[1], ka = org_[2];
        const bool singleSet = single_[0] > 0 && single_[1] > 0 && single_[2] > 0;
        if (singleSet && (single_[0] > m || single_[1] > n || single_[2] > ka)) {
            return -1;
        }
        if (singleSet && single_[2] < ka && !splitK_) {
            return -1;  // K is split across cores only after EnableMultiCoreSplitK(true)
        }
        std::int32_t used = -1;
        if (singleSet) {
            used = CeilDiv(m, single_[0]) * CeilDiv(n, single_[1]) * CeilDiv(ka, single_[2]);
            if (used > dim_) {
                return -1;
            }
        }
        if (singleSet && baseM_ > 0 && baseM_ > CeilDiv(single_[0], 16) * 16) {
            return -1;
        }
        const std::int32_t c0 = 32 / Bytes(b_.dataType);  // C0_size of B's type: 16 half, 8 float, 32 int8
        if (singleSet && baseN_ > 0 && baseN_ > CeilDiv(single_[1], c0) * c0) {
            return -1;
        }
        if (baseM_ > 0 && baseN_ > 0 &&
            static_cast<std::uint64_t>(baseM_) * static_cast<std::uint64_t>(baseN_) * Bytes(c_.dataType) > l0cBytes_) {
            return -1;
        }
        const std::int32_t order = traverse_ == MatrixTraverse::FIRSTM   ? 0
                                   : traverse_ == MatrixTraverse::FIRSTN ? 1
                                                                          : -1;
#define TILER_PUT(name, value) Put(tiling, field_##name, &optiling::TCubeTiling::set_##name, value)
        TILER_PUT(usedCoreNum, used);
        TILER_PUT(M, m);
        TILER_PUT(N, n);
        TILER_PUT(Ka, ka);
        TILER_PUT(Kb, org_[3]);
        TILER_PUT(singleCoreM, singleSet ? single_[0] : -1);
        TILER_PUT(singleCoreN, singleSet ? single_[1] : -1);
        TILER_PUT(singleCoreK, singleSet ? single_[2] : -1);
        TILER_PUT(baseM, baseM_);
        TILER_PUT(baseN, baseN_);
        TILER_PUT(baseK, -1);
        TILER_PUT(depthA1, -1);
        TILER_PUT(depthB1, -1);
        TILER_PUT(stepM, -1);
        TILER_PUT(stepN, -1);
        TILER_PUT(isBias, isBias_ ? 1 : 0);
        TILER_PUT(transLength, -1);
        TILER_PUT(iterateOrder, order);
        TILER_PUT(shareMode, 0);
        TILER_PUT(shareL1Size, -1);
        TILER_PUT(shareL0CSize, -1);
        TILER_PUT(shareUbSize, -1);
        TILER_PUT(batchM, -1);
        TILER_PUT(batchN, -1);
        TILER_PUT(singleBatchM, -1);
        TILER_PUT(singleBatchN, -1);
        TILER_PUT(stepKa, -1);
        TILER_PUT(stepKb, -1);
        TILER_PUT(depthAL1CacheUB, -1);
        TILER_PUT(depthBL1CacheUB, -1);
        TILER_PUT(dbL0A, -1);
        TILER_PUT(dbL0B, -1);
        TILER_PUT(dbL0C, -1);
        TILER_PUT(ALayoutInfoB, aLayout_[0]);
        TILER_PUT(ALayoutInfoS, aLayout_[1]);
        TILER_PUT(ALayoutInfoN, aLayout_[2]);
        TILER_PUT(ALayoutInfoG, aLayout_[3]);
        TILER_PUT(ALayoutInfoD, aLayout_[4]);
        TILER_PUT(BLayoutInfoB, bLayout_[0]);
        TILER_PUT(BLayoutInfoS, bLayout_[1]);
        TILER_PUT(BLayoutInfoN, bLayout_[2]);
        TILER_PUT(BLayoutInfoG, bLayout_[3]);
        TILER_PUT(BLayoutInfoD, bLayout_[4]);
        TILER_PUT(CLayoutInfoB, cLayout_[0]);
        TILER_PUT(CLayoutInfoS1, cLayout_[1]);
        TILER_PUT(CLayoutInfoN, cLayout_[2]);
        TILER_PUT(CLayoutInfoG, cLayout_[3]);
        TILER_PUT(CLayoutInfoS2, cLayout_[4]);
        TILER_PUT(BatchNum, batchNum_);
        TILER_PUT(mxTypePara, 0);
#undef TILER_PUT
        return 0;
    }

private:
    struct Operand {
        bool set = false;
        TPosition pos = TPosition::GM;
        CubeFormat format = CubeFormat::ND;
        DataType dataType = DataType::DT_FLOAT16;
        bool isTrans = false;
    };

    static std::int32_t SetOperand(Operand &o, TPosition pos, CubeFormat format, DataType dataType, bool isTrans)
    {
        o = Operand{true, pos, format, dataType, isTrans};
        return 0;
    }
    static std::int32_t SetLayout(std::int32_t (&dst)[5], std::int32_t b, std::int32_t s, std::int32_t n,
                                  std::int32_t g, std::int32_t d)
    {
        dst[0] = b, dst[1] = s, dst[2] = n, dst[3] = g, dst[4] = d;
        return 0;
    }
    static std::int32_t CeilDiv(std::int32_t a, std::int32_t b) { return (a + b - 1) / b; }
    static std::int32_t Bytes(DataType t)
    {
        return t == DataType::DT_FLOAT || t == DataType::DT_INT32 ? 4 : t == DataType::DT_INT8 ? 1 : 2;
    }
    // A value the calls fixed is written as is; -1 marks the API's own choice (tiler_standin::api_chosen).
    static void Put(optiling::TCubeTiling &tiling, tiler_standin::TCubeField field,
                    void (optiling::TCubeTiling::*setter)(std::int32_t), std::int32_t value)
    {
        tiler_standin::api_chosen[field] = value == -1;
        (tiling.*setter)(value);
    }

    Operand a_, b_, c_, bias_;
    std::int32_t dim_ = 0;
    std::int32_t shape_[3] = {-1, -1, -1};
    std::int32_t org_[4] = {0, 0, 0, 0};
    std::int32_t single_[3] = {-1, -1, -1};
    std::int32_t baseM_ = -1;
    std::int32_t baseN_ = -1;
    bool isBias_ = false;
    bool splitK_ = false;
    MatrixTraverse traverse_ = MatrixTraverse::NOSET;
    std::int32_t mmConfigType_ = 1;
    std::int32_t batchNum_ = 0;
    std::int32_t aLayout_[5] = {0, 0, 0, 0, 0};
    std::int32_t bLayout_[5] = {0, 0, 0, 0, 0};
    std::int32_t cLayout_[5] = {0, 0, 0, 0, 0};
    std::uint64_t l0cBytes_ = TILER_STANDIN_L0C_BYTES;
};

}  // namespace matmul_tiling

#endif
