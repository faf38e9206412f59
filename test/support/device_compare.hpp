#pragma once
// Device-vs-host comparisons for the CUDA tests that report briefly: "" when the vectors are equal,
// else how many elements differ and the first few (index, device value, host value) in hex, so a
// failing check on a million codes prints three lines instead of the whole vectors.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace qtl_test {

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
