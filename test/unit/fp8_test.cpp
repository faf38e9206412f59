// qtl/fp8.hpp: the golden scaled-fp8-quant cases, the hand-worked examples of docs/spec/semantics.md §8,
// properties of every variant, requantize_with_max_scale and fp8_all_close.
#include <qtl/fp8.hpp>

#include <catch2/catch.hpp>
#include <golden.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl_test::cview;

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::float8_e5m2_t;
using qtl::half_t;
using qtl::index_t;

std::vector<std::uint8_t> codes_of(qtl::host_tensor<float8_e4m3fn_t, 2> const& t) {
  std::vector<std::uint8_t> c;
  for (auto const& q : t.storage()) {
    c.push_back(q.bits);
  }
  return c;
}

template <class A>
std::vector<std::uint32_t> bits_of(std::vector<float, A> const& v) {
  std::vector<std::uint32_t> b;
  for (float f : v) {
    b.push_back(qtl::float_to_bits(f));
  }
  return b;
}

template <class T>
qtl::fp8_quant_result<float8_e4m3fn_t> run_golden(qtl::test::golden_case const& c, index_t m, index_t n) {
  auto const x = qtl::test::tensor_values<T>(c.in, "input");
  REQUIRE(static_cast<index_t>(x.size()) == m * n);
  if (c.params.contains("scale")) {
    float const s = c.params.at("scale").get<float>();
    return qtl::scaled_fp8_quant(cview(x, m, n), &s);
  }
  bool const per_token = c.params.value("per-token", false);
  return qtl::scaled_fp8_quant(cview(x, m, n), nullptr, 0, per_token);
}

// A seeded random matrix of T with magnitudes spread over several binades (and exact zeros).
template <class T>
std::vector<T> random_matrix(index_t rows, index_t cols, std::uint32_t seed, float spread = 8.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-spread, spread);
  std::vector<T> v(static_cast<std::size_t>(rows * cols));
  for (auto& e : v) {
    float const x = normal(gen) * std::exp2(expo(gen));
    e = qtl::from_float<T>(gen() % 97 == 0 ? 0.0f : x);
  }
  return v;
}

// The fp8 code nearest to y (ties to even), by exhaustive search over the finite codes: an oracle
// independent of the encoders.
template <class Fp8>
std::uint8_t nearest_code(float y) {
  double const max = qtl::fp8_format<Fp8>::max;
  double const t = std::fmax(-max, std::fmin(max, static_cast<double>(y)));
  int best = -1;
  double best_d = 0;
  for (int c = 0; c < 256; ++c) {
    float const v = qtl::to_float(Fp8{static_cast<std::uint8_t>(c)});
    if (std::isnan(v) || std::isinf(v) || (v == 0.0f && std::signbit(v) != std::signbit(t))) {
      continue;
    }
    double const d = std::fabs(static_cast<double>(v) - t);
    if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>(best);
}

}  // namespace

TEST_CASE("scaled_fp8_quant reproduces every golden scaled-fp8-quant case", "[fp8][golden]") {
  for (auto const& c : qtl::test::golden_cases("scaled-fp8-quant")) {
    INFO(c.name << " " << c.params.dump());
    auto const& in = c.in.at("input");
    index_t const m = in.shape[0];
    index_t const n = in.shape[1];
    qtl::fp8_quant_result<float8_e4m3fn_t> r;
    switch (in.type) {
      case qtl::io::dtype::F32: r = run_golden<float>(c, m, n); break;
      case qtl::io::dtype::F16: r = run_golden<half_t>(c, m, n); break;
      case qtl::io::dtype::BF16: r = run_golden<bfloat16_t>(c, m, n); break;
      default: FAIL("unexpected input dtype");
    }
    auto const want_q = qtl::test::tensor_values<std::uint8_t>(c.expected, "output", qtl::io::dtype::F8_E4M3);
    auto const want_s = qtl::test::tensor_values<float>(c.expected, "scale");
    CHECK(c.expected.at("output").shape == std::vector<std::int64_t>{m, n});
    CHECK(codes_of(r.output) == want_q);
    bool const per_token = c.params.value("per-token", false);
    CHECK(c.expected.at("scale").shape == (per_token ? std::vector<std::int64_t>{m, 1} : std::vector<std::int64_t>{1}));
    CHECK(r.scale.extent(0) == (per_token ? m : 1));
    CHECK(bits_of(r.scale.storage()) == bits_of(want_s));
  }
}

