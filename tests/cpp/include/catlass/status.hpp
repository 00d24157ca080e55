// Stand-in for catlass/status.hpp (tests only; see tests/cpp/README.md): what the device adapter returns.
#ifndef TILER_STANDIN_CATLASS_STATUS_HPP
#define TILER_STANDIN_CATLASS_STATUS_HPP

namespace Catlass {

enum class Status { kSuccess, kInvalid };

}  // namespace Catlass

#endif
