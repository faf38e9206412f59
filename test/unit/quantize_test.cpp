// qtl/quantize.hpp: hand-worked cases (ties, per-op rounding), properties on random weights,
// the defined edge cases (all-zero groups, NaN, Inf), errors, act-order, sorting and the small
// utilities. The golden cases are in quantize_golden_test.cpp.
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>
#include "thin.hpp"

namespace {

using qtl::half_t;
using qtl::index_t;
using qtl::bfloat16_t;

template <class T>
std::vector<T> random_weights(index_t k, index_t n, std::uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<T> w(static_cast<std::size_t>(k * n));
  for (auto& x : w) {
    x = qtl::from_float<T>(dist(rng));
  }
  return w;
}

template <class T>
float f(T x) {
  return qtl::to_float(x);
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

/// The reference's numerics re-derived with qtl/numeric.hpp's conversions (a second, slow
/// implementation): rt(x) rounds to T after each operation as torch does.
template <class T>
float rt(float x) {
  return qtl::to_float(qtl::from_float<T>(x));
}
template <class T>
float ref_scale_sym(float mx, float mn, float qmax, float qmin) {
  float const a = std::fabs(rt<T>(mx / qmax));
  float const b = std::fabs(rt<T>(mn / qmin));
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

}  // namespace

TEST_CASE("round_precision_for_code then torch.round equals round_to then torch.round", "[quantize]") {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> probes;
  for (std::uint32_t e = 0; e < 256; ++e) {  // every exponent, mantissas around every rounding boundary
    for (std::uint32_t m : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x2FFFu, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u,
                            0x7FFFFFu, 0x7FF000u, 0x7FEFFFu}) {
      probes.push_back((e << 23) | m);
      probes.push_back(0x80000000u | (e << 23) | m);
    }
  }
  for (int i = 0; i < qtl_test::rounds(2000000); ++i) {
    probes.push_back(static_cast<std::uint32_t>(rng()));
  }
  for (std::uint32_t u : probes) {
    float const x = std::bit_cast<float>(u);
    INFO("bits " << u);
    // In code range; the fp16/bf16 codecs themselves are tested in numeric_test.cpp.
    for (float s : {1.0f, 0.01f, 1e-6f}) {
      float const v = x * s;
      float const fast = qtl::round_half_even(qtl::detail::qnt::round_precision_for_code<half_t>(v));
      float const slow = qtl::round_half_even(rt<half_t>(v));
      if (!std::isnan(slow)) {
        REQUIRE(std::clamp(fast, -256.0f, 256.0f) == std::clamp(slow, -256.0f, 256.0f));
      }
      float const fast_b = qtl::round_half_even(qtl::detail::qnt::round_precision_for_code<bfloat16_t>(v));
      float const slow_b = qtl::round_half_even(rt<bfloat16_t>(v));
      if (!std::isnan(slow_b)) {
        REQUIRE(std::clamp(fast_b, -256.0f, 256.0f) == std::clamp(slow_b, -256.0f, 256.0f));
      }
    }
  }
}

TEST_CASE("ties round half to even, in every weight dtype", "[quantize]") {
  // uint4b8, one group: max 7, min -2, so s = max(7/7, 2/8) = 1 and w/s = w exactly.
  std::vector<float> const col = {7.0f, -2.0f, 2.5f, -0.5f, 0.5f, 1.5f, 3.5f, -3.5f, 4.5f, -1.5f};
  std::vector<std::int32_t> const want = {15, 6, 10, 8, 8, 10, 12, 4, 12, 6};  // value + 8
  auto run = [&]<class T>() {
    std::vector<T> w;
    for (float x : col) {
      w.push_back(qtl::from_float<T>(x));
    }
    auto const r = qtl::quantize_weights<qtl::uint4b8, qtl::group_channelwise>(qtl::make_view(w.data(), 10, 1));
    CHECK(f(r.w_s.data()[0]) == 1.0f);
    for (int i = 0; i < 10; ++i) {
      INFO("row " << i);
      CHECK(r.w_q.data()[i] == want[static_cast<std::size_t>(i)]);
      CHECK(f(r.w_ref.data()[i]) == static_cast<float>(want[static_cast<std::size_t>(i)] - 8));
    }
    // -0.5 rounds to -0, which the int32 code turns into +0: w_ref is +0, not -0.
    CHECK(bits(f(r.w_ref.data()[3])) == 0u);
  };
  run.operator()<float>();
  run.operator()<half_t>();
  run.operator()<bfloat16_t>();
}

TEST_CASE("each operation rounds to the weight dtype (fp16 and bf16 hand-worked cases)", "[quantize]") {
  SECTION("fp16: w/s = 6.50119 rounds to 6.5 in fp16, then to even 6") {
    // mx = 0x3C53 = 1.0810546875, mn = 0 -> s = fp16(1.0810546875 / 7) = fp16(0.154436...) =
    // 0.1544189453125; w = 0x3C04 = 1.00390625 -> w/s = 6.501186 -> fp16 6.5 -> round 6.
    std::vector<half_t> w = {{0x3C53}, {0x3C04}, {0x0000}};
    auto const r = qtl::quantize_weights<qtl::uint4b8, qtl::group_channelwise>(qtl::make_view(w.data(), 3, 1));
    CHECK(f(r.w_s.data()[0]) == 0.1544189453125f);
    CHECK(r.w_q.data()[1] == 8 + 6);
    CHECK(f(r.w_ref.data()[1]) == rt<half_t>(6.0f * 0.1544189453125f));
    // A float32 pipeline would have given 7:
    CHECK(qtl::round_half_even(1.00390625f / (1.0810546875f / 7.0f)) == 7.0f);
  }
  SECTION("bf16: w/s = 6.50932 rounds to 6.5 in bf16, then to even 6") {
    // mx = 0x3F8D = 1.1015625 -> s = bf16(1.1015625 / 7) = 0.1572265625; w = 0x3F83 = 1.0234375.
    std::vector<bfloat16_t> w = {{0x3F8D}, {0x3F83}, {0x0000}};
    auto const r = qtl::quantize_weights<qtl::uint4b8, qtl::group_channelwise>(qtl::make_view(w.data(), 3, 1));
    CHECK(f(r.w_s.data()[0]) == 0.1572265625f);
    CHECK(r.w_q.data()[1] == 8 + 6);
    CHECK(qtl::round_half_even(1.0234375f / (1.1015625f / 7.0f)) == 7.0f);
  }
  SECTION("fp16 clamp floor of the zero-point scale is fp16(1e-5) = 1.0013580322265625e-05") {
    std::vector<half_t> w = {{0x3C00}, {0x3C00}};  // a constant group: mx - mn = 0
    auto const r = qtl::quantize_weights<qtl::uint4, qtl::group_channelwise>(qtl::make_view(w.data(), 2, 1),
                                                                               {.zero_points = true});
    CHECK(f(r.w_s.data()[0]) == rt<half_t>(1.0013580322265625e-05f / 15.0f));
  }
}

TEST_CASE("properties on random weights: w_ref within half a step, dequantization, channelwise == K", "[quantize]") {
  index_t const k = 256;
  index_t const n = 48;
  auto check = [&]<class T, qtl::scalar_type Q>(bool zp, bool after) {
    INFO("zero points " << zp << " after " << after);
    auto const w = random_weights<T>(k, n, 11);
    auto const wv = qtl::make_view(w.data(), k, n);
    qtl::quantize_options const opt{zp, after};
    auto const r = qtl::quantize_weights<Q, 64>(wv, opt);
    constexpr auto range = qtl::quant_range_of(Q);
    float const eps = std::is_same_v<T, float> ? 0x1p-23f : (std::is_same_v<T, half_t> ? 0x1p-10f : 0x1p-7f);
    for (index_t i = 0; i < k; ++i) {
      for (index_t j = 0; j < n; ++j) {
        float const x = f(w[static_cast<std::size_t>(i * n + j)]);
        float const s = f(r.w_s.view()(i / 64, j));
        float const ref = f(r.w_ref.view()(i, j));
        std::int32_t const code = r.w_q.view()(i, j);
        float const zpv = zp ? static_cast<float>(r.w_zp.view()(i / 64, j)) : 0.0f;
        REQUIRE(code >= range.qmin + range.bias);
        REQUIRE(code <= range.qmax + range.bias);
        // Dequantizing the stored code with w_s and w_zp gives w_ref exactly (slow path).
        float const q = static_cast<float>(code - range.bias);
        float const deq = after ? rt<T>(rt<T>(q * s) - rt<T>(zpv * s)) : rt<T>((q - zpv) * s);
        REQUIRE(bits(deq) == bits(ref));
        // Within half a step of w, plus the dtype's rounding (zero points: the zp is rounded, so
        // the grid is shifted by up to s/2 more when a bound clamps; stay with the usual bound
        // for symmetric, a full step for zero points).
        float const tol = (zp ? 1.0f : 0.5f) * s * (1 + 8 * eps) + 4 * eps * std::fabs(x) + 4 * eps * s;
        REQUIRE(std::fabs(x - ref) <= tol);
      }
    }
    // Channelwise equals a group size of K, or any size ≥ K.
    auto const cw = qtl::quantize_weights<Q, qtl::group_channelwise>(wv, opt);
    auto const gk = qtl::quantize_weights<Q, 256>(wv, opt);
    auto const g2k = qtl::quantize_weights<Q, 512>(wv, opt);
    CHECK(cw.w_q.storage() == gk.w_q.storage());
    CHECK(cw.w_q.storage() == g2k.w_q.storage());
    CHECK(std::memcmp(cw.w_ref.data(), gk.w_ref.data(), sizeof(T) * static_cast<std::size_t>(k * n)) == 0);
    CHECK(std::memcmp(cw.w_s.data(), g2k.w_s.data(), sizeof(T) * static_cast<std::size_t>(n)) == 0);
    // The run-time group size runs the same numerics.
    auto rt_out = qtl::quantized_weights<T>{qtl::host_tensor<T, 2>({k, n}), qtl::host_tensor<std::int32_t, 2>({k, n}),
                                            qtl::host_tensor<T, 2>({k / 64, n}),
                                            qtl::host_tensor<std::int32_t, 2>({zp ? k / 64 : 0, n})};
    qtl::quantize_weights<Q>(wv, index_t{64}, rt_out.views(), opt);
    CHECK(rt_out.w_q.storage() == r.w_q.storage());
  };
  check.operator()<float, qtl::uint4b8>(false, false);
  check.operator()<half_t, qtl::uint4b8>(false, false);
  check.operator()<bfloat16_t, qtl::uint8b128>(false, false);
  check.operator()<half_t, qtl::int8>(false, false);
  check.operator()<float, qtl::uint4>(true, false);
  check.operator()<float, qtl::uint4>(true, true);
  check.operator()<half_t, qtl::uint8>(true, true);
  check.operator()<bfloat16_t, qtl::uint4>(true, false);
}

TEST_CASE("odd group sizes at run time, strided rows, and the ungrouped form", "[quantize]") {
  index_t const k = 96;
  index_t const n = 20;
  auto const w = random_weights<float>(k, n, 5);
  // A run-time group of 48 equals the compile-time one.
  auto const a = qtl::quantize_weights<qtl::uint4b8, 48>(qtl::make_view(w.data(), k, n));
  auto b = qtl::quantized_weights<float>{qtl::host_tensor<float, 2>({k, n}), qtl::host_tensor<std::int32_t, 2>({k, n}),
                                         qtl::host_tensor<float, 2>({2, n}), qtl::host_tensor<std::int32_t, 2>({0, n})};
  qtl::quantize_weights<qtl::uint4b8>(qtl::make_view(w.data(), k, n), index_t{48}, b.views());
  CHECK(a.w_q.storage() == b.w_q.storage());
  CHECK(a.w_ref.storage() == b.w_ref.storage());
  // Row-strided input: the left 20 columns of a 96 x 33 buffer.
  std::vector<float> wide(static_cast<std::size_t>(k * 33), 123.0f);
  for (index_t i = 0; i < k; ++i) {
    for (index_t j = 0; j < n; ++j) {
      wide[static_cast<std::size_t>(i * 33 + j)] = w[static_cast<std::size_t>(i * n + j)];
    }
  }
  qtl::view2d<float const> strided{wide.data(), {k, n}, {33, 1}};
  auto const c = qtl::quantize_weights<qtl::uint4b8, 48>(strided);
  CHECK(a.w_q.storage() == c.w_q.storage());
  // Ungrouped: w_ref is float32 integer values, codes clamp(round(w)) + bias.
  std::vector<half_t> h = {qtl::from_float<half_t>(2.5f), qtl::from_float<half_t>(-9.0f), qtl::from_float<half_t>(100.0f),
                           qtl::from_float<half_t>(-0.4f)};
  auto const u = qtl::quantize_weights<qtl::uint4b8, qtl::group_none>(qtl::make_view(h.data(), 4, 1));
  STATIC_REQUIRE(std::is_same_v<decltype(u.w_ref), qtl::host_tensor<float, 2>>);
  CHECK(u.w_q.storage() == std::vector<std::int32_t>{10, 0, 15, 8});
  CHECK(u.w_ref.storage() == std::vector<float>{2.0f, -8.0f, 7.0f, 0.0f});
  CHECK(u.w_s.size() == 0);
}

TEST_CASE("defined behaviour: all-zero groups, NaN and Inf", "[quantize]") {
  SECTION("an all-zero symmetric group has s = 0, codes = bias, w_ref = +0") {
    std::vector<float> w = {0.0f, 1.0f, 0.0f, -2.0f, 0.0f, 3.0f, -0.0f, 0.5f};  // column 0 all zero
    auto const r = qtl::quantize_weights<qtl::uint4b8, qtl::group_channelwise>(qtl::make_view(w.data(), 4, 2));
    CHECK(r.w_s.data()[0] == 0.0f);
    for (int i = 0; i < 4; ++i) {
      CHECK(r.w_q.view()(i, 0) == 8);
      CHECK(bits(r.w_ref.view()(i, 0)) == 0u);
    }
    CHECK(r.w_q.view()(2, 1) == 15);  // column 1 unaffected
  }
  SECTION("an all-zero group with zero points: s = fp16(1e-5)/qmax, zp 0, codes 0") {
    std::vector<half_t> w(4, half_t{0});
    auto const r = qtl::quantize_weights<qtl::uint4, qtl::group_channelwise>(qtl::make_view(w.data(), 4, 1),
                                                                               {.zero_points = true});
    CHECK(r.w_zp.data()[0] == 0);
    CHECK(r.w_q.storage() == std::vector<std::int32_t>(4, 0));
    CHECK(f(r.w_ref.data()[0]) == 0.0f);
  }
  SECTION("a NaN makes its group's scale and w_ref NaN and its codes 0 + bias; other groups are untouched") {
    std::vector<float> w = {1.0f, std::numeric_limits<float>::quiet_NaN(), -1.0f, 0.5f, 1.0f, 2.0f, -1.0f, 0.5f};
    auto const r = qtl::quantize_weights<qtl::uint4b8, 2>(qtl::make_view(w.data(), 4, 2));
    CHECK(std::isnan(r.w_s.view()(0, 1)));
    CHECK(r.w_q.view()(0, 1) == 8);
    CHECK(r.w_q.view()(1, 1) == 8);
    CHECK(std::isnan(r.w_ref.view()(0, 1)));
    CHECK(std::isnan(r.w_ref.view()(1, 1)));
    CHECK(!std::isnan(r.w_s.view()(1, 1)));
    CHECK(r.w_q.view()(0, 0) == 15);
  }
  SECTION("Inf gives s = Inf, codes 0 + bias and w_ref NaN (0 * Inf)") {
    std::vector<float> w = {1.0f, std::numeric_limits<float>::infinity(), -3.0f};
    auto const r = qtl::quantize_weights<qtl::uint4b8, qtl::group_channelwise>(qtl::make_view(w.data(), 3, 1));
    CHECK(std::isinf(r.w_s.data()[0]));
    CHECK(r.w_q.storage() == std::vector<std::int32_t>{8, 8, 8});
    CHECK(std::isnan(r.w_ref.data()[0]));
  }
  SECTION("ungrouped values beyond int32 saturate instead of wrapping") {
    std::vector<float> w = {3e9f, -3e9f, std::numeric_limits<float>::quiet_NaN()};
    auto const u = qtl::quantize_weights<qtl::int8, qtl::group_none>(qtl::make_view(w.data(), 3, 1));
    CHECK(u.w_q.storage() == std::vector<std::int32_t>{127, -128, 0});
  }
}

TEST_CASE("errors name the argument and the value", "[quantize]") {
  std::vector<float> w(6 * 4, 1.0f);
  auto const v = qtl::make_view(w.data(), 6, 4);
  CHECK_THROWS_AS((qtl::quantize_weights<qtl::uint4b8, 4>(v)), qtl::shape_error);  // 4 does not divide 6
  CHECK_THROWS_WITH((qtl::quantize_weights<qtl::uint4b8, 4>(v)), Catch::Contains("does not divide K = 6"));
  CHECK_NOTHROW((qtl::quantize_weights<qtl::uint4b8, 8>(v)));  // 8 ≥ K: channelwise
  CHECK_THROWS_AS((qtl::quantize_weights<qtl::int4, 2>(v, {.zero_points = true})), qtl::value_error);
  CHECK_THROWS_AS((qtl::quantize_weights<qtl::uint4b8, 2>(qtl::make_view(w.data(), 0, 4))), qtl::shape_error);
  qtl::host_tensor<float, 2> ref({6, 4});
  qtl::host_tensor<std::int32_t, 2> q({6, 4});
  qtl::host_tensor<float, 2> s_bad({2, 4});
  CHECK_THROWS_WITH((qtl::quantize_weights<qtl::uint4b8, 2>(v, qtl::quantize_outputs<float>{ref.view(), q.view(), s_bad.view(), {}})),
                    Catch::Contains("w_s has shape [2, 4], expected [3, 4]"));
  CHECK_THROWS_AS((qtl::quantize_weights<qtl::uint4b8>(v, index_t{0}, qtl::quantize_outputs<float>{ref.view(), q.view(), s_bad.view(), {}})),
                  qtl::value_error);
  // Zero points without groups.
  CHECK_THROWS_AS((qtl::quantize_weights<qtl::uint4>(v, std::nullopt, qtl::quantize_outputs<float>{ref.view(), q.view(), {}, {}},
                                                     {.zero_points = true})),
                  qtl::value_error);
}

TEST_CASE("gptq_quantize_weights: act-order with a given or seeded permutation, and its errors", "[quantize]") {
  index_t const k = 128;
  index_t const n = 8;
  auto const w = random_weights<half_t>(k, n, 3);
  auto const wv = qtl::make_view(w.data(), k, n);
  qtl::host_tensor<half_t, 2> w_ref({k, n});
  qtl::host_tensor<std::int32_t, 2> w_q({k, n});
  qtl::host_tensor<half_t, 2> w_s({k / 32, n});
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
  std::vector<std::int64_t> perm_out(static_cast<std::size_t>(k));
  qtl::gptq_outputs<half_t> out{w_ref.view(), w_q.view(), w_s.view(), qtl::make_view(g_idx.data(), k),
                                qtl::make_view(perm_out.data(), k)};
  qtl::gptq_options opt;
  opt.act_order = true;
  opt.seed = 42;
  qtl::gptq_quantize_weights<qtl::uint4b8, 32>(wv, out, opt);
  // The plain quantization, permuted, is what act-order returns; g_idx = perm // 32; scales unpermuted.
  auto const plain = qtl::quantize_weights<qtl::uint4b8, 32>(wv);
  std::set<std::int64_t> seen(perm_out.begin(), perm_out.end());
  CHECK(seen.size() == static_cast<std::size_t>(k));
  CHECK(*seen.begin() == 0);
  CHECK(*seen.rbegin() == k - 1);
  for (index_t i = 0; i < k; ++i) {
    index_t const p = perm_out[static_cast<std::size_t>(i)];
    CHECK(g_idx[static_cast<std::size_t>(i)] == p / 32);
    for (index_t j = 0; j < n; ++j) {
      REQUIRE(w_q.view()(i, j) == plain.w_q.view()(p, j));
      REQUIRE(w_ref.view()(i, j).bits == plain.w_ref.view()(p, j).bits);
    }
  }
  CHECK(std::memcmp(w_s.data(), plain.w_s.data(), w_s.storage().size() * 2) == 0);
  // The same seed gives the same permutation; another seed another one.
  std::vector<std::int64_t> again(static_cast<std::size_t>(k));
  std::vector<std::int64_t> other(static_cast<std::size_t>(k));
  qtl::random_permutation(42, qtl::make_view(again.data(), k));
  qtl::random_permutation(43, qtl::make_view(other.data(), k));
  CHECK(again == perm_out);
  CHECK(other != perm_out);
  // Errors: act-order with channelwise groups, bad perms, unsupported run-time group sizes.
  CHECK_THROWS_AS((qtl::gptq_quantize_weights<qtl::uint4b8, -1>(wv, out, opt)), qtl::value_error);
  CHECK_THROWS_AS((qtl::gptq_quantize_weights<qtl::uint4b8>(wv, k, out, opt)), qtl::value_error);
  CHECK_THROWS_AS((qtl::gptq_quantize_weights<qtl::uint4b8>(wv, index_t{16}, out, opt)), qtl::unsupported_error);
  std::vector<std::int64_t> bad(static_cast<std::size_t>(k), 0);
  opt.perm = qtl::make_view(static_cast<std::int64_t const*>(bad.data()), k);
  CHECK_THROWS_WITH((qtl::gptq_quantize_weights<qtl::uint4b8, 32>(wv, out, opt)), Catch::Contains("(repeated)"));
  // Without act-order g_idx and rand_perm are empty.
  qtl::gptq_outputs<half_t> plain_out{w_ref.view(), w_q.view(), w_s.view(), {}, {}};
  CHECK_NOTHROW((qtl::gptq_quantize_weights<qtl::uint4b8, 32>(wv, plain_out)));
  CHECK(w_q.storage() == plain.w_q.storage());
}

TEST_CASE("permute_rows then sort_weights: sorted g_idx, same rows per group, stable ties", "[quantize]") {
  index_t const k = 64;
  index_t const n = 5;
  std::vector<std::int32_t> q_w(static_cast<std::size_t>(k * n));
  std::vector<float> w_ref(q_w.size());
  for (std::size_t i = 0; i < q_w.size(); ++i) {
    q_w[i] = static_cast<std::int32_t>(i);
    w_ref[i] = static_cast<float>(i) * 0.5f;
  }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(k));
  qtl::random_permutation(9, qtl::make_view(perm.data(), k));
  qtl::host_tensor<float, 2> p_ref({k, n});
  qtl::host_tensor<std::int32_t, 2> p_q({k, n});
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
  std::vector<std::int64_t> rp(static_cast<std::size_t>(k));
  qtl::permute_rows(qtl::make_view(q_w.data(), k, n), qtl::make_view(w_ref.data(), k, n), 16, qtl::make_view(perm.data(), k),
                    qtl::permute_rows_outputs<float>{p_ref.view(), p_q.view(), qtl::make_view(g_idx.data(), k),
                                                     qtl::make_view(rp.data(), k)});
  CHECK(rp == perm);
  qtl::host_tensor<std::int32_t, 2> s_q({k, n});
  std::vector<std::int32_t> s_g(static_cast<std::size_t>(k));
  std::vector<std::int32_t> si(static_cast<std::size_t>(k));
  qtl::sort_weights(p_q.view(), qtl::make_view(g_idx.data(), k),
                    qtl::sort_weights_outputs{s_q.view(), qtl::make_view(s_g.data(), k), qtl::make_view(si.data(), k)});
  for (index_t i = 0; i < k; ++i) {
    if (i > 0) {
      REQUIRE(s_g[static_cast<std::size_t>(i - 1)] <= s_g[static_cast<std::size_t>(i)]);
      if (s_g[static_cast<std::size_t>(i - 1)] == s_g[static_cast<std::size_t>(i)]) {
        REQUIRE(si[static_cast<std::size_t>(i - 1)] < si[static_cast<std::size_t>(i)]);  // stable
      }
    }
    // Sorted rows are the permuted rows indexed by sort_indices, and each group holds its rows.
    index_t const src = si[static_cast<std::size_t>(i)];
    for (index_t j = 0; j < n; ++j) {
      REQUIRE(s_q.view()(i, j) == p_q.view()(src, j));
    }
    index_t const orig_row = s_q.view()(i, 0) / n;
    REQUIRE(orig_row / 16 == s_g[static_cast<std::size_t>(i)]);
  }
  // group_size -1 floors to -perm, as the reference.
  qtl::permute_rows(qtl::make_view(q_w.data(), k, n), qtl::make_view(w_ref.data(), k, n), -1, qtl::make_view(perm.data(), k),
                    qtl::permute_rows_outputs<float>{p_ref.view(), p_q.view(), qtl::make_view(g_idx.data(), k),
                                                     qtl::make_view(rp.data(), k)});
  CHECK(g_idx[0] == -static_cast<std::int32_t>(perm[0]));
  CHECK(qtl::detail::qnt::floor_div(7, -2) == -4);
  CHECK(qtl::detail::qnt::floor_div(-7, 2) == -4);
}

