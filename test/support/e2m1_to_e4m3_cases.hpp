#pragma once
// What e2m1_to_e4m3_test.cpp (the host ops) and cuda/e2m1_to_e4m3_test.cu (the kernels) share:
// random MXFP4 stacks with a bounded scale spread, the golden cast-e2m1fn-to-e4m3fn cases
// (recorded from sglang's cast_e2m1fn_to_e4m3fn) with their grids, and the golden
// deepgemm-post-process-e8m0 cases (recorded from vLLM's deepgemm_post_process_fp8_weight_block)
// with their layouts.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <golden.hpp>

#include <qtl/convert.hpp>
#include <qtl/deepgemm_e8m0.hpp>

namespace qtl_test::e2m1 {

using bytes = std::vector<std::uint8_t>;

/// A random MXFP4 stack of grid `g` (codes [G, N, K/2], E8M0 scales [G, N, K/32]) whose 1x32
/// scales lie within `spread` below 2^(100 + spread - 127).
inline std::pair<bytes, bytes> random_mxfp4(qtl::convert::block_grid const& g, int spread, std::mt19937& rng) {
  bytes x(static_cast<std::size_t>(g.elements() / 2)), sc(static_cast<std::size_t>(g.elements() / 32));
  for (auto& b : x) b = static_cast<std::uint8_t>(rng());
  for (auto& e : sc) e = static_cast<std::uint8_t>(100 + spread - static_cast<int>(rng() % (spread + 1)));
  return {x, sc};
}

/// One golden case: its input, grid (128x128 blocks) and expected output bytes.
struct golden_cast {
  qtl::convert::block_grid grid;
  bytes x, scale, want_q, want_s;
};

/// Every golden cast-e2m1fn-to-e4m3fn case, with its name.
inline std::vector<std::pair<std::string, golden_cast>> golden_casts() {
  std::vector<std::pair<std::string, golden_cast>> out;
  for (auto const& c : qtl::test::golden_cases("cast-e2m1fn-to-e4m3fn")) {
    auto const& w = c.in.at("weight").shape;
    bool const experts = w.size() == 3;
    golden_cast g;
    g.grid = {experts ? w[0] : 1, w[w.size() - 2], w.back() * 2, {128, 128}};
    g.x = qtl::test::tensor_values<std::uint8_t>(c.in, "weight", qtl::io::dtype::I8);
    g.scale = qtl::test::tensor_values<std::uint8_t>(c.in, "scale", qtl::io::dtype::F8_E8M0);
    g.want_q = qtl::test::tensor_values<std::uint8_t>(c.expected, "weight", qtl::io::dtype::F8_E4M3);
    g.want_s = qtl::test::tensor_values<std::uint8_t>(c.expected, "scale", qtl::io::dtype::F8_E8M0);
    out.emplace_back(c.name, std::move(g));
  }
  return out;
}

/// One golden deepgemm-post-process-e8m0 case: the layout, the E8M0 codes and the expected words.
struct golden_dg_pack {
  qtl::convert::dg_packed_layout layout;
  bytes scale;
  std::vector<std::int32_t> want;
};

/// Every golden deepgemm-post-process-e8m0 case, with its name.
inline std::vector<std::pair<std::string, golden_dg_pack>> golden_dg_packs() {
  std::vector<std::pair<std::string, golden_dg_pack>> out;
  for (auto const& c : qtl::test::golden_cases("deepgemm-post-process-e8m0")) {
    auto const& w = c.in.at("weight").shape;
    bool const experts = w.size() == 3;
    std::int64_t const bmm = c.params.contains("bmm-batch") ? c.params.at("bmm-batch").get<std::int64_t>() : 0;
    golden_dg_pack g;
    g.layout = qtl::convert::deepgemm_post_process_layout(experts ? w[0] : 1, w[w.size() - 2], w.back(), bmm);
    g.scale = qtl::test::tensor_values<std::uint8_t>(c.in, "scale", qtl::io::dtype::F8_E8M0);
    g.want = qtl::test::tensor_values<std::int32_t>(c.expected, "scale", qtl::io::dtype::I32);
    out.emplace_back(c.name, std::move(g));
  }
  return out;
}

}  // namespace qtl_test::e2m1
