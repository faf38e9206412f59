// <qtl/pack_nd.hpp>: vLLM's gptq_pack, awq_pack and the packings along any dimension against the
// golden cases recorded from vLLM's own functions, hand-worked AWQ words, round trips on strided
// views, vLLM's zero-extension of signed fields, and every error path. <qtl/w4a8.hpp>: the W4A8
// transforms (CUTLASS's int4 encode and reorder, pack_scale_fp8, vLLM's scale split and uint4b8
// conversion, sglang's interleave_scales) against their golden cases, the inverses, the in-place
// reorder, and every refusal.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>

#include <qtl/dispatch.hpp>
#include <qtl/pack_nd.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/w4a8.hpp>
#include <qtl/x86/isa.hpp>

#include "test_data.hpp"

namespace {

using qtl::index_t;
using qtl::make_view;
using qtl_test::random_codes;

// The packing along `packed-dim` of a golden case as three extents.
std::array<index_t, 3> split(qtl::test::golden_case const& c, char const* tensor) {
  auto const& shape = c.in.at(tensor).shape;
  std::vector<index_t> const s(shape.begin(), shape.end());
  return qtl::split_at_dim(s, c.params.at("packed-dim").get<index_t>());
}

TEST_CASE("gptq_pack and awq_pack reproduce vLLM's golden cases bit for bit", "[pack_nd][golden]") {
  for (char const* op : {"gptq-pack", "awq-pack"}) {
    for (auto const& c : qtl::test::golden_cases(op)) {
      INFO(c.name);
      int const bits = c.params.at("bits");
      auto const q = qtl::test::tensor_values<std::int32_t>(c.in, "q_w");
      auto const& shape = c.in.at("q_w").shape;
      auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, "packed");
      auto const in = make_view(q.data(), shape[0], shape[1]);
      qtl::dispatch_bits<2, 4, 8>(bits, [&]<int B>() {
        if (std::string(op) == "gptq-pack") {
          CHECK(qtl::gptq_pack<B>(in).storage() == want);
        } else if constexpr (B == 4 || B == 8) {
          auto const got = qtl::awq_pack<B>(in);
          CHECK(got.storage() == want);
          CHECK(got.extent(1) == c.expected.at("packed").shape[1]);
        }
      });
    }
  }
}

TEST_CASE("the packings along a dimension reproduce vLLM's golden cases bit for bit", "[pack_nd][golden]") {
  for (auto const& c : qtl::test::golden_cases("pack-quantized-values-into-int32")) {
    INFO(c.name);
    auto const q = qtl::test::tensor_values<std::int32_t>(c.in, "w_q");
    auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, "packed");
    auto const e = split(c, "w_q");
    qtl::dispatch_pack_type(c.params.at("type").get<std::string>(), [&]<qtl::scalar_type T>(qtl::scalar_constant<T>) {
      auto const got = qtl::pack_quantized_values_into_int32<T>(make_view(q.data(), e[0], e[1], e[2]));
      CHECK(got.storage() == want);
      // and back: unsigned codes come back as they were; signed ones zero-extended, as vLLM
      auto const back = qtl::unpack_quantized_values_into_int32<T>(got.view()).storage();
      constexpr std::int32_t mask = (1 << T.size_bits()) - 1;
      for (std::size_t i = 0; i < q.size(); ++i) {
        REQUIRE(back[i] == (q[i] & mask));
      }
    });
  }
  for (auto const& c : qtl::test::golden_cases("unpack-quantized-values-into-int32")) {
    INFO(c.name);
    auto const w = qtl::test::tensor_values<std::int32_t>(c.in, "packed");
    auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, "w_q");
    auto const e = split(c, "packed");
    qtl::dispatch_pack_type(c.params.at("type").get<std::string>(), [&]<qtl::scalar_type T>(qtl::scalar_constant<T>) {
      auto const got = qtl::unpack_quantized_values_into_int32<T>(make_view(w.data(), e[0], e[1], e[2]));
      CHECK(got.storage() == want);
      // every word is a word of unsigned codes: packing them back with the unsigned width restores it
      auto const again = qtl::pack_quantized_values_into_int32<T.size_bits()>(got.view());
      CHECK(again.storage() == w);
    });
  }
}