TEST_CASE("per_tensor_dequantize, convert_to_channelwise, all_close_1d", "[quantize]") {
  SECTION("per_tensor_dequantize: fp16 product with a scalar scale, float32 with a 1-element one") {
    std::vector<qtl::float8_e4m3fn_t> t = {{0x38}, {0x7E}, {0xB8}, {0x7F}};  // 1, 448, -1, NaN
    qtl::host_tensor<half_t, 2> h({2, 2});
    qtl::per_tensor_dequantize(qtl::make_view(t.data(), 2, 2), 0.1f, h.view());
    CHECK(h.data()[0].bits == qtl::float_to_fp16(0.1f));
    CHECK(f(h.data()[1]) == rt<half_t>(448.0f * 0.1f));
    CHECK(f(h.data()[2]) == -f(h.data()[0]));
    CHECK(std::isnan(f(h.data()[3])));
    qtl::per_tensor_dequantize(qtl::make_view(t.data(), 2, 2), 1000.0f, h.view());
    CHECK(h.data()[1].bits == 0x7C00);  // 448000 overflows fp16 to Inf
    qtl::host_tensor<float, 2> g({2, 2});
    qtl::per_tensor_dequantize(qtl::make_view(t.data(), 2, 2), 1000.0f, g.view());
    CHECK(g.data()[1] == 448000.0f);
    CHECK(g.data()[0] == 1000.0f);
  }
  SECTION("convert_to_channelwise: widths, scalar broadcast, errors") {
    std::vector<float> s = {0.5f, 2.0f, 3.0f, 9.0f};
    std::vector<index_t> widths = {2, 0, 3};
    auto const out = qtl::convert_to_channelwise(qtl::make_view(s.data(), 4), widths);
    CHECK(out.storage() == std::vector<float>{0.5f, 0.5f, 3.0f, 3.0f, 3.0f});
    auto const one = qtl::convert_to_channelwise(0.25f, widths);
    CHECK(one.storage() == std::vector<float>(5, 0.25f));
    CHECK(qtl::convert_to_channelwise(0.25f, std::vector<index_t>{}).size() == 0);
    CHECK_THROWS_AS(qtl::convert_to_channelwise(qtl::make_view(s.data(), 2), widths), qtl::shape_error);
    std::vector<half_t> hs = {qtl::from_float<half_t>(1.5f)};
    CHECK(qtl::convert_to_channelwise(qtl::make_view(hs.data(), 1), std::vector<index_t>{2}).storage() ==
          std::vector<float>{1.5f, 1.5f});
  }
  SECTION("all_close_1d: torch.allclose defaults against the first element") {
    auto ac = [](std::vector<float> v) { return qtl::all_close_1d(qtl::make_view(v.data(), static_cast<index_t>(v.size()))); };
    float const nan = std::numeric_limits<float>::quiet_NaN();
    float const inf = std::numeric_limits<float>::infinity();
    CHECK(ac({}));
    CHECK(!ac({nan}));
    CHECK(ac({inf, inf}));
    CHECK(!ac({inf, -inf}));
    CHECK(ac({1.0f, 1.0f + 5e-6f, 1.0f - 9e-6f}));
    CHECK(!ac({1.0f, 1.00002f}));
    CHECK(ac({0.0f, 1e-9f}));
    CHECK(!ac({0.0f, 1e-7f}));
    // The tolerance scales with the other element: |a - b| <= 1e-8 + 1e-5 |b|.
    CHECK(qtl::torch_isclose(1000.0f, 1000.005f));
    CHECK(!qtl::torch_isclose(1000.0f, 1000.02f));
    CHECK(ac({1.0f, 1.0f, nan}) == false);
  }
}
