#pragma once
// The benchmarks' input bytes: `n` bytes of a fixed seed, so that runs compare.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace qtl_bench {

inline std::vector<std::uint8_t> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::mt19937 rng(42);
  for (auto& b : v) {
    b = static_cast<std::uint8_t>(rng());
  }
  return v;
}

}  // namespace qtl_bench