TEST_CASE("dynamic per-tensor quantization of docs/spec/semantics.md §8.2", "[fp8]") {
  std::vector<float> const x = {0.1f, -3.5f, 7.0f};
  qtl::host_tensor<float8_e4m3fn_t, 2> q({1, 3});
  float const s = qtl::scaled_fp8_quant_dynamic(cview(x, 1, 3), q.view());
  CHECK(s == 0.015625f);
  CHECK(codes_of(q) == std::vector<std::uint8_t>{0x4D, 0xF6, 0x7E});
  CHECK(qtl::to_float(q.data()[0]) * s == 0.1015625f);
  // static with the same scale gives the same codes
  qtl::host_tensor<float8_e4m3fn_t, 2> q2({1, 3});
  qtl::scaled_fp8_quant_static(cview(x, 1, 3), s, q2.view());
  CHECK(codes_of(q2) == codes_of(q));
}

TEST_CASE("zero scales follow the documented policy of each variant", "[fp8]") {
  std::vector<bfloat16_t> const zeros(8, bfloat16_t{0});
  qtl::host_tensor<float8_e4m3fn_t, 2> q({2, 4});
  SECTION("dynamic per-tensor, all zero: scale 0 and +448 codes, as sglang's kernel") {
    CHECK(qtl::scaled_fp8_quant_dynamic(cview(zeros, 2, 4), q.view()) == 0.0f);
    CHECK(codes_of(q) == std::vector<std::uint8_t>(8, 0x7E));
  }
  SECTION("the guard option quantizes to zero") {
    qtl::fp8_tensor_options o;
    o.zero_scale = qtl::fp8_zero_scale::guard;
    qtl::scaled_fp8_quant_dynamic(cview(zeros, 2, 4), q.view(), o);
    CHECK(codes_of(q) == std::vector<std::uint8_t>(8, 0x00));
  }
  SECTION("static scale 0: nonzero elements saturate with their sign") {
    std::vector<float> const x = {1.0f, -2.0f, 0.0f, -0.0f};
    qtl::host_tensor<float8_e4m3fn_t, 2> q1({1, 4});
    qtl::scaled_fp8_quant_static(cview(x, 1, 4), 0.0f, q1.view());
    CHECK(codes_of(q1) == std::vector<std::uint8_t>{0x7E, 0xFE, 0x7E, 0x7E});
  }
  SECTION("per-token, zero row: scale 0 and zero codes (sglang's guarded kernels)") {
    std::vector<float> x = {0, 0, 0, 0, 1, 2, 3, 4};
    std::vector<float> s(2);
    qtl::scaled_fp8_quant_per_token(cview(x, 2, 4), q.view(), qtl::make_view(s.data(), 2));
    CHECK(s[0] == 0.0f);
    CHECK(s[1] == 4.0f / 448.0f);
    auto const c = codes_of(q);
    CHECK(std::vector<std::uint8_t>(c.begin(), c.begin() + 4) == std::vector<std::uint8_t>(4, 0));
  }
}

TEST_CASE("NaN inputs: +448 like the CUDA kernels, or the positive NaN code when propagated", "[fp8]") {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> const x = {nan, -nan, 1.0f, 2.0f};
  qtl::host_tensor<float8_e4m3fn_t, 2> q({1, 4});
  float const s = qtl::scaled_fp8_quant_dynamic(cview(x, 1, 4), q.view());
  CHECK(s == 2.0f / 448.0f);  // amax ignores NaN
  CHECK(codes_of(q)[0] == 0x7E);
  CHECK(codes_of(q)[1] == 0x7E);
  qtl::fp8_tensor_options o;
  o.nan = qtl::fp8_nan::propagate;
  qtl::scaled_fp8_quant_static(cview(x, 1, 4), s, q.view(), o);
  CHECK(codes_of(q)[0] == 0x7F);
  CHECK(codes_of(q)[1] == 0x7F);  // -NaN too: the device makes every NaN +NaN
  CHECK(codes_of(q)[3] == 0x7E);
  // Inf makes the dynamic scale Inf, so Inf * (1/Inf) = Inf * 0 is NaN
  // (x86: -NaN), and [1, NaN, -NaN, 2, -3, Inf] gives 00 7f 7f 00 80 7f on host and device
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const y = {1.0f, nan, -nan, 2.0f, -3.0f, inf};
  qtl::host_tensor<float8_e4m3fn_t, 2> r({1, 6});
  qtl::scaled_fp8_quant_dynamic(cview(y, 1, 6), r.view(), o);
  CHECK(codes_of(r) == std::vector<std::uint8_t>{0x00, 0x7F, 0x7F, 0x00, 0x80, 0x7F});
}