TEST_CASE("awq_pack interleaves the columns of each word as [0,2,4,6,1,3,5,7] / [0,2,1,3]", "[pack_nd]") {
  std::vector<std::int32_t> const q4 = {0, 1, 2, 3, 4, 5, 6, 7};
  // slot i holds column order[i]: nibbles (low first) 0,2,4,6,1,3,5,7
  CHECK(qtl::awq_pack<4>(make_view(q4.data(), 1, 8)).storage()[0] == 0x75316420);
  std::vector<std::int32_t> const q8 = {0x10, 0x11, 0x12, 0x13};
  CHECK(qtl::awq_pack<8>(make_view(q8.data(), 1, 4)).storage()[0] == 0x13111210);
}

TEST_CASE("the packings along a dimension take strided views and equal pack_rows / pack_cols", "[pack_nd]") {
  std::mt19937 rng(7);
  index_t const o = 3, p = 16, n = 5;
  auto const q = random_codes(o * p * n, 0, 15, rng);
  // a (p, o*n) matrix of the middle dimension: column block b is outer index b
  auto const got = qtl::pack_quantized_values_into_int32<qtl::uint4b8>(make_view(q.data(), o, p, n));
  for (index_t b = 0; b < o; ++b) {
    auto const rows = qtl::pack_rows<4>(make_view(q.data() + b * p * n, p, n)).storage();
    for (index_t i = 0; i < p / 8 * n; ++i) {
      REQUIRE(got.storage()[static_cast<std::size_t>(b * p / 8 * n + i)] == rows[static_cast<std::size_t>(i)]);
    }
  }
  // the transposed view (inner, P, outer strides swapped) packs the same words, transposed
  auto const t = qtl_test::reversed_axes_view(q, n, p, o);
  auto const gt = qtl::pack_quantized_values_into_int32<4>(t);
  for (index_t a = 0; a < n; ++a) {
    for (index_t r = 0; r < p / 8; ++r) {
      for (index_t b = 0; b < o; ++b) {
        REQUIRE(gt.view()(a, r, b) == got.view()(b, r, a));
      }
    }
  }
  auto const back = qtl::unpack_quantized_values_into_int32<4>(gt.view());
  for (index_t a = 0; a < n; ++a) {
    for (index_t r = 0; r < p; ++r) {
      for (index_t b = 0; b < o; ++b) {
        REQUIRE(back.view()(a, r, b) == t(a, r, b));
      }
    }
  }
  // along the last dimension: pack_cols of the (outer, P) rows
  auto const last = qtl::pack_quantized_values_into_int32<4>(make_view(q.data(), o * n, p, 1));
  CHECK(last.storage() == qtl::pack_cols<4>(make_view(q.data(), o * n, p)).storage());
}

TEST_CASE("the pack types are the named integer types whose width divides 32", "[pack_nd]") {
  int n = 0;
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    if (qtl::is_pack_type(t)) {
      ++n;
      qtl::dispatch_pack_type(t, [&]<qtl::scalar_type T>(qtl::scalar_constant<T>) { CHECK(T == t); });
    } else {
      CHECK_THROWS_AS(qtl::dispatch_pack_type(t, [](auto) {}), qtl::unsupported_error);
    }
  }
  CHECK(n == 7);
}

TEST_CASE("split_at_dim gives (outer, P, inner) and rejects a dimension that is not one", "[pack_nd]") {
  std::vector<index_t> const s = {2, 3, 4, 5};
  CHECK(qtl::split_at_dim(s, 0) == std::array<index_t, 3>{1, 2, 60});
  CHECK(qtl::split_at_dim(s, 2) == std::array<index_t, 3>{6, 4, 5});
  CHECK(qtl::split_at_dim(s, 3) == std::array<index_t, 3>{24, 5, 1});
  CHECK_THROWS_WITH(qtl::split_at_dim(s, 4), Catch::Contains("packed_dim = 4") && Catch::Contains("rank-4"));
  CHECK_THROWS_AS(qtl::split_at_dim(s, -1), qtl::shape_error);
}

