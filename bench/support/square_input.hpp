#pragma once
// The input shape of the fp8 and fp4 benchmarks of both tiers: one 8192 x 8192 matrix (a large
// layer's weight; bf16, 128 MiB), so that host and device figures describe the same work.

#include <cstdint>

#include <qtl/view.hpp>

namespace qtl_bench {
inline constexpr qtl::index_t rows = 8192;
inline constexpr qtl::index_t cols = 8192;
inline constexpr std::int64_t numel = rows * cols;
}  // namespace qtl_bench