TEST_CASE("every variant picks the nearest fp8 code of x * (1/scale): error within half a code", "[fp8]") {
  index_t const m = 37;
  index_t const n = 256;
  auto const x = random_matrix<bfloat16_t>(m, n, 7);
  auto check_row = [&](qtl::host_tensor<float8_e4m3fn_t, 2> const& q, index_t i, float inv) {
    for (index_t j = 0; j < n; ++j) {
      float const y = qtl::to_float(x[static_cast<std::size_t>(i * n + j)]) * inv;
      REQUIRE(q.data()[i * n + j].bits == nearest_code<float8_e4m3fn_t>(y));
    }
  };
  SECTION("dynamic per tensor") {
    qtl::host_tensor<float8_e4m3fn_t, 2> q({m, n});
    float const s = qtl::scaled_fp8_quant_dynamic(cview(x, m, n), q.view());
    CHECK(s == qtl::fp8_amax(cview(x, m, n)) / 448.0f);
    for (index_t i = 0; i < m; ++i) {
      check_row(q, i, 1.0f / s);
    }
  }
  SECTION("per token") {
    qtl::host_tensor<float8_e4m3fn_t, 2> q({m, n});
    std::vector<float> s(m);
    qtl::scaled_fp8_quant_per_token(cview(x, m, n), q.view(), qtl::make_view(s.data(), m));
    for (index_t i = 0; i < m; ++i) {
      float amax = 0;
      for (index_t j = 0; j < n; ++j) {
        amax = std::fmax(amax, std::fabs(qtl::to_float(x[static_cast<std::size_t>(i * n + j)])));
      }
      REQUIRE(s[static_cast<std::size_t>(i)] == amax / 448.0f);
      check_row(q, i, 1.0f / s[static_cast<std::size_t>(i)]);
    }
  }
}

TEST_CASE("vLLM's per-token recipe: upper bound, floor and division", "[fp8]") {
  std::vector<float> const x = {0, 0, 0, 0, 1, -3, 5, 100};
  qtl::host_tensor<float8_e4m3fn_t, 2> q({2, 4});
  std::vector<float> s(2);
  qtl::scaled_fp8_quant_per_token(cview(x, 2, 4), q.view(), qtl::make_view(s.data(), 2),
                                  qtl::vllm_per_token_options<float8_e4m3fn_t>(10.0f));
  CHECK(s[0] == 1.0f / (448.0f * 512.0f));
  CHECK(s[1] == 10.0f / 448.0f);  // amax 100 bounded by 10
  auto const c = codes_of(q);
  CHECK(c[0] == 0x00);
  CHECK(c[4] == nearest_code<float8_e4m3fn_t>(1.0f / s[1]));
  CHECK(c[5] == nearest_code<float8_e4m3fn_t>(-3.0f / s[1]));
  CHECK(c[7] == 0x7E);  // 100 / s > 448: saturates
}

TEST_CASE("padded rows are zero, their scales too, and the real rows are unchanged", "[fp8]") {
  index_t const m = 5;
  index_t const n = 16;
  auto const x = random_matrix<half_t>(m, n, 11);
  auto const plain = qtl::scaled_fp8_quant(cview(x, m, n), nullptr, 0, true);
  auto const padded = qtl::scaled_fp8_quant(cview(x, m, n), nullptr, 10, true);
  REQUIRE(padded.output.extent(0) == 10);
  REQUIRE(padded.scale.extent(0) == 10);
  auto const a = codes_of(plain.output);
  auto const b = codes_of(padded.output);
  CHECK(std::vector<std::uint8_t>(b.begin(), b.begin() + m * n) == a);
  CHECK(std::vector<std::uint8_t>(b.begin() + m * n, b.end()) == std::vector<std::uint8_t>(5 * n, 0));
  for (index_t i = 0; i < 10; ++i) {
    CHECK(padded.scale.data()[i] == (i < m ? plain.scale.data()[i] : 0.0f));
  }
  // static and dynamic per tensor pad the same way
  float const s = 0.5f;
  auto const st = qtl::scaled_fp8_quant(cview(x, m, n), &s, 8);
  auto const sc = codes_of(st.output);
  CHECK(std::vector<std::uint8_t>(sc.begin() + m * n, sc.end()) == std::vector<std::uint8_t>(3 * n, 0));
  CHECK(st.scale.data()[0] == 0.5f);
}