TEST_CASE("the packings of qtl/pack_nd.hpp reject bad shapes and codes, leaving out zeroed", "[pack_nd]") {
  std::vector<std::int32_t> q(2 * 12, 1);
  std::vector<std::int32_t> out(2 * 3, 0x55);
  // awq: N = 12 is not a multiple of 8
  CHECK_THROWS_WITH(qtl::awq_pack<4>(make_view(q.data(), 2, 12), make_view(out.data(), 2, 1)),
                    Catch::Contains("qtl::awq_pack<4>") && Catch::Contains("not a multiple of the pack factor 8"));
  // a code out of range names its place; out is zero-filled
  q[13] = 16;
  CHECK_THROWS_WITH(qtl::awq_pack<4>(make_view(q.data(), 3, 8), make_view(out.data(), 3, 1)),
                    Catch::Contains("in(1, 5) = 16") && Catch::Contains("[0, 15]"));
  CHECK(std::vector<std::int32_t>(out.begin(), out.begin() + 3) == std::vector<std::int32_t>(3, 0));
  // along a dimension: P = 12 is not a multiple of 8; then a code out of range at outer index 1
  std::fill(out.begin(), out.end(), 0x55);
  CHECK_THROWS_WITH(
      qtl::pack_quantized_values_into_int32<qtl::uint4>(make_view(q.data(), 2, 12, 1), make_view(out.data(), 2, 1, 1)),
      Catch::Contains("the packed extent 12 is not a multiple of the pack factor 8"));
  CHECK_THROWS_WITH(
      qtl::pack_quantized_values_into_int32<qtl::uint4>(make_view(q.data(), 3, 8, 1), make_view(out.data(), 3, 2, 1)),
      Catch::Contains("do not fit"));
  CHECK_THROWS_WITH(
      qtl::pack_quantized_values_into_int32<qtl::uint4>(make_view(q.data(), 3, 8, 1), make_view(out.data(), 3, 1, 1)),
      Catch::Contains("in(5, 0) = 16") && Catch::Contains("outer index 1"));
  CHECK(std::vector<std::int32_t>(out.begin(), out.begin() + 3) == std::vector<std::int32_t>(3, 0));
  // signed codes: int4 -8..7 pack as two's complement, 8 is out of range
  std::vector<std::int32_t> s = {-8, -1, 0, 7, 1, 2, 3, 4};
  CHECK(qtl::pack_quantized_values_into_int32<qtl::int4>(make_view(s.data(), 1, 8, 1)).storage()[0] ==
        static_cast<std::int32_t>(0x432170F8u));
  s[0] = 8;
  CHECK_THROWS_WITH(qtl::pack_quantized_values_into_int32<qtl::int4>(make_view(s.data(), 1, 8, 1)),
                    Catch::Contains("[-8, 7]"));
  // unpacking into the wrong shape
  std::vector<std::int32_t> w(4, 0);
  CHECK_THROWS_AS(
      qtl::unpack_quantized_values_into_int32<4>(make_view(w.data(), 1, 2, 2), make_view(q.data(), 1, 8, 2)),
      qtl::shape_error);
}

// ---- W4A8 ---------------------------------------------------------------------------------------

std::vector<std::uint8_t> bytes_of(std::vector<std::int32_t> const& w) {
  std::vector<std::uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());
  return b;
}

TEST_CASE("encode_and_reorder_int4b reproduces CUTLASS's layout on the golden cases; decode inverts it",
          "[w4a8][golden]") {
  for (char const* op : {"encode-and-reorder-int4b", "encode-and-reorder-int4b-grouped"}) {
    bool const grouped = std::string(op).ends_with("grouped");
    for (auto const& c : qtl::test::golden_cases(op)) {
      INFO(c.name);
      index_t const e = grouped ? c.shape[0] : 1;
      index_t const n = c.shape[grouped ? 1 : 0];
      index_t const k = c.shape[grouped ? 2 : 1];
      auto const in = bytes_of(qtl::test::tensor_values<std::int32_t>(c.in, "b"));
      auto const want = bytes_of(qtl::test::tensor_values<std::int32_t>(c.expected, "b_packed"));
      std::vector<std::uint8_t> out(in.size());
      if (grouped) {
        qtl::encode_and_reorder_int4b_grouped(in, e, n, k, out);
      } else {
        qtl::encode_and_reorder_int4b(in, n, k, out);
      }
      CHECK(out == want);
      auto inplace = in;
      qtl::encode_and_reorder_int4b_inplace(inplace, e, n, k, grouped ? 256 : 32);
      CHECK(inplace == want);
      std::vector<std::uint8_t> back(in.size());
      qtl::decode_and_unreorder_int4b(out, e, n, k, back);
      CHECK(back == in);
    }
  }
}

