// Stand-in for what an AscendC op_host source gets from CANN's register/op_def_registry.h and is used by a host
// tiling function (tests only): ge::graphStatus with GRAPH_SUCCESS / GRAPH_FAILED, gert::TilingData (the raw
// tiling buffer: GetData, GetCapacity, SetDataSize, GetDataSize) and gert::TilingContext (SetBlockDim,
// GetBlockDim, GetRawTilingData, GetWorkspaceSizes). Written from the names and signatures in the CANN
// documentation of TilingContext and its usage in host tiling examples; no vendor code is copied. Nothing else of
// the real header (OpDef, shapes, attributes, platform info) is declared.
//
// In addition the context counts SetBlockDim and GetWorkspaceSizes calls, so a test can check that an emitted
// tiling function sets the block dim once and asks for one workspace.
#ifndef TILER_STANDIN_REGISTER_OP_DEF_REGISTRY_H
#define TILER_STANDIN_REGISTER_OP_DEF_REGISTRY_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ge {
using graphStatus = std::uint32_t;
inline constexpr graphStatus GRAPH_SUCCESS = 0;
inline constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge

namespace gert {

class TilingData {
public:
    void *GetData() { return data_; }
    std::size_t GetCapacity() const { return sizeof(data_); }
    void SetDataSize(std::size_t size) { size_ = size; }
    std::size_t GetDataSize() const { return size_; }

private:
    unsigned char data_[64 * 1024] = {};
    std::size_t size_ = 0;
};

class TilingContext {
public:
    ge::graphStatus SetBlockDim(std::uint32_t block_dim) {
        block_dim_ = block_dim;
        ++block_dim_calls_;
        return ge::GRAPH_SUCCESS;
    }
    std::uint32_t GetBlockDim() const { return block_dim_; }
    TilingData *GetRawTilingData() { return &raw_; }
    std::size_t *GetWorkspaceSizes(std::size_t count) {
        ++workspace_calls_;
        workspaces_.assign(count, 0);
        return workspaces_.data();
    }

    // stand-in only
    int BlockDimCalls() const { return block_dim_calls_; }
    int WorkspaceCalls() const { return workspace_calls_; }
    const std::vector<std::size_t> &Workspaces() const { return workspaces_; }

private:
    std::uint32_t block_dim_ = 0;
    int block_dim_calls_ = 0;
    int workspace_calls_ = 0;
    TilingData raw_;
    std::vector<std::size_t> workspaces_;
};

}  // namespace gert

#endif  // TILER_STANDIN_REGISTER_OP_DEF_REGISTRY_H
