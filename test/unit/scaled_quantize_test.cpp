// <qtl/scaled_quantize.hpp>: vLLM's scaled_quantize, scaled_dequantize and group_broadcast against
// the golden cases recorded from vLLM's own functions (every group shape, bf16 and f32 inputs,
// compute_dtype, e4m3fnuz with the ROCm max), the two roundings of `fp8_max / amax`, the fp16
// group of zeros, the -1 group shapes vLLM's scaled_dequantize cannot take, strided views, and the
// shape errors.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>
#include <test_data.hpp>

#include <qtl/scaled_quantize.hpp>

namespace {

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::float8_e4m3fnuz_t;
using qtl::group_shape;
using qtl::half_t;
using qtl::index_t;
using qtl::make_view;
namespace io = qtl::io;

std::vector<std::uint8_t> raw(io::tensor_info const& t) {
  return qtl_test::raw(reinterpret_cast<std::uint8_t const*>(t.bytes.data()), t.bytes.size());
}

group_shape case_group(qtl::test::golden_case const& c) {
  return {c.params.value("group-rows", index_t{-1}), c.params.value("group-cols", index_t{-1})};
}

// scaled_quantize of golden case `c` with input type T, compute type C and codes Q: codes and
// scales as bytes.
template <class Q, class C, class T>
void check_quantize_case(qtl::test::golden_case const& c) {
  auto const x = qtl::test::tensor_values<T>(c.in, "x");
  index_t const m = c.shape[0];
  index_t const n = c.shape[1];
  auto const r = qtl::scaled_quantize<Q, C>(make_view(x.data(), m, n), case_group(c),
                                            qtl::get_fp8_min_max(c.params.value("is-fp8-fnuz", false)).max);
  CHECK(qtl_test::raw(r.q.data(), static_cast<std::size_t>(m * n)) == raw(c.expected.at("x_q")));
  auto const want_s = qtl::test::tensor_values<float>(c.expected, "x_s");
  auto const& s_info = c.expected.at("x_s");
  REQUIRE(s_info.shape == std::vector<std::int64_t>{r.scale.extent(0), r.scale.extent(1)});
  CHECK(qtl_test::raw(r.scale.data(), want_s.size()) == qtl_test::raw(want_s.data(), want_s.size()));
}

template <class Q, class T>
void check_quantize_case_compute(qtl::test::golden_case const& c) {
  std::string const cd = c.params.value("compute-dtype", std::string());
  if (cd == "float32") {
    check_quantize_case<Q, float, T>(c);
  } else {
    REQUIRE(cd.empty());
    check_quantize_case<Q, void, T>(c);
  }
}

TEST_CASE("scaled_quantize reproduces vLLM's golden cases bit for bit", "[scaled_quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("scaled-quantize")) {
    INFO(c.name);
    bool const fnuz = c.params.at("quant-dtype") == "float8_e4m3fnuz";
    auto const run = [&]<class T>() {
      if (fnuz) {
        check_quantize_case_compute<float8_e4m3fnuz_t, T>(c);
      } else {
        check_quantize_case_compute<float8_e4m3fn_t, T>(c);
      }
    };
    switch (c.in.at("x").type) {
      case io::dtype::F32: run.template operator()<float>(); break;
      case io::dtype::BF16: run.template operator()<bfloat16_t>(); break;
      default: FAIL("unexpected input dtype");
    }
  }
}

// The golden case's scale as 2-D (the rank-1 scale read as vLLM's prep_scale_for_group_broadcast).
template <class Q, class Out>
std::vector<Out> dequantize_case(qtl::test::golden_case const& c, std::optional<group_shape> g) {
  index_t const m = c.shape[0];
  index_t const n = c.shape[1];
  auto const q = qtl::test::tensor_values<Q>(
      c.in, "x_q", std::is_same_v<Q, float8_e4m3fnuz_t> ? std::optional(io::dtype::U8) : std::nullopt);
  auto const s = qtl::test::tensor_values<float>(c.in, "x_s");
  auto const& shape = c.in.at("x_s").shape;
  std::vector<index_t> const sshape(shape.begin(), shape.end());
  auto const ext = qtl::dequantize_scale_extents(sshape, m, n, g);
  std::vector<Out> out(static_cast<std::size_t>(m * n));
  qtl::scaled_dequantize<Out>(make_view(q.data(), m, n), make_view(s.data(), ext[0], ext[1]),
                              make_view(out.data(), m, n));
  return out;
}