TEST_CASE("e5m2 is a template choice", "[fp8]") {
  std::vector<float> const x = {1.0f, -57344.0f * 2, 0.5f, 3.0f};
  qtl::host_tensor<float8_e5m2_t, 2> q({1, 4});
  float const s = qtl::scaled_fp8_quant_dynamic<float8_e5m2_t>(cview(x, 1, 4), q.view());
  CHECK(s == 2.0f);
  CHECK(q.data()[0].bits == qtl::float_to_e5m2(0.5f));
  CHECK(q.data()[1].bits == 0xFB);  // -57344
  CHECK(q.data()[3].bits == qtl::float_to_e5m2(1.5f));
}

TEST_CASE("per_token_group_quant_fp8 follows the torch reference and the documented layouts", "[fp8]") {
  constexpr int g = 32;
  index_t const m = 6;
  index_t const n = 128;
  index_t const groups = n / g;
  auto const x = random_matrix<float>(m, n, 3, 12.0f);
  auto const pow2 = GENERATE(false, true);
  auto const layout = GENERATE(qtl::group_scale_layout::row_major, qtl::group_scale_layout::column_major);
  auto const align = GENERATE(index_t{1}, index_t{4});
  INFO("pow2 " << pow2 << " column-major " << (layout == qtl::group_scale_layout::column_major) << " align "
               << align);
  qtl::fp8_group_options o;
  o.power_of_two_scale = pow2;
  o.layout = layout;
  o.row_align = align;
  index_t const rows = m + 1;  // one padding row
  qtl::host_tensor<float8_e4m3fn_t, 2> q({rows, n});
  std::vector<float> s(static_cast<std::size_t>(qtl::group_scale_storage_size(layout, rows, groups, align)), -1.0f);
  qtl::per_token_group_quant_fp8<g>(cview(x, m, n), q.view(), s, o);
  index_t const mp = (rows + align - 1) / align * align;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t k = 0; k < groups; ++k) {
      // the documented offsets, spelled out
      index_t const off = layout == qtl::group_scale_layout::row_major ? i * groups + k : k * mp + i;
      float const got = s[static_cast<std::size_t>(off)];
      if (i >= m) {
        CHECK(got == 0.0f);
        continue;
      }
      float amax = 1e-10f;
      for (index_t j = k * g; j < (k + 1) * g; ++j) {
        amax = std::fmax(amax, std::fabs(x[static_cast<std::size_t>(i * n + j)]));
      }
      float want = amax / 448.0f;
      if (pow2) {
        want = std::exp2(std::ceil(std::log2(static_cast<double>(want))));
        int e = 0;
        REQUIRE(std::frexp(got, &e) == 0.5f);  // a power of two
        CHECK(got >= amax / 448.0f);
        CHECK(got / 2 < amax / 448.0f);
      } else {
        CHECK(got == want);
      }
      for (index_t j = k * g; j < (k + 1) * g; ++j) {
        float const y = x[static_cast<std::size_t>(i * n + j)] / got;  // the torch reference divides
        REQUIRE(q.data()[i * n + j].bits == nearest_code<float8_e4m3fn_t>(y));
      }
    }
  }
  for (index_t j = 0; j < n; ++j) {
    CHECK(q.data()[m * n + j].bits == 0);
  }
}

