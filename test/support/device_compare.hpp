#pragma once
// Device-vs-host comparisons for the CUDA tests that report briefly: "" when the vectors are equal,
// else how many elements differ and the first few (index, device value, host value) in hex, so a
// failing check on a million codes prints three lines instead of the whole vectors. And whether the
// simulated device is lowering the grid caps (the full-size cases skip themselves then).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>
#if defined(QTL_CUDA_SIM)
#include <cuda_sim/device.hpp>
#endif

namespace qtl_test {

/// True under the simulated device while its grid-cap hook (QTL_CUDA_SIM_GRID_CAP) lowers the
/// launchers' caps: a full-size case past a real cap then repeats, at full cost, what the small
/// capped cases already show (the loop past the cap), so it returns early.
inline bool grid_caps_lowered() {
#if defined(QTL_CUDA_SIM)
  return ::cuda_sim::grid_cap(65535) < 65535;
#else
  return false;
#endif
}

template <class T>
std::string mismatches(std::vector<T> const& device, std::vector<T> const& host, int show = 4) {
  std::ostringstream os;
  if (device.size() != host.size()) {
    os << "sizes differ: device " << device.size() << ", host " << host.size();
    return os.str();
  }
  std::size_t n = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (device[i] != host[i]) {
      if (n++ < static_cast<std::size_t>(show)) {
        os << "[" << i << "] device 0x" << std::hex << static_cast<std::uint64_t>(device[i]) << ", host 0x"
           << static_cast<std::uint64_t>(host[i]) << std::dec << "; ";
      }
    }
  }
  if (n == 0) {
    return {};
  }
  return std::to_string(n) + " of " + std::to_string(host.size()) + " differ: " + os.str();
}

}  // namespace qtl_test