TEST_CASE("scaled_dequantize reproduces vLLM's golden cases bit for bit", "[scaled_quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("scaled-dequantize")) {
    INFO(c.name);
    std::optional<group_shape> g;
    if (c.params.contains("group-rows")) {
      g = case_group(c);
    }
    bool const fnuz = c.params.at("quant-dtype") == "float8_e4m3fnuz";
    auto const want = raw(c.expected.at("out"));
    if (c.params.at("out-dtype") == "bfloat16") {
      REQUIRE(!fnuz);
      auto const out = dequantize_case<float8_e4m3fn_t, bfloat16_t>(c, g);
      CHECK(qtl_test::raw(out.data(), out.size()) == want);
    } else if (fnuz) {
      auto const out = dequantize_case<float8_e4m3fnuz_t, float>(c, g);
      CHECK(qtl_test::raw(out.data(), out.size()) == want);
    } else {
      auto const out = dequantize_case<float8_e4m3fn_t, float>(c, g);
      CHECK(qtl_test::raw(out.data(), out.size()) == want);
    }
  }
}

TEST_CASE("group_broadcast reproduces vLLM's golden cases", "[scaled_quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("group-broadcast")) {
    INFO(c.name);
    auto const& t = c.in.at("t");
    auto const& want = c.expected.at("t");
    REQUIRE(t.shape.size() == 2);
    auto const run = [&]<class T>() {
      auto const in = qtl::test::tensor_values<T>(c.in, "t");
      std::vector<T> out(static_cast<std::size_t>(want.shape[0] * want.shape[1]));
      qtl::group_broadcast(make_view(in.data(), t.shape[0], t.shape[1]),
                           make_view(out.data(), want.shape[0], want.shape[1]));
      CHECK(qtl_test::raw(out.data(), out.size()) == raw(want));
    };
    if (t.type == io::dtype::BF16) {
      run.template operator()<bfloat16_t>();
    } else {
      run.template operator()<float>();
    }
  }
}

TEST_CASE("scaled_quantize rounds fp8_max / amax twice in the compute dtype, as torch", "[scaled_quantize]") {
  // amax 1.015625 in bf16: 448 / amax rounded once is 442, 1/amax then * 448 gives 440
  std::vector<bfloat16_t> const x{qtl::from_float<bfloat16_t>(1.015625f), qtl::from_float<bfloat16_t>(0.5f)};
  auto const r = qtl::scaled_quantize<float8_e4m3fn_t>(make_view(x.data(), 1, 2), group_shape::per_tensor());
  CHECK(r.scale.data()[0] == 1.0f / 440.0f);
  // 0.5 * 440 = 220: code 0x6C (1.75 * 2^7 = 224 would be 442 * 0.5 = 221 -> 220 too; check the scale)
  CHECK(qtl::to_float(r.q.data()[1]) == 224.0f);  // 220 rounds to 224 on e4m3fn's 16-step grid
  // in float32 the same input rounds once per step: 1/1.015625 * 448 in float
  std::vector<float> const xf{1.015625f, 0.5f};
  auto const rf = qtl::scaled_quantize<float8_e4m3fn_t>(make_view(xf.data(), 1, 2), group_shape::per_tensor());
  float const sf = (1.0f / 1.015625f) * 448.0f;
  CHECK(rf.scale.data()[0] == 1.0f / sf);
}

TEST_CASE("scaled_quantize in fp16: a group of zeros has the scale Inf, NaN codes and x_s 0", "[scaled_quantize]") {
  // torch converts the amax floor 1e-12 to fp16: 0
  std::vector<half_t> x(8, qtl::from_float<half_t>(0.0f));
  x[4] = qtl::from_float<half_t>(3.0f);
  auto const r =
      qtl::scaled_quantize<float8_e4m3fn_t>(make_view<half_t const>(x.data(), 2, 4), group_shape::per_token());
  for (int j = 0; j < 4; ++j) {
    CHECK(r.q.data()[j].bits == 0x7F);  // the positive NaN code (torch on x86: 0xFF, the GPU: 0x7F)
  }
  CHECK(r.scale.data()[0] == 0.0f);
  CHECK(qtl::to_float(r.q.data()[4]) == 448.0f);
}