TEST_CASE("fp8 quantization rejects bad shapes before writing", "[fp8]") {
  std::vector<float> const x(12, 1.0f);
  qtl::host_tensor<float8_e4m3fn_t, 2> q({3, 3});
  CHECK_THROWS_AS(qtl::scaled_fp8_quant_static(cview(x, 3, 4), 1.0f, q.view()), qtl::shape_error);
  qtl::host_tensor<float8_e4m3fn_t, 2> small({2, 4});
  CHECK_THROWS_AS(qtl::scaled_fp8_quant_dynamic(cview(x, 3, 4), small.view()), qtl::shape_error);
  qtl::host_tensor<float8_e4m3fn_t, 2> q34({3, 4});
  std::vector<float> s(2);
  CHECK_THROWS_AS(qtl::scaled_fp8_quant_per_token(cview(x, 3, 4), q34.view(), qtl::make_view(s.data(), 2)),
                  qtl::shape_error);
  std::vector<float> gs(3);
  CHECK_THROWS_AS(qtl::per_token_group_quant_fp8<3>(cview(x, 3, 4), q34.view(), gs), qtl::shape_error);
  CHECK_THROWS_AS(qtl::per_token_group_quant_fp8<2>(cview(x, 3, 4), q34.view(), gs), qtl::shape_error);
  float const one = 1.0f;
  CHECK_THROWS_AS(qtl::scaled_fp8_quant(cview(x, 3, 4), &one, 0, true), qtl::value_error);
  auto strided = cview(x, 3, 2);
  strided.stride[1] = 2;
  qtl::host_tensor<float8_e4m3fn_t, 2> q32({3, 2});
  CHECK_THROWS_AS(qtl::scaled_fp8_quant_static(strided, 1.0f, q32.view()), qtl::shape_error);
}

TEST_CASE("per_tensor_dequantize rounds the float32 product once to fp16, or keeps float32", "[fp8]") {
  std::vector<float8_e4m3fn_t> const q = {{0x38}, {0x7E}, {0xB9}, {0x01}};  // 1, 448, -1.125, 2^-9
  qtl::host_tensor<half_t, 2> h({2, 2});
  qtl::per_tensor_dequantize(cview(q, 2, 2), 1000.0f, h.view());
  CHECK(qtl::to_float(h.data()[0]) == 1000.0f);
  CHECK(std::isinf(qtl::to_float(h.data()[1])));  // 448000 > 65504
  CHECK(qtl::to_float(h.data()[2]) == qtl::to_float(qtl::from_float<half_t>(-1125.0f)));
  qtl::host_tensor<float, 2> f({2, 2});
  qtl::per_tensor_dequantize<float>(cview(q, 2, 2), 0.1f, f.view());
  CHECK(f.data()[1] == 448.0f * 0.1f);
  CHECK(f.data()[3] == 0x1p-9f * 0.1f);
}

TEST_CASE("requantize_with_max_scale requantizes each shard to the largest scale", "[fp8][requantize]") {
  index_t const k = 8;
  std::vector<index_t> const widths = {2, 0, 3};
  std::vector<float> const scales = {0.5f, 3.0f, 0.0173f};
  index_t const rows = 6;  // one row past the shards stays
  std::vector<float8_e4m3fn_t> w(static_cast<std::size_t>(rows * k));
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i].bits = static_cast<std::uint8_t>((i * 37 + 5) % 256);
    if ((w[i].bits & 0x7F) == 0x7F) {
      w[i].bits = 0x10;  // no NaN in a checkpoint
    }
  }
  auto const before = w;
  float const mx = qtl::requantize_with_max_scale(qtl::make_view(w.data(), rows, k), {scales, false}, widths);
  CHECK(mx == 3.0f);
  // shard 0 rows 0-1 with 0.5, shard 1 empty, shard 2 rows 2-4 with 0.0173; row 5 untouched
  for (index_t i = 0; i < rows; ++i) {
    float const s = i < 2 ? 0.5f : 0.0173f;
    for (index_t j = 0; j < k; ++j) {
      auto const idx = static_cast<std::size_t>(i * k + j);
      if (i == 5) {
        CHECK(w[idx].bits == before[idx].bits);
        continue;
      }
      float const dq = qtl::to_float(qtl::from_float<half_t>(qtl::to_float(before[idx]) * s));  // fp16, lossy
      CHECK(w[idx].bits == nearest_code<float8_e4m3fn_t>(dq * (1.0f / 3.0f)));
    }
  }
}