TEST_CASE("the word-wide encode equals CUTLASS's nibble table on every byte pair", "[w4a8]") {
  for (std::uint32_t x = 0; x < 65536; ++x) {
    std::uint64_t const w = 0x0123456789ABCDEFull ^ (std::uint64_t{x} << 24) ^ x;
    std::uint64_t want = 0;
    for (int b = 0; b < 8; ++b) {
      want |= std::uint64_t{qtl::unified_encode_int4b_byte(static_cast<std::uint8_t>(w >> (8 * b)))} << (8 * b);
    }
    REQUIRE(qtl::unified_encode_int4b_word(w) == want);
  }
}

TEST_CASE("the x86 executor of the reorder equals the portable loop", "[w4a8]") {
  std::mt19937 rng(2504);
  for (auto const [e, n, k] : {std::array<index_t, 3>{1, 16, 32}, {2, 48, 96}, {3, 64, 512}}) {
    INFO("experts " << e << ", n " << n << ", k " << k);
    std::vector<std::uint8_t> fast(static_cast<std::size_t>(e * n * k / 2));
    for (auto& b : fast) {
      b = static_cast<std::uint8_t>(rng());
    }
    auto slow = fast;
    qtl::encode_and_reorder_int4b_inplace(fast, e, n, k, 32);
    {
      qtl::x86::scoped_level_cap const cap(qtl::x86::level::portable);
      qtl::encode_and_reorder_int4b_inplace(slow, e, n, k, 32);
    }
    CHECK(fast == slow);
  }
}

TEST_CASE("the reorder's executors past the streaming-store size equal the portable loop", "[w4a8]") {
  // The AVX-512 executor (4 atoms a call, 64-byte stores), AVX2 (2 atoms, 32-byte stores) and
  // SSE2 (one atom, 16-byte ones) against the portable loop, each under its level cap: an odd
  // expert count (grouped), K/32 column tiles not a multiple of 4 (the plain op: 89 tiles, the last
  // one an atom alone), on a 64-byte aligned output (streamed) and on one 16 bytes past it
  // (ordinary stores), out of place and in place.
  using qtl::x86::level;
  std::mt19937 rng(3404);
  for (auto const [e, n, k] : {std::array<index_t, 3>{3, 2000, 2816}, {1, 6000, 2848}}) {
    INFO("experts " << e << ", n " << n << ", k " << k);
    std::vector<std::uint8_t> in(static_cast<std::size_t>(e * n * k / 2));
    for (auto& b : in) {
      b = static_cast<std::uint8_t>(rng());
    }
    qtl::aligned_vector<std::uint8_t> buf(in.size() + 16);
    for (std::size_t const off : {0, 16}) {
      INFO("output " << off << " bytes past a 64-byte boundary");
      std::span<std::uint8_t> const out(buf.data() + off, in.size());
      auto const run = [&](level cap) {
        qtl::x86::scoped_level_cap const capped(cap);
        std::fill(out.begin(), out.end(), std::uint8_t{0});
        if (e > 1) {
          qtl::encode_and_reorder_int4b_grouped(in, e, n, k, out);
        } else {
          qtl::encode_and_reorder_int4b(in, n, k, out);
        }
        return std::vector<std::uint8_t>(out.begin(), out.end());
      };
      auto const want = run(level::portable);
      CHECK((run(level::sse2) == want));  // bools: a failure does not print megabytes
      CHECK((run(level::avx2) == want));
      CHECK((run(level::avx512) == want));
      for (level const cap : {level::sse2, level::avx2, level::avx512}) {  // in place, streamed back
        qtl::x86::scoped_level_cap const capped(cap);
        std::copy(in.begin(), in.end(), out.begin());
        qtl::encode_and_reorder_int4b_inplace(out, e, n, k, e > 1 ? 256 : 32);
        CHECK(std::equal(out.begin(), out.end(), want.begin()));
      }
    }
  }
}