TEST_CASE("scaled_quantize: -1 group extents are the whole dimension; strided views", "[scaled_quantize]") {
  index_t const m = 6;
  index_t const n = 8;
  std::vector<float> x(static_cast<std::size_t>(2 * m * n));
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(static_cast<float>(i % 7) - 3.25f, static_cast<int>(i % 5));
  }
  auto const full = make_view<float const>(x.data(), m, n);
  for (auto const& [g, norm] :
       {std::pair{group_shape::per_tensor(), group_shape{m, n}}, std::pair{group_shape::per_token(), group_shape{1, n}},
        std::pair{group_shape::per_channel(), group_shape{m, 1}}}) {
    auto const a = qtl::scaled_quantize<float8_e4m3fn_t>(full, g);
    auto const b = qtl::scaled_quantize<float8_e4m3fn_t>(full, norm);
    CHECK(qtl_test::raw(a.q.data(), static_cast<std::size_t>(m * n)) ==
          qtl_test::raw(b.q.data(), static_cast<std::size_t>(m * n)));
    CHECK(a.scale.extent(0) == b.scale.extent(0));
    // every other row of a taller buffer, and the scales into a strided view
    qtl::view2d<float const> rows = make_view(x.data(), m, n);
    rows.stride[0] = 2 * n;
    std::vector<float> packed;
    for (index_t i = 0; i < m; ++i) {
      packed.insert(packed.end(), x.begin() + i * 2 * n, x.begin() + i * 2 * n + n);
    }
    auto const c = qtl::scaled_quantize<float8_e4m3fn_t>(make_view<float const>(packed.data(), m, n), g);
    std::vector<float8_e4m3fn_t> q(static_cast<std::size_t>(m * n));
    std::vector<float> s(static_cast<std::size_t>(2 * c.scale.extent(0) * c.scale.extent(1)), -1.0f);
    qtl::view2d<float> sv = make_view(s.data(), c.scale.extent(0), c.scale.extent(1));
    sv.stride[0] *= 2;
    qtl::scaled_quantize<float8_e4m3fn_t>(rows, g, make_view(q.data(), m, n), sv);
    CHECK(qtl_test::raw(q.data(), q.size()) == qtl_test::raw(c.q.data(), q.size()));
    for (index_t i = 0; i < c.scale.extent(0); ++i) {
      for (index_t j = 0; j < c.scale.extent(1); ++j) {
        CHECK(sv(i, j) == c.scale.view()(i, j));
      }
    }
  }
}

TEST_CASE("scaled_dequantize takes the -1 group shapes vLLM's asserts refuse, and 1-D scales", "[scaled_quantize]") {
  index_t const m = 4;
  index_t const n = 6;
  std::vector<float> x(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i) - 7.5f;
  }
  for (group_shape const g : {group_shape::per_tensor(), group_shape::per_token(), group_shape::per_channel()}) {
    auto const r = qtl::scaled_quantize<float8_e4m3fn_t>(make_view<float const>(x.data(), m, n), g);
    std::vector<index_t> const shape2{index_t{r.scale.extent(0)}, index_t{r.scale.extent(1)}};
    auto const ext = qtl::dequantize_scale_extents(shape2, m, n, g);
    CHECK(ext == qtl::dequantize_scale_extents(shape2, m, n, std::nullopt));
    std::vector<float> a(x.size());
    std::vector<float> b(x.size());
    auto const qv = make_view<float8_e4m3fn_t const>(r.q.data(), m, n);
    qtl::scaled_dequantize<float>(qv, make_view<float const>(r.scale.data(), ext[0], ext[1]),
                                  make_view(a.data(), m, n));
    // the 1-D form of the same scales, read through the group shape
    std::vector<index_t> const shape1{index_t{r.scale.extent(0) * r.scale.extent(1)}};
    auto const ext1 = qtl::dequantize_scale_extents(shape1, m, n, g);
    CHECK(ext1 == ext);
    qtl::scaled_dequantize<float>(qv, make_view<float const>(r.scale.data(), ext1[0], ext1[1]),
                                  make_view(b.data(), m, n));
    CHECK(a == b);
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(std::abs(a[i] - x[i]) <= std::abs(x[i]) / 8);  // e4m3's precision
    }
  }
}