TEST_CASE("requantize_with_max_scale leaves fused checkpoints and 0-dim scales alone", "[fp8][requantize]") {
  std::vector<float8_e4m3fn_t> w(4, float8_e4m3fn_t{0x40});
  std::vector<index_t> const widths = {1, 1};
  float const lowest = std::numeric_limits<float>::lowest();
  SECTION("default-initialised last scale (float32 min): one scale was loaded for the fused module") {
    std::vector<float> const s = {0.25f, lowest};
    CHECK(qtl::requantize_with_max_scale(qtl::make_view(w.data(), 2, 2), {s, false}, widths) == 0.25f);
    CHECK(w[0].bits == 0x40);
  }
  SECTION("a 0-dim scale is one fused scale (the reference raises IndexError)") {
    std::vector<float> const s = {0.75f};
    CHECK(qtl::requantize_with_max_scale(qtl::make_view(w.data(), 2, 2), {s, true}, widths) == 0.75f);
    CHECK(w[3].bits == 0x40);
  }
  SECTION("a shard whose scale is the maximum round-trips") {
    std::vector<float> const s = {2.0f, 2.0f};
    CHECK(qtl::requantize_with_max_scale(qtl::make_view(w.data(), 2, 2), {s, false}, widths) == 2.0f);
    CHECK(w[0].bits == 0x40);
  }
  SECTION("errors") {
    std::vector<float> const s = {1.0f, 2.0f};
    std::vector<index_t> const three = {1, 1, 1};
    std::vector<index_t> const too_many_rows = {2, 1};
    std::vector<index_t> const negative = {-1, 1};
    std::vector<float> const nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    auto const v = qtl::make_view(w.data(), 2, 2);
    CHECK_THROWS_AS(qtl::requantize_with_max_scale(v, {s, false}, three), qtl::shape_error);
    CHECK_THROWS_AS(qtl::requantize_with_max_scale(v, {s, false}, too_many_rows), qtl::shape_error);
    CHECK_THROWS_AS(qtl::requantize_with_max_scale(v, {s, false}, negative), qtl::shape_error);
    CHECK_THROWS_AS(qtl::requantize_with_max_scale(v, {nan, false}, widths), qtl::value_error);
    CHECK_THROWS_AS(qtl::requantize_with_max_scale(v, {{}, false}, widths), qtl::shape_error);
    CHECK(w[0].bits == 0x40);
  }
}

TEST_CASE("fp8_all_close counts planted one- and two-code differences against the thresholds", "[fp8][compare]") {
  index_t const n = 1000;
  std::vector<float8_e4m3fn_t> a(n);
  for (index_t i = 0; i < n; ++i) {
    a[static_cast<std::size_t>(i)].bits = static_cast<std::uint8_t>(0x10 + i % 0x60);
  }
  auto b = a;
  auto report = [&] { return qtl::fp8_all_close(cview(a, 10, 100), cview(b, 10, 100)); };
  CHECK(report().passed);
  CHECK(report().differ == 0);
  for (int i = 0; i < 4; ++i) {  // 0.4 %: tolerated
    b[static_cast<std::size_t>(100 * i)].bits += 1;
  }
  CHECK(report().differ == 4);
  CHECK(report().differ_large == 0);
  CHECK(report().passed);
  b[999].bits -= 1;  // 0.5 %: not below 0.005
  CHECK(report().differ == 5);
  CHECK_FALSE(report().passed);
  b = a;
  b[3].bits += 2;  // one two-code difference fails
  CHECK(report().differ == 1);
  CHECK(report().differ_large == 1);
  CHECK_FALSE(report().passed);
  b = a;
  b[7].bits ^= 0x80;  // a real sign flip
  CHECK(report().sign_flips == 1);
  CHECK_FALSE(report().passed);
  CHECK(report().describe() == "count_diff_sign=1 count_tiny_diff=1 count_large_diff=1 numel=1000");
}

TEST_CASE("fp8_all_close: byte distance semantics, empty inputs and shape errors", "[fp8][compare]") {
  std::vector<float8_e4m3fn_t> const a = {{0x7E}, {0x00}};
  std::vector<float8_e4m3fn_t> const b = {{0x7F}, {0x80}};  // 448 vs NaN: one apart; +0 vs -0: 128 apart
  auto const r = qtl::fp8_all_close(cview(a, 1, 2), cview(b, 1, 2));
  CHECK(r.differ == 2);
  CHECK(r.differ_large == 1);
  CHECK(r.sign_flips == 0);
  CHECK(qtl::fp8_all_close(cview(a, 0, 2), cview(b, 0, 2)).passed);
  CHECK_THROWS_AS(qtl::fp8_all_close(cview(a, 1, 2), cview(b, 2, 1)), qtl::shape_error);
}

