// Stand-in for catlass/gemm/device/device_gemm.hpp (tests only; see tests/cpp/README.md): the host adapter
// DeviceGemm<GemmKernel> with the calls CATLASS's examples make (CanImplement, GetWorkspaceSize, Initialize, the
// launch with a block dim, with or without the hardware sync address). It launches nothing.
#ifndef TILER_STANDIN_CATLASS_GEMM_DEVICE_DEVICE_GEMM_HPP
#define TILER_STANDIN_CATLASS_GEMM_DEVICE_DEVICE_GEMM_HPP

#include <cstddef>

#include "acl/acl.h"
#include "catlass/catlass.hpp"
#include "catlass/status.hpp"

namespace Catlass::Gemm::Device {

template <class GemmKernel>
class DeviceGemm {
public:
    using Kernel = GemmKernel;
    using Arguments = typename GemmKernel::Arguments;
    using Params = typename GemmKernel::Params;

    static Status CanImplement(Arguments const &args)
    {
        return GemmKernel::CanImplement(args) ? Status::kSuccess : Status::kInvalid;
    }
    static std::size_t GetWorkspaceSize(Arguments const &args) { return GemmKernel::GetWorkspaceSize(args); }
    Status Initialize(Arguments const &args, std::uint8_t *workspace = nullptr, aclrtStream stream = nullptr)
    {
        (void)stream;
        params_ = GemmKernel::ToUnderlyingArguments(args, workspace);
        return Status::kSuccess;
    }
    Status Run(aclrtStream stream, std::uint32_t blockDim, std::uint64_t hardwareSyncAddr)
    {
        (void)stream;
        (void)blockDim;
        (void)hardwareSyncAddr;
        return Status::kSuccess;
    }
    Status operator()(aclrtStream stream, std::uint32_t blockDim) { return Run(stream, blockDim, 0); }
    Status operator()(aclrtStream stream, std::uint32_t blockDim, std::uint64_t hardwareSyncAddr)
    {
        return Run(stream, blockDim, hardwareSyncAddr);
    }
    Params const &params() const { return params_; }

private:
    Params params_;
};

}  // namespace Catlass::Gemm::Device

#endif