TEST_CASE("scaled_quantize, scaled_dequantize and group_broadcast name what is wrong", "[scaled_quantize]") {
  std::vector<float> const x(12, 1.0f);
  auto const v = make_view(x.data(), 3, 4);
  CHECK_THROWS_WITH(qtl::scaled_quantize<float8_e4m3fn_t>(v, group_shape{2, 2}),
                    Catch::Contains("[3, 4] is not a whole number of [2, 2] groups"));
  CHECK_THROWS_WITH(qtl::scaled_quantize<float8_e4m3fn_t>(v, group_shape::per_tensor(), 0.0f),
                    Catch::Contains("fp8_max must be finite and positive"));
  CHECK_THROWS_WITH(qtl::scaled_quantize<float8_e4m3fn_t>(make_view(x.data(), 0, 4), group_shape::per_tensor()),
                    Catch::Contains("spans an empty dimension"));
  std::vector<float8_e4m3fn_t> q(12);
  std::vector<float> s(3);
  CHECK_THROWS_WITH(qtl::scaled_quantize<float8_e4m3fn_t>(v, group_shape::per_token(), make_view(q.data(), 3, 4),
                                                          make_view(s.data(), 1, 3)),
                    Catch::Contains("scale is [1, 3], the groups [3, 1]"));
  std::vector<index_t> const one_d{3};
  CHECK_THROWS_WITH(qtl::dequantize_scale_extents(one_d, 3, 4, std::nullopt), Catch::Contains("needs a group_shape"));
  CHECK_THROWS_WITH(qtl::dequantize_scale_extents(one_d, 3, 4, group_shape{1, 2}), Catch::Contains("cannot broadcast"));
  std::vector<index_t> const two_d{2, 2};
  CHECK_THROWS_WITH(qtl::dequantize_scale_extents(two_d, 4, 4, group_shape{1, 2}),
                    Catch::Contains("is not the groups of"));
  std::vector<float> out(12);
  CHECK_THROWS_WITH(qtl::group_broadcast(make_view<float const>(s.data(), 1, 3), make_view(out.data(), 3, 4)),
                    Catch::Contains("does not broadcast in groups"));
  std::vector<float> const one{2.0f};
  CHECK_THROWS_WITH(qtl::scaled_dequantize<float>(make_view<float8_e4m3fn_t const>(q.data(), 3, 4),
                                                  make_view(one.data(), 1, 1), make_view(out.data(), 4, 3)),
                    Catch::Contains("out is [4, 3]"));
}

}  // namespace

namespace {

TEST_CASE("scaled_quantize: a NaN group gives Q's positive NaN and the quiet NaN scale; Inf the scale 0",
          "[scaled_quantize]") {
  float const nan = std::numeric_limits<float>::quiet_NaN();
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const x{1.0f, -nan, 2.0f, -3.0f, inf, 0.0f};
  auto const r = qtl::scaled_quantize<float8_e4m3fn_t>(make_view(x.data(), 2, 3), group_shape::per_token());
  for (int j = 0; j < 3; ++j) {
    CHECK(r.q.data()[j].bits == 0x7F);
  }
  CHECK(qtl::float_to_bits(r.scale.data()[0]) == 0x7fc00000u);
  // amax Inf: 1/Inf = 0, the scale 0 (x_s Inf), -3 * 0 = -0, Inf * 0 = NaN, 0 * 0 = 0
  CHECK(r.q.data()[3].bits == 0x80);
  CHECK(r.q.data()[4].bits == 0x7F);
  CHECK(r.q.data()[5].bits == 0x00);
  CHECK(r.scale.data()[1] == inf);
  auto const u = qtl::scaled_quantize<float8_e4m3fnuz_t>(make_view(x.data(), 2, 3), group_shape::per_token());
  CHECK(u.q.data()[0].bits == 0x80);  // fnuz's only NaN
  CHECK(u.q.data()[3].bits == 0x00);  // no -0 in fnuz
}

}  // namespace