TEMPLATE_TEST_CASE("per-tensor quantization of large fp16/bf16 tensors (table path) equals the element function",
                   "[fp8]", bfloat16_t, half_t) {
  index_t const m = 1024;
  index_t const n = 1025;  // >= 2^20 elements: the 16-bit table path
  auto x = random_matrix<TestType>(m, n, 17, 20.0f);
  x[5] = qtl::from_float<TestType>(-std::numeric_limits<float>::quiet_NaN());
  x[6] = qtl::from_float<TestType>(std::numeric_limits<float>::infinity());
  auto const nan = GENERATE(qtl::fp8_nan::to_max, qtl::fp8_nan::propagate);
  qtl::fp8_tensor_options o;
  o.nan = nan;
  qtl::host_tensor<float8_e4m3fn_t, 2> q({m + 2, n});
  float const s = qtl::scaled_fp8_quant_dynamic(cview(x, m, n), q.view(), o);
  CHECK(s == qtl::fp8_amax(cview(x, m, n)) / 448.0f);
  float const inv = 1.0f / s;
  for (index_t i = 0; i < m * n; ++i) {
    float const xi = qtl::to_float(x[static_cast<std::size_t>(i)]);
    std::uint8_t const want = nan == qtl::fp8_nan::to_max
                                  ? qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::to_max>(xi, s, inv)
                                  : qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::propagate>(xi, s, inv);
    REQUIRE(q.data()[i].bits == want);
  }
  // a NaN of either sign: +max, or the positive NaN code
  CHECK(q.data()[5].bits == (nan == qtl::fp8_nan::to_max ? 0x7Eu : 0x7Fu));
  for (index_t i = m * n; i < (m + 2) * n; ++i) {
    REQUIRE(q.data()[i].bits == 0);
  }
}

TEST_CASE("row quantization (SIMD where available) equals the element function on every bf16 code",
          "[fp8]") {
  std::vector<bfloat16_t> x(65536);
  for (std::size_t c = 0; c < x.size(); ++c) {
    x[c].bits = static_cast<std::uint16_t>(c);
  }
  std::vector<std::uint32_t> fbits(1 << 16);
  std::mt19937 gen(99);
  for (auto& b : fbits) {
    b = static_cast<std::uint32_t>(gen());
  }
  std::vector<float> xf(fbits.size());
  for (std::size_t i = 0; i < xf.size(); ++i) {
    xf[i] = qtl::bits_to_float(fbits[i]);
  }
  for (float s : {1.0f, 0.0078125f, 3.1f, 1e-30f, 1e30f}) {
    INFO("scale " << s);
    for (auto nan : {qtl::fp8_nan::to_max, qtl::fp8_nan::propagate}) {
      qtl::fp8_tensor_options o;
      o.nan = nan;
      qtl::host_tensor<float8_e4m3fn_t, 2> q({256, 256});
      qtl::scaled_fp8_quant_static(cview(x, 256, 256), s, q.view(), o);  // 2^16 elements: the row loops
      qtl::host_tensor<float8_e5m2_t, 2> q5({256, 256});
      qtl::scaled_fp8_quant_static<float8_e5m2_t>(cview(xf, 256, 256), s, q5.view(), o);
      float const inv = 1.0f / s;
      for (std::size_t c = 0; c < x.size(); ++c) {
        float const v = qtl::to_float(x[c]);
        float const f = xf[c];
        if (nan == qtl::fp8_nan::to_max) {
          REQUIRE(q.data()[c].bits == qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::to_max>(v, s, inv));
          REQUIRE(q5.data()[c].bits == qtl::fp8_quantize_element<float8_e5m2_t, qtl::fp8_nan::to_max>(f, s, inv));
        } else {
          REQUIRE(q.data()[c].bits == qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::propagate>(v, s, inv));
          REQUIRE(q5.data()[c].bits == qtl::fp8_quantize_element<float8_e5m2_t, qtl::fp8_nan::propagate>(f, s, inv));
        }
      }
    }
    // the divide recipe of the group quantizer, and the amax reduction
    std::vector<float> gs(256);
    qtl::host_tensor<float8_e4m3fn_t, 2> q({256, 256});
    qtl::per_token_group_quant_fp8<256>(cview(x, 256, 256), q.view(), gs);
    for (index_t i = 0; i < 256; ++i) {
      float amax = 0.0f;
      for (index_t j = 0; j < 256; ++j) {
        float const v = qtl::to_float(x[static_cast<std::size_t>(i * 256 + j)]);
        amax = std::isnan(v) ? amax : std::fmax(amax, std::fabs(v));
      }
      float const g = gs[static_cast<std::size_t>(i)];
      REQUIRE(g == std::fmax(amax, 1e-10f) / 448.0f);
      for (index_t j = 0; j < 256; ++j) {
        float const v = qtl::to_float(x[static_cast<std::size_t>(i * 256 + j)]);
        REQUIRE(q.data()[i * 256 + j].bits ==
                qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::to_max, qtl::fp8_scale_op::divide>(v, g, 0.0f));
      }
    }
  }
}