TEST_CASE("the reorder refuses what CUTLASS's copy cannot do, naming it", "[w4a8]") {
  std::vector<std::uint8_t> in(20 * 64 / 2), out(in.size());
  CHECK_THROWS_WITH(qtl::encode_and_reorder_int4b(in, 20, 64, out), Catch::Contains("N = 20 is not a multiple of 16"));
  std::vector<std::uint8_t> in2(16 * 48 / 2), out2(in2.size());
  CHECK_THROWS_WITH(qtl::encode_and_reorder_int4b(in2, 16, 48, out2), Catch::Contains("K = 48"));
  std::vector<std::uint8_t> in3(2 * 16 * 128 / 2), out3(in3.size());
  CHECK_THROWS_WITH(qtl::encode_and_reorder_int4b_grouped(in3, 2, 16, 128, out3),
                    Catch::Contains("not a multiple of 256"));
  CHECK_THROWS_WITH(qtl::encode_and_reorder_int4b_grouped(in3, 3, 16, 256, out3), Catch::Contains("bytes"));
  CHECK_THROWS_WITH(qtl::encode_and_reorder_int4b(in3, 16, 256, in3), Catch::Contains("same buffer"));
  CHECK_THROWS_AS(qtl::encode_and_reorder_int4b_inplace(in3, 1, 16, 256, 64), qtl::value_error);
  CHECK(out == std::vector<std::uint8_t>(out.size(), 0));
}

TEST_CASE("pack_scale_fp8 reproduces CUTLASS's packed_scale_t; byte 7 gives the scale back", "[w4a8][golden]") {
  for (auto const& c : qtl::test::golden_cases("pack-scale-fp8")) {
    INFO(c.name);
    auto const s = qtl::test::tensor_values<qtl::float8_e4m3fn_t>(c.in, "scales");
    auto const want = qtl::test::tensor_values<qtl::float8_e4m3fn_t>(c.expected, "packed");
    std::vector<qtl::float8_e4m3fn_t> out(8 * s.size());
    qtl::pack_scale_fp8(s, out);
    CHECK(out == want);
    for (std::size_t i = 0; i < s.size(); ++i) {
      if ((s[i].bits & 0x7F) != 0x7F) {
        CHECK((out[8 * i + 7].bits ^ 0x80) == s[i].bits);
      }
    }
  }
  std::vector<qtl::float8_e4m3fn_t> s(3), out(23);
  CHECK_THROWS_WITH(qtl::pack_scale_fp8(s, out), Catch::Contains("8 x 3 scales is 24"));
}

