#pragma once
// The input shape of the fp8 and fp4 benchmarks of both tiers: one 8192 x 8192 matrix (a large
// layer's weight; bf16, 128 MiB), so that host and device figures describe the same work.

#include <cstdint>
#include <random>
#include <vector>

#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl_bench {
/// The shape, in a namespace of its own so that a benchmark names it once:
/// `using namespace qtl_bench::square_shape;`.
inline namespace square_shape {
inline constexpr qtl::index_t rows = 8192;
inline constexpr qtl::index_t cols = 8192;
inline constexpr std::int64_t numel = rows * cols;
}  // namespace square_shape

/// The host benchmarks' input values: normal(0, 1) draws of mt19937(1), rounded to bf16.
inline std::vector<qtl::bfloat16_t> normal_input() {
  std::vector<qtl::bfloat16_t> in(static_cast<std::size_t>(numel));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : in) {
    x = qtl::from_float<qtl::bfloat16_t>(normal(gen));
  }
  return in;
}

/// The input at `data` (host or device memory) as the [rows, cols] view the ops take.
inline qtl::view2d<qtl::bfloat16_t const> as_input(qtl::bfloat16_t const* data) {
  return qtl::make_view(data, rows, cols);
}
}  // namespace qtl_bench