// Both host row executors, called directly: the portable loops (SSE2 where the target has it) and,
// on a CPU with AVX2, the run-time dispatched AVX2 loop, against the element function.
template <class Fp8, qtl::fp8_nan Nan, qtl::fp8_scale_op Op, class T>
void check_row_executors(std::vector<T> const& x, float s) {
  float const inv = 1.0f / s;
  auto const n = static_cast<index_t>(x.size());
  std::vector<Fp8> portable(x.size());
  qtl::detail::quantize_row<Fp8, Nan, Op>(x.data(), portable.data(), n, s, inv);
  std::vector<Fp8> dispatched(x.size());
  qtl::detail::quantize_row_dispatch<Fp8, Nan, Op>(x.data(), dispatched.data(), n, s, inv);
#if QTL_X86
  if (qtl::detail::x86::fp8_has_avx2()) {
    std::vector<Fp8> avx2(x.size());
    index_t const done = qtl::detail::x86::quantize_row_avx2<Fp8, Nan, Op>(x.data(), avx2.data(), n, s, inv);
    REQUIRE(done == n - n % 16);  // whole 16-element steps; the dispatcher leaves the tail to the portable loop
    for (std::size_t c = 0; c < static_cast<std::size_t>(done); ++c) {
      REQUIRE(avx2[c].bits == qtl::fp8_quantize_element<Fp8, Nan, Op>(qtl::to_float(x[c]), s, inv));
    }
  }
#endif  // ^^^ QTL_X86 ^^^
  for (std::size_t c = 0; c < x.size(); ++c) {
    std::uint8_t const want = qtl::fp8_quantize_element<Fp8, Nan, Op>(qtl::to_float(x[c]), s, inv);
    REQUIRE(portable[c].bits == want);
    REQUIRE(dispatched[c].bits == want);
  }
}

template <class Fp8, class T>
void check_row_executors_all_policies(std::vector<T> const& x) {
  for (float s : {1.0f, 0.0078125f, 3.1f, 1e-30f, 1e30f, 0.0f}) {
    INFO("scale " << s);
    check_row_executors<Fp8, qtl::fp8_nan::to_max, qtl::fp8_scale_op::multiply_reciprocal>(x, s);
    check_row_executors<Fp8, qtl::fp8_nan::propagate, qtl::fp8_scale_op::multiply_reciprocal>(x, s);
    check_row_executors<Fp8, qtl::fp8_nan::to_max, qtl::fp8_scale_op::divide>(x, s);
    check_row_executors<Fp8, qtl::fp8_nan::propagate, qtl::fp8_scale_op::divide>(x, s);
  }
}

TEST_CASE("row executors (portable, AVX2 where the CPU has it) equal the element function", "[fp8]") {
  std::vector<bfloat16_t> x(65536 + 13);  // every bf16 code, and a tail past the 16-element steps
  for (std::size_t c = 0; c < x.size(); ++c) {
    x[c].bits = static_cast<std::uint16_t>(c * 40503u);
  }
  std::vector<float> xf(65536 + 13);
  std::mt19937 gen(7);
  for (auto& f : xf) {
    f = qtl::bits_to_float(static_cast<std::uint32_t>(gen()));
  }
  check_row_executors_all_policies<float8_e4m3fn_t>(x);
  check_row_executors_all_policies<float8_e5m2_t>(x);
  check_row_executors_all_policies<float8_e4m3fn_t>(xf);
  check_row_executors_all_policies<float8_e5m2_t>(xf);
}
