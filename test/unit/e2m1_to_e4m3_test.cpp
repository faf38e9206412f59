// qtl/e2m1_to_e4m3.hpp, DeepSeek-V4's lossless MXFP4 -> FP8-block cast: the element rules against
// brute force over e4m3fn, losslessness on every e2m1 code at every scale offset in every block
// scale (decoded both sides), refusals that name the block and leave the output untouched, a
// per-element reference on random stacks with partial blocks, thread counts, the x86 executor
// against the portable loop, the argument checks, and the golden cases recorded from sglang's
// own function (test/data/golden/make_dsv4_cases.py); and qtl/deepgemm_e8m0.hpp, the DeepGEMM
// packing of DeepSeek-V4's E8M0 block scales: the golden cases recorded from vLLM's function
// (make_dsv4_deepgemm_cases.py), the float packer on the upcast codes, the bmm view's shapes and
// the refused codes; and qtl/e2m1_to_bf16.hpp (the experts to BF16) against block_dequantize<mxfp4>
// under every scale code, its executor against its portable loop, and its exactness flag.
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <e2m1_to_e4m3_cases.hpp>

#include <qtl/deepgemm_e8m0.hpp>
#include <qtl/e2m1_to_bf16.hpp>
#include <qtl/e2m1_to_e4m3.hpp>
#include <qtl/x86/isa.hpp>

namespace {

namespace cv = qtl::convert;
using bytes = std::vector<std::uint8_t>;
using qtl_test::e2m1::random_mxfp4;

struct cast_out {
  bytes q, s;
};

cast_out run(bytes const& x, bytes const& sc, cv::block_grid const& g, int threads = 1) {
  cast_out o{bytes(static_cast<std::size_t>(g.elements()), 0xAA), bytes(static_cast<std::size_t>(g.scales()), 0xAA)};
  cv::cast_e2m1fn_to_e4m3fn(x, sc, g, o.q, o.s, threads);
  return o;
}

/// The element rule walked one element at a time: the block's largest scale, its scale and each
/// code through `e2m1_to_e4m3` (no tables, no executor).
cast_out reference(bytes const& x, bytes const& sc, cv::block_grid const& g) {
  cast_out o{bytes(static_cast<std::size_t>(g.elements())), bytes(static_cast<std::size_t>(g.scales()))};
  std::int64_t const groups = g.k / 32;
  for (std::int64_t m = 0; m < g.groups; ++m) {
    for (std::int64_t bi = 0; bi < g.n_blocks(); ++bi) {
      for (std::int64_t bj = 0; bj < g.k_blocks(); ++bj) {
        std::uint8_t emax = 0;
        for (std::int64_t r = bi * g.block.n; r < std::min(g.n, (bi + 1) * g.block.n); ++r) {
          for (std::int64_t c = bj * g.block.k; c < std::min(g.k, (bj + 1) * g.block.k); c += 32) {
            emax = std::max(emax, sc[static_cast<std::size_t>((m * g.n + r) * groups + c / 32)]);
          }
        }
        std::uint8_t const bs = cv::lossless_block_scale(emax);
        o.s[static_cast<std::size_t>((m * g.n_blocks() + bi) * g.k_blocks() + bj)] = bs;
        for (std::int64_t r = bi * g.block.n; r < std::min(g.n, (bi + 1) * g.block.n); ++r) {
          for (std::int64_t c = bj * g.block.k; c < std::min(g.k, (bj + 1) * g.block.k); ++c) {
            std::int64_t const e = (m * g.n + r) * g.k + c;
            auto const code = static_cast<std::uint8_t>(x[static_cast<std::size_t>(e / 2)] >> (e % 2 * 4) & 15);
            int const shift = sc[static_cast<std::size_t>((m * g.n + r) * groups + c / 32)] - bs;
            o.q[static_cast<std::size_t>(e)] = shift < -30 ? 0 : cv::e2m1_to_e4m3(code, shift);
          }
        }
      }
    }
  }
  return o;
}

}  // namespace

TEST_CASE("e2m1_to_e4m3 is exact exactly from e2m1_min_exact_shift on, for every code", "[e2m1_to_e4m3]") {
  for (std::uint8_t code = 0; code < 16; ++code) {
    for (int shift = -40; shift <= cv::lossless_max_shift; ++shift) {
      INFO("code " << int(code) << " shift " << shift);
      double const want = std::ldexp(qtl::e2m1_to_float(code), shift);
      std::uint8_t const q = cv::e2m1_to_e4m3(code, shift);
      bool const exact = static_cast<double>(qtl::e4m3fn_to_float(q)) == want;
      CHECK(exact == (shift >= cv::e2m1_min_exact_shift(code)));
      if ((code & 7) == 0) {
        CHECK(q == 0x00);  // the engines' table has +0.0 for both zeros
      } else if (exact) {
        CHECK(q == qtl::float_to_e4m3fn(static_cast<float>(want)));
      }
    }
  }
}

