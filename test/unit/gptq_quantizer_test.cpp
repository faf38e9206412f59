// qtl/element/gptq_quantizer.hpp: GPTQ's own asymmetric quantizer (`Quantizer.find_params` and
// `quantize`), the rule `qtl quantize --format gptq --asym` writes. Hand-worked cases in constant
// evaluation, then groups of one sign far from 0, where the reference rule of
// `qtl::quantize_weights` (zero point clamped to qmax) loses the group and this rule does not.
#include <qtl/element/gptq_quantizer.hpp>
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

// Mixed signs, 4 bits: xmin -1, xmax 2: s = 3/15 = 0.2 (float), z = rne(1 / 0.2) = 5; 2 -> 15,
// -1 -> 0, 0 -> 5 (zero is exact).
static_assert(qtl::gptq_asym_group_params(2.0f, -1.0f, 4).s == 3.0f / 15.0f);
static_assert(qtl::gptq_asym_group_params(2.0f, -1.0f, 4).zp == 5.0f);
static_assert(qtl::gptq_asym_code(2.0f, 3.0f / 15.0f, 5.0f, 4) == 15);
static_assert(qtl::gptq_asym_code(-1.0f, 3.0f / 15.0f, 5.0f, 4) == 0);
static_assert(qtl::gptq_asym_code(0.0f, 3.0f / 15.0f, 5.0f, 4) == 5);
// One sign: the range is widened to 0. [0.5, 1]: xmin 0, s = fl(1/15) (a little above 1/15), z = 0;
// 1 -> 15, 0.5 -> rne(0.5 / s) = rne(7.4999997) = 7 (not the tie 7.5: each step rounds in float32).
static_assert(qtl::gptq_asym_group_params(1.0f, 0.5f, 4).s == 1.0f / 15.0f);
static_assert(qtl::gptq_asym_group_params(1.0f, 0.5f, 4).zp == 0.0f);
static_assert(qtl::gptq_asym_code(1.0f, 1.0f / 15.0f, 0.0f, 4) == 15);
static_assert(qtl::gptq_asym_code(0.5f, 1.0f / 15.0f, 0.0f, 4) == 7);
// [-1, -0.5]: xmax 0, s = 1/15, z = 15; -1 -> 0.
static_assert(qtl::gptq_asym_group_params(-0.5f, -1.0f, 4).zp == 15.0f);
static_assert(qtl::gptq_asym_code(-1.0f, 1.0f / 15.0f, 15.0f, 4) == 0);
// All zero: xmin, xmax = -1, +1: s = fl(2/15), z = rne(1 / s) = rne(7.4999996) = 7; 0 -> 7 dequantizes to 0.
static_assert(qtl::gptq_asym_group_params(0.0f, 0.0f, 4).s == 2.0f / 15.0f);
static_assert(qtl::gptq_asym_group_params(0.0f, 0.0f, 4).zp == 7.0f);
static_assert(qtl::gptq_asym_dequantize(qtl::gptq_asym_code(0.0f, 2.0f / 15.0f, 7.0f, 4), 2.0f / 15.0f, 7.0f) == 0.0f);
// 8 bits: [-1, 3]: s = 4/255, z = rne(63.75) = 64.
static_assert(qtl::gptq_asym_group_params(3.0f, -1.0f, 8).zp == 64.0f);
// Codes clamp to [0, maxq]; NaN is code 0.
static_assert(qtl::gptq_asym_code(100.0f, 0.1f, 3.0f, 4) == 15);
static_assert(qtl::gptq_asym_code(-100.0f, 0.1f, 3.0f, 4) == 0);
static_assert(qtl::gptq_asym_code(std::numeric_limits<float>::quiet_NaN(), 0.1f, 3.0f, 4) == 0);

/// The largest |w' - w| of a group quantized by GPTQ's rule, and the group's step s.
struct group_error {
  float worst = 0;
  float step = 0;
};

group_error gptq_error(std::vector<float> const& w, int bits) {
  float mx = w[0];
  float mn = w[0];
  for (float x : w) {
    mx = std::max(mx, x);
    mn = std::min(mn, x);
  }
  auto const p = qtl::gptq_asym_group_params(mx, mn, bits);
  group_error e{0, p.s};
  for (float x : w) {
    float const d = qtl::gptq_asym_dequantize(qtl::gptq_asym_code(x, p.s, p.zp, bits), p.s, p.zp);
    e.worst = std::max(e.worst, std::fabs(d - x));
  }
  return e;
}

/// The largest |w_ref - w| of the same group through `qtl::quantize_weights` with zero points
/// (the reference rule; one column, G = K).
template <qtl::scalar_type Q>
float reference_error(std::vector<float> const& w) {
  auto const k = static_cast<qtl::index_t>(w.size());
  qtl::host_tensor<float, 2> in({k, 1});
  for (qtl::index_t i = 0; i < k; ++i) {
    in.view()(i, 0) = w[static_cast<std::size_t>(i)];
  }
  qtl::quantize_options opt;
  opt.zero_points = true;
  auto out = qtl::quantize_weights<Q, qtl::group_channelwise>(qtl::view2d<float const>(in.view()), opt);
  float worst = 0;
  for (qtl::index_t i = 0; i < k; ++i) {
    worst = std::max(worst, std::fabs(out.w_ref.view()(i, 0) - w[static_cast<std::size_t>(i)]));
  }
  return worst;
}

}  // namespace

TEST_CASE("gptq_asym: groups of one sign far from 0 keep their values", "[gptq_quantizer]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.4f, 0.6f);
  std::vector<float> uniform(128);
  for (float& x : uniform) {
    x = u(rng);
  }
  std::vector<float> negative(uniform.size());
  for (std::size_t i = 0; i < uniform.size(); ++i) {
    negative[i] = -uniform[i];
  }
  std::vector<float> constant(64, 0.5f);
  for (int bits : {4, 8}) {
    for (auto const* w : {&uniform, &negative, &constant}) {
      group_error const e = gptq_error(*w, bits);
      CAPTURE(bits, w->front());
      // within half a step (and a little float rounding): every value is on the grid's range
      CHECK(e.worst <= 0.5f * e.step * 1.0001f);
      // the reference rule clamps the zero point: the group comes back as 0 (or -0.2 for the
      // negative one), off by 0.4 or more where every |w| is in [0.4, 0.6]
      float const ref = bits == 4 ? reference_error<qtl::uint4>(*w) : reference_error<qtl::uint8>(*w);
      CHECK(ref >= 0.35f);
    }
  }
}

TEST_CASE("gptq_asym: mixed-sign groups, with 0 exact", "[gptq_quantizer]") {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 0.02f);
  for (int bits : {4, 8}) {
    std::vector<float> w(128);
    for (float& x : w) {
      x = g(rng);
    }
    w[3] = 0.0f;
    group_error const e = gptq_error(w, bits);
    CHECK(e.worst <= 0.5f * e.step * 1.0001f);
    float mx = *std::max_element(w.begin(), w.end());
    float mn = *std::min_element(w.begin(), w.end());
    auto const p = qtl::gptq_asym_group_params(mx, mn, bits);
    CHECK(qtl::gptq_asym_dequantize(qtl::gptq_asym_code(0.0f, p.s, p.zp, bits), p.s, p.zp) == 0.0f);
  }
}