TEST_CASE("convert_bf16_scales_to_fp8 reproduces vLLM's with either rule of its quantizer", "[w4a8][golden]") {
  int apart = 0;
  for (auto const& c : qtl::test::golden_cases("convert-bf16-scales-to-fp8")) {
    INFO(c.name);
    auto const& shape = c.shape;
    index_t const cols = shape.back();
    index_t const rows = static_cast<index_t>(qtl::test::tensor_values<qtl::bfloat16_t>(c.in, "scales").size()) / cols;
    auto const s = qtl::test::tensor_values<qtl::bfloat16_t>(c.in, "scales");
    auto const want_q = qtl::test::tensor_values<qtl::float8_e4m3fn_t>(c.expected, "fp8_scales");
    auto const want_c = qtl::test::tensor_values<float>(c.expected, "chan_scales");
    bool const divide = c.params.at("rule").get<std::string>() == "divide";
    auto run = [&](qtl::fp8_scale_op op) {
      std::vector<qtl::float8_e4m3fn_t> q(s.size());
      std::vector<float> ch(static_cast<std::size_t>(rows));
      qtl::convert_bf16_scales_to_fp8<qtl::bfloat16_t>(make_view(s.data(), rows, cols), op,
                                                       make_view(q.data(), rows, cols), make_view(ch.data(), rows));
      return std::pair{q, ch};
    };
    auto const [q, ch] = run(divide ? qtl::fp8_scale_op::divide : qtl::fp8_scale_op::multiply_reciprocal);
    CHECK(q == want_q);
    CHECK(ch == want_c);
    // the rule is an argument because it matters: the other one misses some case
    apart += run(divide ? qtl::fp8_scale_op::multiply_reciprocal : qtl::fp8_scale_op::divide).first != want_q;
  }
  CHECK(apart > 0);
  std::vector<float> s = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<qtl::float8_e4m3fn_t> q(2);
  std::vector<float> ch(1);
  auto const sv = make_view(static_cast<float const*>(s.data()), 1, 2);
  CHECK_THROWS_WITH(qtl::convert_bf16_scales_to_fp8<float>(sv, qtl::fp8_scale_op::divide, make_view(q.data(), 1, 2),
                                                           make_view(ch.data(), 1)),
                    Catch::Contains("scale (0, 1) is nan"));
  CHECK_THROWS_AS(qtl::convert_bf16_scales_to_fp8<float>(sv, qtl::fp8_scale_op::divide, make_view(q.data(), 2, 1),
                                                         make_view(ch.data(), 1)),
                  qtl::shape_error);
}

TEST_CASE("convert_packed_uint4b8_to_signed_int4 reproduces vLLM's and is its own inverse", "[w4a8][golden]") {
  for (auto const& c : qtl::test::golden_cases("convert-packed-uint4b8-to-signed-int4")) {
    INFO(c.name);
    auto const t = qtl::test::tensor_values<std::int32_t>(c.in, "t");
    auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, "t");
    std::vector<std::int32_t> out(t.size());
    qtl::convert_packed_uint4b8_to_signed_int4(t, out);
    CHECK(out == want);
    qtl::convert_packed_uint4b8_to_signed_int4_inplace(out);
    CHECK(out == t);
  }
  std::vector<std::int32_t> a(2), b(3);
  CHECK_THROWS_AS(qtl::convert_packed_uint4b8_to_signed_int4(a, b), qtl::shape_error);
}

TEST_CASE("interleave_scales reproduces sglang's; deinterleave_scales inverts it", "[w4a8][golden]") {
  for (auto const& c : qtl::test::golden_cases("interleave-scales")) {
    INFO(c.name);
    index_t const p = c.params.at("scale-pack").get<index_t>();
    index_t const e = c.shape[0], n = c.shape[1], g = c.shape[2];
    auto const check = [&]<class T>() {
      auto const s = qtl::test::tensor_values<T>(c.in, "scales");
      auto const want = qtl::test::tensor_values<T>(c.expected, "scales_interleaved");
      std::vector<T> out(s.size()), back(s.size());
      qtl::interleave_scales<T>(make_view(s.data(), e, n, g), p, make_view(out.data(), e, g / p, n * p));
      CHECK(out == want);
      qtl::deinterleave_scales<T>(make_view(static_cast<T const*>(out.data()), e, g / p, n * p), p,
                                  make_view(back.data(), e, n, g));
      CHECK(back == s);
    };
    if (c.in.at("scales").type == qtl::io::dtype::BF16) {
      check.template operator()<qtl::bfloat16_t>();
    } else {
      check.template operator()<float>();
    }
  }
  std::vector<float> s(12), out(12);
  auto const sv = make_view(static_cast<float const*>(s.data()), 1, 2, 6);
  CHECK_THROWS_WITH(qtl::interleave_scales<float>(sv, 4, make_view(out.data(), 1, 1, 8)),
                    Catch::Contains("scale K groups 6 must be divisible by scale_pack 4"));
  CHECK_THROWS_WITH(qtl::interleave_scales<float>(sv, 2, make_view(out.data(), 1, 2, 4)),
                    Catch::Contains("expected [1, 3, 4]"));
  CHECK_THROWS_AS(qtl::interleave_scales<float>(sv, 0, make_view(out.data(), 1, 2, 4)), qtl::value_error);
}

}  // namespace