TEST_CASE("cast_e2m1fn_to_e4m3fn is lossless on every code at every scale offset, and refuses the rest",
          "[e2m1_to_e4m3]") {
  // one 1 x 64 block: group 0 holds the block's largest scale emax (code 0.5), group 1 the code
  // under test, 32 times, with its scale e = emax - d
  cv::block_grid const g{1, 1, 64, {128, 128}};
  int checked = 0, refused = 0;
  for (int emax = 0; emax <= 254; ++emax) {
    for (int d = 0; d <= emax && d <= 24; ++d) {
      for (std::uint8_t code = 0; code < 16; ++code) {
        bytes x(32, 0x11);
        std::fill(x.begin() + 16, x.end(), static_cast<std::uint8_t>(code | code << 4));
        bytes const sc{static_cast<std::uint8_t>(emax), static_cast<std::uint8_t>(emax - d)};
        bool const exact =
            cv::e2m1_to_e4m3_exact(code, static_cast<std::uint8_t>(emax - d), static_cast<std::uint8_t>(emax)) &&
            cv::e2m1_to_e4m3_exact(1, static_cast<std::uint8_t>(emax), static_cast<std::uint8_t>(emax));
        INFO("emax " << emax << " d " << d << " code " << int(code));
        cast_out o{bytes(64, 0xAA), bytes(1, 0xAA)};
        if (!exact) {
          CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(x, sc, g, o.q, o.s), qtl::value_error);
          CHECK(o.q == bytes(64, 0xAA));
          CHECK(o.s == bytes(1, 0xAA));
          ++refused;
          continue;
        }
        cv::cast_e2m1fn_to_e4m3fn(x, sc, g, o.q, o.s);
        for (int c = 0; c < 64; ++c) {
          std::uint8_t const in = c < 32 ? 1 : code;
          double const want = std::ldexp(qtl::e2m1_to_float(in), sc[static_cast<std::size_t>(c / 32)] - 127);
          double const got = std::ldexp(qtl::e4m3fn_to_float(o.q[static_cast<std::size_t>(c)]), o.s[0] - 127);
          REQUIRE(got == want);
        }
        ++checked;
      }
    }
  }
  // every code within 2^14 of a top scale of 2^-121 or more is exact; below 2^-121 only zeros
  CHECK(checked > 249 * 15 * 16);
  CHECK(refused > 0);
}

TEST_CASE("cast_e2m1fn_to_e4m3fn names the block it refuses", "[e2m1_to_e4m3]") {
  cv::block_grid const g{2, 256, 256, {128, 128}};
  std::mt19937 rng(7);
  auto [x, sc] = random_mxfp4(g, 14, rng);
  bytes q(static_cast<std::size_t>(g.elements())), s(static_cast<std::size_t>(g.scales()));
  auto const message = [&] {
    try {
      cv::cast_e2m1fn_to_e4m3fn(x, sc, g, q, s);
    } catch (qtl::value_error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message() == "no error");
  // matrix 1, row 130, group 5 (columns 160..191): block (1, 1); 2^15 below a 2^-13 top (every other
  // scale is 100 or more: within 2^14), code 0.5
  std::size_t const at = (256 + 130) * 8 + 5;
  sc[(256 + 130) * 8 + 4] = 114;
  sc[at] = 99;
  x[((256 + 130) * 256 + 160) / 2] = 0x01;
  CHECK_THAT(message(), Catch::Contains("block (1, 1) of matrix 1 (rows 128..255, columns 128..255)") &&
                            Catch::Contains("element (130, 160), e2m1 0.5 with scale 2^-28 lies 2^15 below") &&
                            Catch::Contains("within 2^14"));
  sc[at] = 0xFF;
  CHECK_THAT(message(), Catch::Contains("block (1, 1) of matrix 1") && Catch::Contains("NaN"));
  // a zero group may lie any distance below
  sc[at] = 0;
  std::fill_n(x.begin() + ((256 + 130) * 256 + 160) / 2, 16, std::uint8_t{0x88});
  CHECK(message() == "no error");
}

TEST_CASE("cast_e2m1fn_to_e4m3fn: a block whose top scale is below 2^-121 casts only if all zero", "[e2m1_to_e4m3]") {
  cv::block_grid const g{1, 2, 32, {128, 128}};
  bytes const sc{5, 3};
  cast_out o{bytes(64), bytes(1)};
  cv::cast_e2m1fn_to_e4m3fn(bytes(32, 0x80), sc, g, o.q, o.s);
  CHECK(o.q == bytes(64, 0));
  CHECK(o.s == bytes{0});
  CHECK_THROWS_WITH(cv::cast_e2m1fn_to_e4m3fn(bytes(32, 0x01), sc, g, o.q, o.s),
                    Catch::Contains("its largest scale 2^-122 is below 2^-121"));
}

TEST_CASE("cast_e2m1fn_to_e4m3fn equals the element rule on stacks with partial blocks, at any thread count",
          "[e2m1_to_e4m3]") {
  std::mt19937 rng(2200);
  for (auto const& g : {cv::block_grid{1, 256, 512, {128, 128}}, cv::block_grid{3, 200, 160, {128, 128}},
                        cv::block_grid{2, 130, 96, {32, 32}}, cv::block_grid{1, 5, 64, {1, 128}}}) {
    INFO(g.groups << " x " << g.n << " x " << g.k << " in " << g.block.n << " x " << g.block.k);
    for (int spread : {0, 7, 14, 17}) {
      auto [x, sc] = random_mxfp4(g, spread, rng);
      if (spread == 17) {
        // past 2^14: keep it exact by zeroing the codes of every group more than 8 below the top
        for (std::size_t i = 0; i < sc.size(); ++i) {
          if (sc[i] < 100 + 17 - 14) {
            std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(i * 16), 16, std::uint8_t{0});
          }
        }
      }
      cast_out const want = reference(x, sc, g);
      for (int threads : {1, 2, 3}) {
        cast_out const got = run(x, sc, g, threads);
        CHECK(got.q == want.q);
        CHECK(got.s == want.s);
      }
      qtl::x86::scoped_level_cap const cap(qtl::x86::level::portable);
      cast_out const portable = run(x, sc, g);
      CHECK(portable.q == want.q);
      CHECK(portable.s == want.s);
    }
  }
}

