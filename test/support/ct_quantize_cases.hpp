#pragma once
// What ct_quantize_test.cpp and ct_quantize_x86_test.cpp share: ct_pack_quantize run on a whole
// [N, K] weight, the expected bytes walked one element at a time from the element rules, weights
// with the groups the rules treat specially, and the comparison of two results.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/ct_quantize.hpp>

namespace qtl_test::ct {

using qtl::index_t;

template <class T>
struct result {
  std::vector<std::int32_t> packed;
  std::vector<T> scales;
  std::vector<std::int32_t> zero_points;
};

template <class T>
result<T> run(std::vector<T> const& w, index_t n, index_t k, qtl::ct_pack_options const& opt) {
  index_t const gs = opt.group_size == -1 ? k : opt.group_size;
  index_t const pf = 32 / opt.bits;
  result<T> r{std::vector<std::int32_t>(static_cast<std::size_t>(n * (k / pf))),
              std::vector<T>(static_cast<std::size_t>(n * (k / gs))),
              std::vector<std::int32_t>(opt.symmetric ? 0 : static_cast<std::size_t>(n * (k / gs)))};
  qtl::ct_pack_quantize(
      qtl::make_view(w.data(), n, k),
      qtl::ct_pack_outputs<T>{qtl::make_view(r.packed.data(), n, k / pf), qtl::make_view(r.scales.data(), n, k / gs),
                              qtl::make_view(r.zero_points.data(), opt.symmetric ? 0 : n, k / gs)},
      opt);
  return r;
}

/// One element at a time, straight from the element rules: the expected bytes.
template <class T>
result<T> reference(std::vector<T> const& w, index_t n, index_t k, qtl::ct_pack_options const& opt) {
  index_t const gs = opt.group_size == -1 ? k : opt.group_size;
  int const b = opt.bits;
  index_t const pf = 32 / b;
  result<T> r;
  r.packed.assign(static_cast<std::size_t>(n * (k / pf)), 0);
  for (index_t i = 0; i < n; ++i) {
    for (index_t g = 0; g < k / gs; ++g) {
      float mx = qtl::to_float(w[static_cast<std::size_t>(i * k + g * gs)]);
      float mn = mx;
      for (index_t e = 0; e < gs; ++e) {
        float const v = qtl::to_float(w[static_cast<std::size_t>(i * k + g * gs + e)]);
        mx = qtl::detail::qnt::nan_max(mx, v);
        mn = qtl::detail::qnt::nan_min(mn, v);
      }
      auto const p = qtl::ct_int_group_params<T>(mx, mn, b, opt.symmetric);
      r.scales.push_back(qtl::from_float<T>(p.s));
      if (!opt.symmetric) {
        r.zero_points.push_back(static_cast<std::int32_t>(p.zp) + (1 << (b - 1)));
      }
      for (index_t e = 0; e < gs; ++e) {
        index_t const c = g * gs + e;
        float const q = qtl::ct_int_code<T>(qtl::to_float(w[static_cast<std::size_t>(i * k + c)]), p, b);
        auto const u = static_cast<std::uint32_t>(static_cast<std::int32_t>(q) + (1 << (b - 1)));
        auto& word = r.packed[static_cast<std::size_t>(i * (k / pf) + c / pf)];
        word = static_cast<std::int32_t>(static_cast<std::uint32_t>(word) | (u << (b * (c % pf))));
      }
    }
  }
  return r;
}

template <class T>
std::vector<T> random_weights(index_t n, index_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> e(-12.0f, 6.0f);
  std::vector<T> w(static_cast<std::size_t>(n * k));
  for (index_t i = 0; i < n; ++i) {
    float const row_scale = std::exp2(e(rng));  // rows of very different ranges
    for (index_t c = 0; c < k; ++c) {
      w[static_cast<std::size_t>(i * k + c)] = qtl::from_float<T>(d(rng) * row_scale);
    }
  }
  // rows that exercise the special rules: zeros of both signs; a range that overflows T (mx - mn
  // is Inf: s = Inf); values near T's smallest normal (subnormal quotients and scales)
  float const big = std::is_same_v<T, qtl::half_t> ? 65504.0f : 3.0e38f;
  float const tiny = std::is_same_v<T, qtl::half_t> ? 0x1p-14f : 0x1p-126f;
  for (index_t c = 0; n > 5 && c < k; ++c) {
    w[static_cast<std::size_t>(3 * k + c)] = qtl::from_float<T>(c % 3 == 0 ? -0.0f : c % 3 == 1 ? 0.0f : d(rng));
    w[static_cast<std::size_t>(4 * k + c)] = qtl::from_float<T>(c % 5 == 0 ? big : c % 5 == 1 ? -big : d(rng));
    w[static_cast<std::size_t>(5 * k + c)] = qtl::from_float<T>(tiny * d(rng));
  }
  // groups that exercise the special rules: all zero, one sign only, a constant
  for (index_t c = 0; c < k; ++c) {
    w[static_cast<std::size_t>(c)] = qtl::from_float<T>(0.0f);
    if (n > 1) {
      w[static_cast<std::size_t>(k + c)] = qtl::from_float<T>(0.5f + 0.001f * static_cast<float>(c % 7));
    }
    if (n > 2) {
      w[static_cast<std::size_t>(2 * k + c)] = qtl::from_float<T>(-3.0f);
    }
  }
  return w;
}

template <class T>
void check_equal(result<T> const& got, result<T> const& want) {
  REQUIRE(got.packed == want.packed);
  REQUIRE(got.scales.size() == want.scales.size());
  for (std::size_t i = 0; i < got.scales.size(); ++i) {
    REQUIRE(std::memcmp(&got.scales[i], &want.scales[i], sizeof(T)) == 0);  // bits: NaN scales too
  }
  REQUIRE(got.zero_points == want.zero_points);
}

}  // namespace qtl_test::ct
