// The host-only build's device table: none (take() refuses device arrays with how to get the
// CUDA build).

#include "device.hpp"

namespace qtl::py::device {

backend const* get() { return nullptr; }

}  // namespace qtl::py::device