TEST_CASE("cast_e2m1fn_to_e4m3fn checks its sizes", "[e2m1_to_e4m3]") {
  bytes x(64), sc(4), q(128), s(1), q112(112), q127(127), s2(2), q64(64);
  CHECK_NOTHROW(cv::cast_e2m1fn_to_e4m3fn(x, sc, {1, 1, 128, {128, 128}}, q, s));
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(bytes(16), bytes(2), {1, 1, 64, {128, 48}}, q64, s), qtl::shape_error);
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(bytes(56), bytes(4), {1, 1, 112, {128, 128}}, q112, s), qtl::shape_error);
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(bytes(63), sc, {1, 1, 128, {128, 128}}, q, s), qtl::shape_error);
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(x, bytes(3), {1, 1, 128, {128, 128}}, q, s), qtl::shape_error);
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(x, sc, {1, 1, 128, {128, 128}}, q127, s), qtl::shape_error);
  CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(x, sc, {1, 1, 128, {128, 128}}, q, s2), qtl::shape_error);
}

TEST_CASE("cast_e2m1fn_to_e4m3fn reproduces every golden cast-e2m1fn-to-e4m3fn case", "[e2m1_to_e4m3][golden]") {
  for (auto const& [name, c] : qtl_test::e2m1::golden_casts()) {
    INFO(name);
    cast_out const got = run(c.x, c.scale, c.grid);
    CHECK(got.q == c.want_q);
    CHECK(got.s == c.want_s);
  }
}

TEST_CASE("deepgemm_post_process_e8m0 reproduces every golden deepgemm-post-process-e8m0 case",
          "[deepgemm_e8m0][golden]") {
  auto const cases = qtl_test::e2m1::golden_dg_packs();
  REQUIRE(cases.size() >= 4);
  for (auto const& [name, c] : cases) {
    INFO(name);
    std::vector<std::int32_t> got(static_cast<std::size_t>(c.layout.words()), 0x5A5A5A5A);
    cv::deepgemm_post_process_e8m0(c.scale, c.layout, got);
    CHECK(got == c.want);
  }
}

TEST_CASE("deepgemm_post_process_e8m0 packs as deepgemm_pack_ue8m0 packs the upcast codes", "[deepgemm_e8m0]") {
  std::mt19937 rng(2204);
  for (auto const& [groups, n, k] :
       {std::array<std::int64_t, 3>{1, 1, 1}, {1, 130, 300}, {3, 257, 1000}, {2, 4, 129}}) {
    auto const l = cv::deepgemm_post_process_layout(groups, n, k);
    CHECK(l.k_blocks == (k + 127) / 128);
    bytes sc(static_cast<std::size_t>(groups * l.scale_rows() * l.k_blocks));
    std::vector<float> up(sc.size());
    for (std::size_t i = 0; i < sc.size(); ++i) {
      sc[i] = static_cast<std::uint8_t>(1 + rng() % 254);
      up[i] = cv::ue8m0_decode(sc[i]);  // vLLM's _upcast_e8m0_to_fp32
    }
    std::vector<std::int32_t> a(static_cast<std::size_t>(l.words())), b(a.size());
    cv::deepgemm_post_process_e8m0(sc, l, a);
    cv::deepgemm_pack_ue8m0(up, l, b);
    CHECK(a == b);
  }
}

TEST_CASE("deepgemm_post_process_layout takes the shapes vLLM's bmm view takes", "[deepgemm_e8m0]") {
  auto const wo_a = cv::deepgemm_post_process_layout(1, 8192, 4096, 8);  // V4-Flash: 8 groups of 1024 rows
  CHECK(wo_a.groups == 8);
  CHECK(wo_a.mn == 1024);
  CHECK(wo_a.k_blocks == 32);
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(1, 1000, 512, 4), qtl::shape_error);  // N % B
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(1, 768, 512, 4), qtl::shape_error);   // N/B = 192
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(1, 1024, 500, 4), qtl::shape_error);  // K % 128
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(2, 1024, 512, 4), qtl::shape_error);  // a stack
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(1, 0, 512), qtl::shape_error);
  CHECK_THROWS_AS(cv::deepgemm_post_process_layout(1, 128, 128, -1), qtl::shape_error);
}

TEST_CASE("deepgemm_post_process_e8m0 refuses codes 0 and 255 and wrong sizes, writing nothing", "[deepgemm_e8m0]") {
  auto const l = cv::deepgemm_post_process_layout(1, 256, 512);
  for (std::uint8_t const bad : {std::uint8_t{0}, std::uint8_t{255}}) {
    bytes sc(8, 127);
    sc[5] = bad;
    std::vector<std::int32_t> out(static_cast<std::size_t>(l.words()), 7);
    try {
      cv::deepgemm_post_process_e8m0(sc, l, out);
      FAIL("accepted code " << int(bad));
    } catch (qtl::value_error const& e) {
      CHECK_THAT(e.what(), Catch::Contains("scale 5 (E8M0 code " + std::to_string(bad)));
    }
    CHECK(out == std::vector<std::int32_t>(out.size(), 7));
  }
  std::vector<std::int32_t> out(static_cast<std::size_t>(l.words()));
  CHECK_THROWS_AS(cv::deepgemm_post_process_e8m0(bytes(7, 127), l, out), qtl::shape_error);
  std::vector<std::int32_t> short_out(out.size() - 1);
  CHECK_THROWS_AS(cv::deepgemm_post_process_e8m0(bytes(8, 127), l, short_out), qtl::shape_error);
}

TEST_CASE("mxfp4_to_bf16 is block_dequantize<mxfp4> to bf16 under every scale code, executor and portable loop",
          "[e2m1_to_bf16]") {
  std::mt19937 rng(2211);
  std::int64_t const rows = 256, k = 96;  // 768 groups: every scale code three times
  bytes x(static_cast<std::size_t>(rows * k / 2)), sc(static_cast<std::size_t>(rows * k / 32));
  for (auto& b : x) b = static_cast<std::uint8_t>(rng());
  for (std::size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<std::uint8_t>(i % 256);
  std::vector<qtl::bfloat16_t> want(static_cast<std::size_t>(rows * k));
  qtl::block_dequantize<qtl::mxfp4>(
      qtl::make_view(reinterpret_cast<qtl::float4_e2m1x2_t const*>(x.data()), rows, k / 2),
      std::span(reinterpret_cast<qtl::float8_e8m0fnu_t const*>(sc.data()), sc.size()), 1.0f,
      qtl::make_view(want.data(), rows, k));
  auto bits = [](std::vector<qtl::bfloat16_t> const& v) {
    std::vector<std::uint16_t> b(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i].bits;
    return b;
  };
  for (bool const portable : {false, true}) {
    INFO("portable " << portable);
    std::optional<qtl::x86::scoped_level_cap> cap;
    if (portable) cap.emplace(qtl::x86::level::portable);
    std::vector<qtl::bfloat16_t> got(want.size());
    CHECK_FALSE(cv::mxfp4_to_bf16(x, sc, got));  // codes 253..255 are among the scales
    CHECK(bits(got) == bits(want));
  }
  // the exactness flag: codes up to 252 exact for every e2m1 code, 253.. not
  auto const& t = cv::e2m1_bf16_table::get();
  for (int e = 0; e < 256; ++e) {
    CHECK(t.exact[static_cast<std::size_t>(e)] == (e <= 252));
  }
  bytes low(sc.size());
  for (std::size_t i = 0; i < low.size(); ++i) low[i] = static_cast<std::uint8_t>(i % 253);
  std::vector<qtl::bfloat16_t> got(want.size());
  CHECK(cv::mxfp4_to_bf16(x, low, got));
  CHECK_THROWS_AS(cv::mxfp4_to_bf16(x, bytes(sc.size() - 1), got), qtl::shape_error);
}
