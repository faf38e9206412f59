// Tests of qtl/moe.hpp: half swaps (involutions, every dimension, errors), the trtllm-gen row
// permutations (docs/spec/blockscale.md §8.2/§8.3 vectors, bijections), and the FP4 MoE weight preparation
// against a straightforward implementation written here from the formulas (flashinfer's
// source->destination block map inverted, the gated reorder vector, composition, the 6-D permute).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>

#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>

#include "test_data.hpp"

namespace {

using qtl_test::random_bytes;

using qtl::index_t;

bool is_bijection(std::vector<std::int32_t> const& p) {
  std::vector<std::int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<std::int32_t>(i)) {
      return false;
    }
  }
  return true;
}

// --- the oracle, from the formulas of docs/spec/blockscale.md §4 ---------------------------------
// trtllm-gen srcToDstBlk{16,32}RowMap: row r of a block goes to 8 * (r % g) + r / g; the gather
// vector is its inverse.
std::vector<std::int32_t> oracle_shuffle(index_t m, int epilogue_tile_m) {
  int const bs = epilogue_tile_m % 128 == 0 ? 32 : 16;
  int const g = bs / 8;
  std::vector<std::int32_t> gather(static_cast<std::size_t>(m));
  for (index_t blk = 0; blk < m / bs; ++blk) {
    for (int r = 0; r < bs; ++r) {
      int const dst = 8 * (r % g) + r / g;
      gather[static_cast<std::size_t>(blk * bs + dst)] = static_cast<std::int32_t>(blk * bs + r);
    }
  }
  return gather;
}
// get_reorder_rows_for_gated_act_gemm_row_indices, then perm[n] = p0[p1[n]].
std::vector<std::int32_t> oracle_w3w1(index_t m, int epilogue_tile_m, bool gated) {
  std::vector<std::int32_t> p0(static_cast<std::size_t>(m));
  std::iota(p0.begin(), p0.end(), 0);
  if (gated) {
    for (index_t i = 0; i < m / 2; ++i) {
      p0[static_cast<std::size_t>(2 * i)] = static_cast<std::int32_t>(i);
      p0[static_cast<std::size_t>(2 * i + 1)] = static_cast<std::int32_t>(m / 2 + i);
    }
  }
  auto const p1 = oracle_shuffle(m, epilogue_tile_m);
  std::vector<std::int32_t> perm(p1.size());
  for (std::size_t n = 0; n < p1.size(); ++n) {
    perm[n] = p0[static_cast<std::size_t>(p1[n])];
  }
  return perm;
}
// block_scale_interleave of one [M, K] matrix (M % 128 == 0, K % 4 == 0): 6-D reshape
// (M/128, 4, 32, K/4, 4) permuted to (M/128, K/4, 32, 4, 4).
std::vector<std::uint8_t> oracle_interleave(std::uint8_t const* in, index_t m, index_t k) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(m * k));
  std::size_t o = 0;
  for (index_t mt = 0; mt < m / 128; ++mt) {
    for (index_t kt = 0; kt < k / 4; ++kt) {
      for (index_t m0 = 0; m0 < 32; ++m0) {
        for (index_t m1 = 0; m1 < 4; ++m1) {
          for (index_t k0 = 0; k0 < 4; ++k0) {
            out[o++] = in[(mt * 128 + m1 * 32 + m0) * k + kt * 4 + k0];
          }
        }
      }
    }
  }
  return out;
}

struct moe_case {
  std::vector<std::uint8_t> g1w, g1s, g2w, g2s;
};

moe_case oracle_prepare(moe_case const& in, index_t h, index_t i, index_t e, bool gated) {
  index_t const r1 = (gated ? 2 : 1) * i;
  auto const p1 = oracle_w3w1(r1, 128, gated);
  auto const p2 = oracle_shuffle(h, 128);
  moe_case out{std::vector<std::uint8_t>(in.g1w.size()), {}, std::vector<std::uint8_t>(in.g2w.size()), {}};
  std::vector<std::uint8_t> scratch;
  for (index_t x = 0; x < e; ++x) {
    for (index_t n = 0; n < r1; ++n) {
      for (index_t c = 0; c < h / 2; ++c) {
        out.g1w[static_cast<std::size_t>((x * r1 + n) * (h / 2) + c)] =
            in.g1w[static_cast<std::size_t>((x * r1 + p1[static_cast<std::size_t>(n)]) * (h / 2) + c)];
      }
    }
    scratch.assign(static_cast<std::size_t>(r1 * (h / 16)), 0);
    for (index_t n = 0; n < r1; ++n) {
      for (index_t c = 0; c < h / 16; ++c) {
        scratch[static_cast<std::size_t>(n * (h / 16) + c)] =
            in.g1s[static_cast<std::size_t>((x * r1 + p1[static_cast<std::size_t>(n)]) * (h / 16) + c)];
      }
    }
    auto const s1 = oracle_interleave(scratch.data(), r1, h / 16);
    out.g1s.insert(out.g1s.end(), s1.begin(), s1.end());
    for (index_t n = 0; n < h; ++n) {
      for (index_t c = 0; c < i / 2; ++c) {
        out.g2w[static_cast<std::size_t>((x * h + n) * (i / 2) + c)] =
            in.g2w[static_cast<std::size_t>((x * h + p2[static_cast<std::size_t>(n)]) * (i / 2) + c)];
      }
    }
    scratch.assign(static_cast<std::size_t>(h * (i / 16)), 0);
    for (index_t n = 0; n < h; ++n) {
      for (index_t c = 0; c < i / 16; ++c) {
        scratch[static_cast<std::size_t>(n * (i / 16) + c)] =
            in.g2s[static_cast<std::size_t>((x * h + p2[static_cast<std::size_t>(n)]) * (i / 16) + c)];
      }
    }
    auto const s2 = oracle_interleave(scratch.data(), h, i / 16);
    out.g2s.insert(out.g2s.end(), s2.begin(), s2.end());
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------------

TEST_CASE("row shuffles reproduce the vectors of docs/spec/blockscale.md §8.2", "[moe]") {
  auto const s128 = qtl::w2_row_indices<128>(64);
  std::vector<std::int32_t> const want128 = {0, 4, 8,  12, 16, 20, 24, 28, 1, 5, 9,  13, 17, 21, 25, 29,
                                             2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31};
  CHECK(std::vector<std::int32_t>(s128.begin(), s128.begin() + 32) == want128);
  auto const s64 = qtl::w2_row_indices<64>(64);
  std::vector<std::int32_t> const want64 = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
  CHECK(std::vector<std::int32_t>(s64.begin(), s64.begin() + 16) == want64);
  auto const g = qtl::w3w1_row_indices<128>(128, true);
  std::vector<std::int32_t> const want_g = {0,  2,  4,  6,  8,  10, 12, 14, 64, 66, 68, 70, 72, 74,
                                            76, 78, 1,  3,  5,  7,  9,  11, 13, 15, 65, 67, 69, 71,
                                            73, 75, 77, 79, 16, 18, 20, 22, 24, 26, 28, 30};
  CHECK(std::vector<std::int32_t>(g.begin(), g.begin() + 40) == want_g);
  STATIC_REQUIRE(qtl::shuffle_row_source<128>(8) == 1);
  STATIC_REQUIRE(qtl::gated_interleave_source(3, 128) == 65);
}

TEST_CASE("every row permutation is a bijection and equals the oracle", "[moe]") {
  for (index_t m = 0; m <= 1024; m += 32) {
    CAPTURE(m);
    for (bool const gated : {true, false}) {
      auto const p = qtl::w3w1_row_indices<128>(m, gated);
      REQUIRE(is_bijection(p));
      REQUIRE(p == oracle_w3w1(m, 128, gated));
      auto const p64 = qtl::w3w1_row_indices<64>(m, gated);
      REQUIRE(is_bijection(p64));
      REQUIRE(p64 == oracle_w3w1(m, 64, gated));
    }
    REQUIRE(qtl::w2_row_indices<128>(m) == oracle_shuffle(m, 128));
    REQUIRE(qtl::w2_row_indices<192>(m + 16) == oracle_shuffle(m + 16, 192));  // 192 % 128 != 0: 16-row block
  }
  CHECK_THROWS_AS(qtl::w2_row_indices<128>(48), qtl::shape_error);
  CHECK_THROWS_WITH(qtl::w3w1_row_indices<128>(40, true), Catch::Contains("32-row shuffle block"));
}

TEST_CASE("GEMM1 and GEMM2 scale bytes land where docs/spec/blockscale.md §8.3 says", "[moe]") {
  // GEMM1, I = 64, H = 64: scales [128 x 4] with rows [w3; w1]; each byte is tagged by its source.
  index_t const h = 64;
  index_t const i = 64;
  qtl::trtllm_fp4_moe_plan<> const plan({.hidden_size = 128, .intermediate_size = 64, .num_experts = 1});
  auto const& p1 = plan.gemm1_row_indices();
  struct probe {
    int src_row, col, offset;
  };
  // Offsets of the table: (src row, col) -> byte offset in the expert's 128x4 buffer.
  for (auto const [row, col, off] :
       {probe{0, 0, 0}, probe{0, 3, 3}, probe{64, 0, 128}, probe{1, 0, 256}, probe{65, 2, 386}, probe{2, 1, 17},
        probe{31, 0, 372}, probe{32, 0, 8}, probe{63, 3, 383}, probe{127, 3, 511}}) {
    auto const n = std::find(p1.begin(), p1.end(), row) - p1.begin();
    CHECK(qtl::blockscale_offset(n, col, h / 16) == off);
  }
  // GEMM2, H = 128, I = 64.
  auto const& p2 = plan.gemm2_row_indices();
  for (auto const [row, col, off] : {probe{0, 0, 0}, probe{1, 0, 128}, probe{4, 1, 17}, probe{8, 0, 32},
                                     probe{31, 3, 499}, probe{32, 0, 4}, probe{100, 2, 30}, probe{127, 3, 511}}) {
    auto const n = std::find(p2.begin(), p2.end(), row) - p2.begin();
    CHECK(qtl::blockscale_offset(n, col, i / 16) == off);
  }
}

TEST_CASE("prepare_static_weights_for_trtllm_fp4_moe equals the straightforward implementation", "[moe]") {
  struct dims {
    index_t h, i, e;
    bool gated;
  };
  for (auto const d : {dims{128, 64, 3, true}, dims{256, 128, 2, true}, dims{128, 128, 2, false},
                       dims{384, 192, 3, true}, dims{256, 256, 1, false}, dims{128, 64, 0, true}}) {
    CAPTURE(d.h, d.i, d.e, d.gated);
    index_t const r1 = (d.gated ? 2 : 1) * d.i;
    moe_case in;
    in.g1w = random_bytes(static_cast<std::size_t>(d.e * r1 * d.h / 2), 1);
    in.g1s = random_bytes(static_cast<std::size_t>(d.e * r1 * d.h / 16), 2);
    in.g2w = random_bytes(static_cast<std::size_t>(d.e * d.h * d.i / 2), 3);
    in.g2s = random_bytes(static_cast<std::size_t>(d.e * d.h * d.i / 16), 4);
    auto const want = oracle_prepare(in, d.h, d.i, d.e, d.gated);
    moe_case got{std::vector<std::uint8_t>(in.g1w.size()), std::vector<std::uint8_t>(in.g1s.size()),
                 std::vector<std::uint8_t>(in.g2w.size()), std::vector<std::uint8_t>(in.g2s.size())};
    qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const src{
        qtl::make_view(static_cast<std::uint8_t const*>(in.g1w.data()), d.e, r1, d.h / 2),
        qtl::make_view(static_cast<std::uint8_t const*>(in.g1s.data()), d.e, r1, d.h / 16),
        qtl::make_view(static_cast<std::uint8_t const*>(in.g2w.data()), d.e, d.h, d.i / 2),
        qtl::make_view(static_cast<std::uint8_t const*>(in.g2s.data()), d.e, d.h, d.i / 16)};
    qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const dst{
        qtl::make_view(got.g1w.data(), d.e, r1, d.h / 2), qtl::make_view(got.g1s.data(), d.e, r1, d.h / 16),
        qtl::make_view(got.g2w.data(), d.e, d.h, d.i / 2), qtl::make_view(got.g2s.data(), d.e, d.h, d.i / 16)};
    qtl::prepare_static_weights_for_trtllm_fp4_moe(
        {.hidden_size = d.h, .intermediate_size = d.i, .num_experts = d.e, .gated = d.gated}, src, dst);
    CHECK(got.g1w == want.g1w);
    CHECK(got.g1s == want.g1s);
    CHECK(got.g2w == want.g2w);
    CHECK(got.g2s == want.g2s);
  }
}

TEST_CASE("the MoE preparation checks what the reference leaves unchecked", "[moe]") {
  using plan = qtl::trtllm_fp4_moe_plan<>;
  CHECK_THROWS_WITH(plan({.hidden_size = 96, .intermediate_size = 64, .num_experts = 1}),
                    Catch::Contains("hidden_size (96) must be a positive multiple of 128"));
  CHECK_THROWS_WITH(plan({.hidden_size = 128, .intermediate_size = 96, .num_experts = 1}),
                    Catch::Contains("intermediate_size (96) must be a positive multiple of 64"));
  CHECK_THROWS_WITH(plan({.hidden_size = 128, .intermediate_size = 64, .num_experts = 1, .gated = false}),
                    Catch::Contains("multiple of 128 when not gated"));
  CHECK_THROWS_AS(plan({.hidden_size = 128, .intermediate_size = 64, .num_experts = -1}), qtl::shape_error);
  CHECK_THROWS_AS(plan({.hidden_size = 0, .intermediate_size = 64, .num_experts = 1}), qtl::shape_error);

  // Shapes of the tensors: a gemm2_scales with the padded-to-4 column count of a bad I is caught.
  plan const p({.hidden_size = 128, .intermediate_size = 64, .num_experts = 2});
  std::vector<std::uint8_t> buf(1 << 16);
  std::vector<std::uint8_t> out(1 << 16);
  auto const* b = buf.data();
  auto* o = out.data();
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> src{
      qtl::make_view(b, 2, 128, 64), qtl::make_view(b, 2, 128, 8), qtl::make_view(b, 2, 128, 32),
      qtl::make_view(b, 2, 128, 4)};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> dst{
      qtl::make_view(o, 2, 128, 64), qtl::make_view(o + 20000, 2, 128, 8), qtl::make_view(o + 30000, 2, 128, 32),
      qtl::make_view(o + 40000, 2, 128, 4)};
  CHECK_NOTHROW(p.apply(src, dst));
  auto bad = src;
  bad.gemm2_scales = qtl::make_view(b, 2, 128, 5);
  CHECK_THROWS_WITH(p.apply(bad, dst),
                    Catch::Contains("input gemm2_scales has shape [2, 128, 5], expected [2, 128, 4]"));
  auto bad_out = dst;
  bad_out.gemm1_scales.stride[0] = 2048;  // experts not adjacent: the output scales must be contiguous
  CHECK_THROWS_WITH(p.apply(src, bad_out), Catch::Contains("must be contiguous"));
  auto overlapping = dst;
  overlapping.gemm1_weights = qtl::make_view(const_cast<std::uint8_t*>(b), 2, 128, 64);
  CHECK_THROWS_AS(p.apply(src, overlapping), qtl::value_error);
}

// ------------------------------------------------------------------------------------------------

TEST_CASE("swap_w13_to_w31 exchanges the row halves and is an involution", "[moe]") {
  std::vector<int> const x = {0, 1, 2, 3, 4, 5, 6, 7};  // [g0 g1 | u0 u1] rows of 2 columns
  std::vector<int> y(8);
  qtl::swap_w13_to_w31(qtl::make_view(x.data(), 4, 2), qtl::make_view(y.data(), 4, 2));
  CHECK(y == std::vector<int>{4, 5, 6, 7, 0, 1, 2, 3});
  auto const in = random_bytes(3 * 10 * 7, 9);
  std::vector<std::uint8_t> once(in.size());
  std::vector<std::uint8_t> twice(in.size());
  qtl::swap_w13_to_w31(qtl::make_view(in.data(), 3, 10, 7), qtl::make_view(once.data(), 3, 10, 7));
  for (index_t b = 0; b < 3; ++b) {
    for (index_t r = 0; r < 10; ++r) {
      for (index_t c = 0; c < 7; ++c) {
        REQUIRE(once[static_cast<std::size_t>((b * 10 + r) * 7 + c)] ==
                in[static_cast<std::size_t>((b * 10 + (r + 5) % 10) * 7 + c)]);
      }
    }
  }
  qtl::swap_w13_to_w31(qtl::make_view(static_cast<std::uint8_t const*>(once.data()), 3, 10, 7),
                       qtl::make_view(twice.data(), 3, 10, 7));
  CHECK(twice == in);
  std::vector<float> odd(9);
  std::vector<float> odd_out(9);
  CHECK_THROWS_WITH(qtl::swap_w13_to_w31(qtl::make_view(odd.data(), 3, 3), qtl::make_view(odd_out.data(), 3, 3)),
                    Catch::Contains("odd size 3"));
}

TEMPLATE_TEST_CASE_SIG("reorder_w1w3_to_w3w1 swaps weight and scale halves along any dimension", "[moe]",
                       ((int Dim), Dim), -1, -2, -3, 0, 1, 2) {
  constexpr int d = Dim < 0 ? 3 + Dim : Dim;
  index_t const ext[3] = {4, 6, 8};
  index_t sext[3] = {4, 6, 8};
  for (int k = 0; k < 3; ++k) {
    if (k != d) {
      sext[k] = k == 2 ? 1 : sext[k];  // the scale may be narrower except along Dim
    }
  }
  auto const w = random_bytes(4 * 6 * 8, 11);
  std::vector<std::uint16_t> s(static_cast<std::size_t>(sext[0] * sext[1] * sext[2]));
  std::iota(s.begin(), s.end(), std::uint16_t{100});
  std::vector<std::uint8_t> w_out(w.size());
  std::vector<std::uint16_t> s_out(s.size());
  qtl::reorder_w1w3_to_w3w1<Dim>(
      qtl::make_view(w.data(), ext[0], ext[1], ext[2]), qtl::make_view(s.data(), sext[0], sext[1], sext[2]),
      qtl::make_view(w_out.data(), ext[0], ext[1], ext[2]), qtl::make_view(s_out.data(), sext[0], sext[1], sext[2]));
  for (index_t a = 0; a < ext[0]; ++a) {
    for (index_t b = 0; b < ext[1]; ++b) {
      for (index_t c = 0; c < ext[2]; ++c) {
        index_t src[3] = {a, b, c};
        src[d] = (src[d] + ext[d] / 2) % ext[d];
        REQUIRE(w_out[static_cast<std::size_t>((a * ext[1] + b) * ext[2] + c)] ==
                w[static_cast<std::size_t>((src[0] * ext[1] + src[1]) * ext[2] + src[2])]);
      }
    }
  }
  for (index_t a = 0; a < sext[0]; ++a) {
    for (index_t b = 0; b < sext[1]; ++b) {
      for (index_t c = 0; c < sext[2]; ++c) {
        index_t src[3] = {a, b, c};
        src[d] = (src[d] + sext[d] / 2) % sext[d];
        REQUIRE(s_out[static_cast<std::size_t>((a * sext[1] + b) * sext[2] + c)] ==
                s[static_cast<std::size_t>((src[0] * sext[1] + src[1]) * sext[2] + src[2])]);
      }
    }
  }
  // Involution.
  std::vector<std::uint8_t> w_back(w.size());
  std::vector<std::uint16_t> s_back(s.size());
  qtl::reorder_w1w3_to_w3w1<Dim>(
      qtl::make_view(w_out.data(), ext[0], ext[1], ext[2]), qtl::make_view(s_out.data(), sext[0], sext[1], sext[2]),
      qtl::make_view(w_back.data(), ext[0], ext[1], ext[2]), qtl::make_view(s_back.data(), sext[0], sext[1], sext[2]));
  CHECK(w_back == w);
  CHECK(s_back == s);
}

TEST_CASE("reorder_w1w3_to_w3w1 rejects a scale split differently from the weight", "[moe]") {
  std::vector<std::uint8_t> w(2 * 8 * 4);
  std::vector<std::uint8_t> w_out(w.size());
  std::vector<float> s(2 * 6 * 1);
  std::vector<float> s_out(s.size());
  CHECK_THROWS_WITH(
      qtl::reorder_w1w3_to_w3w1(qtl::make_view(w.data(), 2, 8, 4), qtl::make_view(s.data(), 2, 6, 1),
                                qtl::make_view(w_out.data(), 2, 8, 4), qtl::make_view(s_out.data(), 2, 6, 1)),
      Catch::Contains("scale has size 6 along dimension -2 but weight has 8"));
  std::vector<float> s2(2 * 8);
  std::vector<float> s2_out(2 * 8);
  CHECK_THROWS_AS(
      qtl::reorder_w1w3_to_w3w1(qtl::make_view(w.data(), 2, 8, 4), qtl::make_view(s2.data(), 2, 8, 1),
                                qtl::make_view(w_out.data(), 2, 8, 4), qtl::make_view(s2_out.data(), 2, 4, 2)),
      qtl::shape_error);
}

// ------------------------------------------------------------------------------------------------
// Golden cases (outputs of sglang's swap_w13_to_w31 and reorder_w1w3_to_w3w1 themselves)
// ------------------------------------------------------------------------------------------------

namespace {

// Elements of 1, 2, 4 or 8 bytes as unsigned words: the half swaps only move elements.
template <class F>
void with_element_size(std::size_t size, F&& f) {
  switch (size) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    case 4: return f(std::uint32_t{});
    case 8: return f(std::uint64_t{});
    default: FAIL("unexpected element size " << size);
  }
}

template <class T>
std::vector<T> words_of(qtl::io::tensor_info const& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

template <class T>
qtl::view3d<T> as_view3d(std::vector<T>& v, std::vector<std::int64_t> const& shape) {
  // [..., R, C] with the leading dims flattened (rank 2 gets a batch of 1).
  index_t lead = 1;
  for (std::size_t d = 0; d + 2 < shape.size(); ++d) {
    lead *= shape[d];
  }
  return qtl::make_view(v.data(), lead, shape[shape.size() - 2], shape[shape.size() - 1]);
}

}  // namespace

TEST_CASE("swap_w13_to_w31 reproduces every golden swap-w13-to-w31 case", "[moe][golden]") {
  for (auto const& c : qtl::test::golden_cases("swap-w13-to-w31")) {
    INFO(c.name);
    auto const& x = c.in.at("x");
    auto const& want = c.expected.at("x");
    REQUIRE(c.expected.tensors().size() == 1);
    REQUIRE(x.shape.size() >= 2);
    CHECK(want.type == x.type);
    CHECK(want.shape == x.shape);
    with_element_size(qtl::io::dtype_size(x.type), [&](auto word) {
      using T = decltype(word);
      auto in = words_of<T>(x);
      std::vector<T> out(in.size());
      qtl::swap_w13_to_w31(as_view3d(in, x.shape), as_view3d(out, x.shape));
      CHECK(out == words_of<T>(want));
    });
  }
}

TEST_CASE("reorder_w1w3_to_w3w1 reproduces every golden reorder-w1w3-to-w3w1 case", "[moe][golden]") {
  for (auto const& c : qtl::test::golden_cases("reorder-w1w3-to-w3w1")) {
    INFO(c.name);
    REQUIRE(c.params.at("dim").get<int>() == -2);  // the only dim the cases use; others are tested above
    auto const& w = c.in.at("weight");
    auto const& s = c.in.at("scale");
    auto const& want_w = c.expected.at("weight");
    auto const& want_s = c.expected.at("scale");
    REQUIRE(c.expected.tensors().size() == 2);
    REQUIRE(w.shape.size() == 3);
    REQUIRE(s.shape.size() == 3);
    CHECK(want_w.type == w.type);
    CHECK(want_s.type == s.type);
    CHECK(want_w.shape == w.shape);
    CHECK(want_s.shape == s.shape);
    with_element_size(qtl::io::dtype_size(w.type), [&](auto wword) {
      with_element_size(qtl::io::dtype_size(s.type), [&](auto sword) {
        using W = decltype(wword);
        using S = decltype(sword);
        auto win = words_of<W>(w);
        auto sin = words_of<S>(s);
        std::vector<W> wout(win.size());
        std::vector<S> sout(sin.size());
        qtl::reorder_w1w3_to_w3w1<-2>(as_view3d(win, w.shape), as_view3d(sin, s.shape), as_view3d(wout, w.shape),
                                      as_view3d(sout, s.shape));
        CHECK(wout == words_of<W>(want_w));
        CHECK(sout == words_of<S>(want_s));
      });
    });
  }
}

// ------------------------------------------------------------------------------------------------
// Golden cases of vLLM's FlashInfer MoE preparations (test/data/golden/make_fi_moe_cases.py)
// ------------------------------------------------------------------------------------------------

namespace {

using moe_bytes = std::vector<std::uint8_t>;

// The four MoE tensors of a golden file, in the order of trtllm_fp4_moe_tensors, as byte vectors.
struct moe_set {
  moe_bytes b[4];
  std::vector<std::int64_t> shape[4];

  moe_set(qtl::io::safetensors_file const& f, char const* const (&names)[4]) {
    for (int k = 0; k < 4; ++k) {
      auto const& t = f.at(names[k]);
      b[k] = words_of<std::uint8_t>(t);
      shape[k] = t.shape;
    }
  }
  explicit moe_set(qtl::fp4_moe_padding const& x) {
    for (int k = 0; k < 4; ++k) {
      auto const& t = x.extents[k];
      shape[k] = {t[0], t[1], t[2]};
      b[k].assign(static_cast<std::size_t>(t[0] * t[1] * t[2]), 0xAB);  // not zero: the padding is written
    }
  }
  template <class T>
  qtl::trtllm_fp4_moe_tensors<T, T> views() {
    auto v = [&](int k) { return as_view3d(b[k], shape[k]); };
    return {v(0), v(1), v(2), v(3)};
  }
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> cviews() {
    auto const m = views<std::uint8_t>();
    return {m.gemm1_weights, m.gemm1_scales, m.gemm2_weights, m.gemm2_scales};
  }
};

constexpr char const* fi_names[4] = {"w13", "w13_scale", "w2", "w2_scale"};

std::int64_t golden_scalar(qtl::io::safetensors_file const& f, char const* name) {
  auto const v = qtl::test::tensor_values<std::int64_t>(f, name);
  REQUIRE(v.size() == 1);
  return v[0];
}

}  // namespace

TEST_CASE("prepare_static_weights_for_trtllm_fp4_moe reproduces vLLM's, gated and not", "[moe][golden]") {
  constexpr char const* names[4] = {"gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"};
  constexpr char const* out_names[4] = {"gemm1_weights_fp4_shuffled", "gemm1_scales_fp4_shuffled",
                                        "gemm2_weights_fp4_shuffled", "gemm2_scales_fp4_shuffled"};
  int gated_cases = 0;
  int plain_cases = 0;
  for (auto const& c : qtl::test::golden_cases("prepare-trtllm-fp4-moe")) {
    INFO(c.name);
    bool const gated = !c.params.value("no-gated", false);
    (gated ? gated_cases : plain_cases) += 1;
    qtl::trtllm_fp4_moe_shape const shape{.hidden_size = c.params.at("hidden-size").get<index_t>(),
                                          .intermediate_size = c.params.at("intermediate-size").get<index_t>(),
                                          .num_experts = c.params.at("num-experts").get<index_t>(),
                                          .gated = gated};
    moe_set in(c.in, names);
    moe_set want(c.expected, out_names);
    moe_set got(c.expected, out_names);
    for (auto& b : got.b) {
      std::fill(b.begin(), b.end(), std::uint8_t{0});
    }
    qtl::prepare_static_weights_for_trtllm_fp4_moe(shape, in.cviews(), got.views<std::uint8_t>());
    for (int k = 0; k < 4; ++k) {
      CHECK(got.b[k] == want.b[k]);
    }
  }
  CHECK(gated_cases >= 2);
  CHECK(plain_cases >= 2);
}

namespace {

// The golden cases of align-fp4-moe-hidden-dim-for-fi (`hidden`) or align-fp4-moe-weights-for-fi.
void check_align_golden(bool hidden) {
  for (auto const& c :
       qtl::test::golden_cases(hidden ? "align-fp4-moe-hidden-dim-for-fi" : "align-fp4-moe-weights-for-fi")) {
    INFO(c.name);
    bool const gated = c.params.value("is-act-and-mul", false);
    index_t const a = c.params.at("min-alignment").get<index_t>();
    moe_set in(c.in, fi_names);
    moe_set want(c.expected, fi_names);
    moe_set got(hidden ? qtl::align_fp4_moe_hidden_dim_for_fi_padding(in.cviews(), a)
                       : qtl::align_fp4_moe_weights_for_fi_padding(in.cviews(), gated, a));
    index_t const padded = hidden ? qtl::align_fp4_moe_hidden_dim_for_fi(in.cviews(), got.views<std::uint8_t>(), a)
                                  : qtl::align_fp4_moe_weights_for_fi(in.cviews(), got.views<std::uint8_t>(), gated, a);
    CHECK(padded == golden_scalar(c.expected, hidden ? "padded_hidden_size" : "padded_intermediate"));
    for (int k = 0; k < 4; ++k) {
      CHECK(got.shape[k] == want.shape[k]);
      CHECK(got.b[k] == want.b[k]);
    }
  }
}

}  // namespace

TEST_CASE("align_fp4_moe_weights_for_fi reproduces vLLM's", "[moe][golden]") { check_align_golden(false); }

TEST_CASE("align_fp4_moe_hidden_dim_for_fi reproduces vLLM's", "[moe][golden]") { check_align_golden(true); }

TEST_CASE("pad_nvfp4_weight_for_cutlass reproduces vLLM's", "[moe][golden]") {
  for (auto const& c : qtl::test::golden_cases("pad-nvfp4-weight-for-cutlass")) {
    INFO(c.name);
    index_t const a = c.params.at("alignment").get<index_t>();
    auto const& w = c.in.at("weight");
    auto const& want = c.expected.at("weight");
    auto const in = words_of<std::uint8_t>(w);
    auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(w.shape[0], w.shape[1], a);
    CHECK(std::vector<std::int64_t>{p.rows, p.col_bytes} == want.shape);
    std::vector<std::uint8_t> out(static_cast<std::size_t>(p.rows * p.col_bytes), 0xAB);
    CHECK(qtl::pad_nvfp4_weight_for_cutlass(qtl::make_view(in.data(), w.shape[0], w.shape[1]),
                                            qtl::make_view(out.data(), p.rows, p.col_bytes),
                                            a) == golden_scalar(c.expected, "weights_padding_bytes"));
    CHECK(out == words_of<std::uint8_t>(want));
  }
}

TEST_CASE("the FP4 padding ops refuse what they cannot pad", "[moe]") {
  // w13 [1, 2I, H/2] with H = 32, I = 48 (gated), w2 [1, H, I/2]
  moe_set in(qtl::fp4_moe_padding::of(1, 96, 32, 48));
  moe_set out(qtl::align_fp4_moe_weights_for_fi_padding(in.cviews(), true, 64));
  CHECK_THROWS_WITH(qtl::align_fp4_moe_weights_for_fi(in.cviews(), out.views<std::uint8_t>(), true, 0),
                    Catch::Contains("min_alignment (0) must be positive"));
  // the output padded to 64, the call asking for 128
  CHECK_THROWS_WITH(qtl::align_fp4_moe_weights_for_fi(in.cviews(), out.views<std::uint8_t>(), true, 128),
                    Catch::Contains("output w13 has shape"));
  // not gated: w13 must then have I rows, it has 2I
  CHECK_THROWS_WITH(qtl::align_fp4_moe_weights_for_fi(in.cviews(), out.views<std::uint8_t>(), false, 64),
                    Catch::Contains("input w13 has shape"));
  // the output over its own input
  auto const self = in.views<std::uint8_t>();
  CHECK_THROWS_AS(qtl::align_fp4_moe_weights_for_fi(in.cviews(), self, true, 16), qtl::value_error);
  // an intermediate size that is no multiple of 16: w2 [1, 32, 4] says I = 8
  moe_set odd(qtl::fp4_moe_padding::of(1, 16, 32, 8));
  CHECK_THROWS_WITH(qtl::align_fp4_moe_hidden_dim_for_fi(odd.cviews(), out.views<std::uint8_t>(), 256),
                    Catch::Contains("must be multiples of 16"));
  std::vector<std::uint8_t> w(10 * 3), o(32 * 16);
  CHECK_THROWS_WITH(qtl::pad_nvfp4_weight_for_cutlass(qtl::make_view(std::as_const(w).data(), 10, 3),
                                                      qtl::make_view(o.data(), 32, 8), 32),
                    Catch::Contains("output weight has shape"));
  CHECK_THROWS_WITH(qtl::pad_nvfp4_weight_for_cutlass_shape(10, 3, -32), Catch::Contains("must be positive"));
}

TEST_CASE("the FP4 padding ops pad by the row map of padded_row_source", "[moe]") {
  STATIC_REQUIRE(qtl::padded_row_source(2, 3, 4) == 2);
  STATIC_REQUIRE(qtl::padded_row_source(3, 3, 4) == -1);
  STATIC_REQUIRE(qtl::padded_row_source(4, 3, 4) == 3);
  STATIC_REQUIRE(qtl::padded_row_source(7, 3, 4) == -1);
  STATIC_REQUIRE(qtl::round_up(176, 64) == 192);
  STATIC_REQUIRE(qtl::round_up(192, 64) == 192);
  // pad_nvfp4_weight_for_cutlass: 7 bytes = 14 FP4 columns, to 16 columns: one byte more
  auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(50, 7, 16);
  CHECK(p.rows == 64);
  CHECK(p.col_bytes == 8);
  CHECK(p.padding_bytes == 1);
}

TEST_CASE("pad_nvfp4_weight_for_cutlass past the streaming-store size equals the plain loop", "[moe]") {
  // [4100, 2044] -> [4128, 2048]: 8.4 MB of output, past detail::stream_store_bytes, rows whose last
  // 16 bytes mix input and zeros; 64-byte aligned output (streamed) and 1 byte past (memcpy'd).
  index_t const n = 4100;
  index_t const kb = 2044;
  auto const w = random_bytes(static_cast<std::size_t>(n * kb), 34);
  auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(n, kb, 32);
  REQUIRE(p.rows * p.col_bytes >= qtl::detail::stream_store_bytes);
  std::vector<std::uint8_t> want(static_cast<std::size_t>(p.rows * p.col_bytes), 0);
  for (index_t r = 0; r < n; ++r) {
    std::memcpy(&want[static_cast<std::size_t>(r * p.col_bytes)], &w[static_cast<std::size_t>(r * kb)],
                static_cast<std::size_t>(kb));
  }
  for (std::size_t const offset : {std::size_t{0}, std::size_t{1}}) {
    CAPTURE(offset);
    std::vector<std::uint8_t> buf(want.size() + 64 + offset, 0xAB);
    auto* const base = buf.data() + (64 - reinterpret_cast<std::uintptr_t>(buf.data()) % 64) % 64 + offset;
    qtl::pad_nvfp4_weight_for_cutlass(qtl::make_view(w.data(), n, kb), qtl::make_view(base, p.rows, p.col_bytes));
    CHECK(std::memcmp(base, want.data(), want.size()) == 0);
  }
}

// ------------------------------------------------------------------------------------------------
// CuteDSL row orders
// ------------------------------------------------------------------------------------------------

namespace {

// The bytes of tensor `t` as [outer, shape[d], inner * element size] (d may be negative).
qtl::view3d<std::uint8_t> split_bytes(std::vector<std::uint8_t>& b, qtl::io::tensor_info const& t, int d) {
  int const rank = static_cast<int>(t.shape.size());
  d = d < 0 ? d + rank : d;
  index_t outer = 1;
  index_t inner = static_cast<index_t>(qtl::io::dtype_size(t.type));
  for (int k = 0; k < rank; ++k) {
    if (k < d) {
      outer *= t.shape[static_cast<std::size_t>(k)];
    } else if (k > d) {
      inner *= t.shape[static_cast<std::size_t>(k)];
    }
  }
  return qtl::make_view(b.data(), outer, t.shape[static_cast<std::size_t>(d)], inner);
}

}  // namespace

TEST_CASE("interleave_linear_and_gate reproduces vLLM's", "[moe][golden]") {
  for (auto const& c : qtl::test::golden_cases("interleave-linear-and-gate")) {
    INFO(c.name);
    auto const& x = c.in.at("x");
    auto in = words_of<std::uint8_t>(x);
    std::vector<std::uint8_t> out(in.size(), 0xAB);
    int const d = c.params.at("dim").get<int>();
    auto const iv = split_bytes(in, x, d);
    qtl::interleave_linear_and_gate(qtl::view3d<std::uint8_t const>(iv), split_bytes(out, x, d),
                                    c.params.at("group-size").get<index_t>());
    CHECK(out == words_of<std::uint8_t>(c.expected.at("x")));
  }
}

TEST_CASE("reorder_w13_to_w31_for_flashinfer_cutedsl reproduces vLLM's", "[moe][golden]") {
  for (auto const& c : qtl::test::golden_cases("reorder-w13-to-w31-for-flashinfer-cutedsl")) {
    INFO(c.name);
    auto const& w = c.in.at("w13");
    auto const& s = c.in.at("w13_scale");
    auto wi = words_of<std::uint8_t>(w);
    auto si = words_of<std::uint8_t>(s);
    std::vector<std::uint8_t> wo(wi.size(), 0xAB), so(si.size(), 0xAB);
    qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(
        c.params.value("swigluoai", false), qtl::view3d<std::uint8_t const>(as_view3d(wi, w.shape)),
        qtl::view3d<std::uint8_t const>(as_view3d(si, s.shape)), as_view3d(wo, w.shape), as_view3d(so, s.shape));
    CHECK(wo == words_of<std::uint8_t>(c.expected.at("w13")));
    CHECK(so == words_of<std::uint8_t>(c.expected.at("w13_scale")));
  }
}

TEST_CASE("the CuteDSL row orders: their maps, and what they refuse", "[moe]") {
  // group 2 over 8: [l0 l1 g0 g1 l2 l3 g2 g3] from [l0 l1 l2 l3 | g0 g1 g2 g3]
  constexpr index_t want[8] = {0, 1, 4, 5, 2, 3, 6, 7};
  for (index_t n = 0; n < 8; ++n) {
    CHECK(qtl::interleave_linear_and_gate_source(n, 8, 2) == want[n]);
  }
  // gpt-oss [g0 u0 g1 u1 g2 u2] -> [u0 u1 u2 g0 g1 g2]
  constexpr index_t oai[6] = {1, 3, 5, 0, 2, 4};
  for (index_t n = 0; n < 6; ++n) {
    CHECK(qtl::w13_to_w31_source(n, 6, true) == oai[n]);
    CHECK(qtl::w13_to_w31_source(n, 6, false) == (n + 3) % 6);
  }
  std::vector<std::uint8_t> a(2 * 96 * 4), b(a.size());
  auto const in = qtl::make_view(std::as_const(a).data(), 2, 96, 4);
  CHECK_THROWS_WITH(qtl::interleave_linear_and_gate(in, qtl::make_view(b.data(), 2, 96, 4), 64),
                    Catch::Contains("must be divisible by 128"));
  CHECK_THROWS_WITH(qtl::interleave_linear_and_gate(in, qtl::make_view(b.data(), 2, 96, 4), 0),
                    Catch::Contains("must be positive"));
  CHECK_THROWS_AS(qtl::interleave_linear_and_gate(in, qtl::make_view(a.data(), 2, 96, 4), 16), qtl::value_error);
  std::vector<std::uint8_t> odd(3 * 4), odd_out(odd.size());
  auto const oin = qtl::make_view(std::as_const(odd).data(), 1, 3, 4);
  CHECK_THROWS_WITH(qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(
                        true, oin, oin, qtl::make_view(odd_out.data(), 1, 3, 4), qtl::make_view(b.data(), 1, 3, 4)),
                    Catch::Contains("odd number of rows"));
}

// ------------------------------------------------------------------------------------------------
// prepare_static_weights_for_trtllm_mxint4_moe
// ------------------------------------------------------------------------------------------------

namespace {

// The four MXINT4 tensors of one layer (scales as 2-byte words), in one buffer each.
struct mxint4_layer {
  std::vector<std::uint8_t> g1w, g2w;
  std::vector<std::uint16_t> g1s, g2s;
};

template <class L>
auto mxint4_views(L& l, index_t e, index_t h, index_t i) {
  using W = std::remove_reference_t<decltype(*l.g1w.data())>;
  using S = std::remove_reference_t<decltype(*l.g1s.data())>;
  return qtl::trtllm_fp4_moe_tensors<W, S>{
      qtl::make_view(l.g1w.data(), e, 2 * i, h / 2), qtl::make_view(l.g1s.data(), e, 2 * i, h / 32),
      qtl::make_view(l.g2w.data(), e, h, i / 2), qtl::make_view(l.g2s.data(), e, h, i / 32)};
}

mxint4_layer random_mxint4(index_t e, index_t h, index_t i, std::uint32_t seed) {
  std::mt19937 rng(seed);
  mxint4_layer l{random_bytes(static_cast<std::size_t>(e * 2 * i * h / 2), seed),
                 random_bytes(static_cast<std::size_t>(e * h * i / 2), seed + 1),
                 std::vector<std::uint16_t>(static_cast<std::size_t>(e * 2 * i * h / 32)),
                 std::vector<std::uint16_t>(static_cast<std::size_t>(e * h * i / 32))};
  for (auto& s : l.g1s) s = static_cast<std::uint16_t>(rng());
  for (auto& s : l.g2s) s = static_cast<std::uint16_t>(rng());
  return l;
}

// vLLM's steps one at a time, per expert: nibbles - 8, [w1; w3] -> [w3; w1], the rows gathered by
// oracle_w3w1 / oracle_shuffle, then [R, K] -> [K/128, R, 128] and the 6-D 128x4 permute.
mxint4_layer oracle_mxint4(mxint4_layer const& in, index_t e, index_t h, index_t i, bool uint4b8) {
  mxint4_layer out{{}, {}, {}, {}};
  auto const gemm = [&](std::vector<std::uint8_t> const& w, std::vector<std::uint16_t> const& s, index_t rows,
                        index_t cols, bool gemm1, std::vector<std::uint8_t>& wo, std::vector<std::uint16_t>& so) {
    auto const perm = gemm1 ? oracle_w3w1(rows, 128, true) : oracle_shuffle(rows, 128);
    index_t const sc = cols / 16;
    for (index_t x = 0; x < e; ++x) {
      std::vector<std::uint8_t> rw(static_cast<std::size_t>(rows * cols));
      std::vector<std::uint16_t> rs(static_cast<std::size_t>(rows * sc));
      for (index_t n = 0; n < rows; ++n) {
        index_t r = perm[static_cast<std::size_t>(n)];
        if (gemm1) {
          r = r < rows / 2 ? r + rows / 2 : r - rows / 2;  // the row of [w3; w1] in [w1; w3]
        }
        for (index_t c = 0; c < cols; ++c) {
          auto const b = w[static_cast<std::size_t>((x * rows + r) * cols + c)];
          int const lo = ((b & 0xF) - (uint4b8 ? 8 : 0)) & 0xF;
          int const hi = ((b >> 4) - (uint4b8 ? 8 : 0)) & 0xF;
          rw[static_cast<std::size_t>(n * cols + c)] = static_cast<std::uint8_t>(lo | hi << 4);
        }
        for (index_t c = 0; c < sc; ++c) {
          rs[static_cast<std::size_t>(n * sc + c)] = s[static_cast<std::size_t>((x * rows + r) * sc + c)];
        }
      }
      for (index_t kb = 0; kb < cols / 128; ++kb) {
        for (index_t n = 0; n < rows; ++n) {
          for (index_t c = 0; c < 128; ++c) {
            wo.push_back(rw[static_cast<std::size_t>(n * cols + kb * 128 + c)]);
          }
        }
      }
      for (index_t mt = 0; mt < rows / 128; ++mt) {
        for (index_t kt = 0; kt < sc / 4; ++kt) {
          for (index_t m0 = 0; m0 < 32; ++m0) {
            for (index_t m1 = 0; m1 < 4; ++m1) {
              for (index_t k0 = 0; k0 < 4; ++k0) {
                so.push_back(rs[static_cast<std::size_t>((mt * 128 + m1 * 32 + m0) * sc + kt * 4 + k0)]);
              }
            }
          }
        }
      }
    }
  };
  gemm(in.g1w, in.g1s, 2 * i, h / 2, true, out.g1w, out.g1s);
  gemm(in.g2w, in.g2s, h, i / 2, false, out.g2w, out.g2s);
  return out;
}

}  // namespace

TEST_CASE("prepare_static_weights_for_trtllm_mxint4_moe equals vLLM's steps, and its inverse undoes it", "[moe]") {
  for (auto const [e, h, i] : {std::array<index_t, 3>{2, 512, 256}, {1, 256, 768}, {0, 256, 256}}) {
    for (bool const uint4b8 : {true, false}) {
      CAPTURE(e, h, i, uint4b8);
      qtl::trtllm_mxint4_moe_shape const shape{
          .hidden_size = h, .intermediate_size = i, .num_experts = e, .uint4b8 = uint4b8};
      mxint4_layer const in = random_mxint4(e, h, i, static_cast<std::uint32_t>(h + i + e));
      mxint4_layer out{std::vector<std::uint8_t>(in.g1w.size(), 0xAB), std::vector<std::uint8_t>(in.g2w.size(), 0xAB),
                       std::vector<std::uint16_t>(in.g1s.size()), std::vector<std::uint16_t>(in.g2s.size())};
      qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in, e, h, i), mxint4_views(out, e, h, i));
      mxint4_layer const want = oracle_mxint4(in, e, h, i, uint4b8);
      CHECK(out.g1w == want.g1w);
      CHECK(out.g1s == want.g1s);
      CHECK(out.g2w == want.g2w);
      CHECK(out.g2s == want.g2s);
      mxint4_layer back{std::vector<std::uint8_t>(in.g1w.size()), std::vector<std::uint8_t>(in.g2w.size()),
                        std::vector<std::uint16_t>(in.g1s.size()), std::vector<std::uint16_t>(in.g2s.size())};
      qtl::unprepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(std::as_const(out), e, h, i),
                                                          mxint4_views(back, e, h, i));
      CHECK(back.g1w == in.g1w);
      CHECK(back.g1s == in.g1s);
      CHECK(back.g2w == in.g2w);
      CHECK(back.g2s == in.g2s);
    }
  }
}

TEST_CASE("prepare_static_weights_for_trtllm_mxint4_moe reproduces vLLM's", "[moe][golden]") {
  auto const cases = qtl::test::golden_cases("prepare-trtllm-mxint4-moe");
  REQUIRE(cases.size() >= 2);
  for (auto const& c : cases) {
    INFO(c.name);
    index_t const e = c.shape[0];
    index_t const h = c.shape[1];
    index_t const i = c.shape[2];
    qtl::trtllm_mxint4_moe_shape const shape{.hidden_size = h,
                                             .intermediate_size = i,
                                             .num_experts = e,
                                             .uint4b8 = c.in.at("gemm1_weights").type == qtl::io::dtype::I32};
    mxint4_layer const in{
        words_of<std::uint8_t>(c.in.at("gemm1_weights")), words_of<std::uint8_t>(c.in.at("gemm2_weights")),
        words_of<std::uint16_t>(c.in.at("gemm1_scales")), words_of<std::uint16_t>(c.in.at("gemm2_scales"))};
    mxint4_layer out{std::vector<std::uint8_t>(in.g1w.size()), std::vector<std::uint8_t>(in.g2w.size()),
                     std::vector<std::uint16_t>(in.g1s.size()), std::vector<std::uint16_t>(in.g2s.size())};
    qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in, e, h, i), mxint4_views(out, e, h, i));
    CHECK(out.g1w == words_of<std::uint8_t>(c.expected.at("gemm1_weights")));
    CHECK(out.g1s == words_of<std::uint16_t>(c.expected.at("gemm1_scales")));
    CHECK(out.g2w == words_of<std::uint8_t>(c.expected.at("gemm2_weights")));
    CHECK(out.g2s == words_of<std::uint16_t>(c.expected.at("gemm2_scales")));
  }
}

TEST_CASE("prepare_static_weights_for_trtllm_mxint4_moe refuses what it cannot lay out", "[moe]") {
  index_t const e = 1;
  index_t const h = 256;
  index_t const i = 256;
  mxint4_layer const in = random_mxint4(e, h, i, 7);
  mxint4_layer out = in;
  qtl::trtllm_mxint4_moe_shape shape{.hidden_size = 128, .intermediate_size = i, .num_experts = e};
  CHECK_THROWS_WITH(
      qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in, e, h, i), mxint4_views(out, e, h, i)),
      Catch::Contains("multiples of 256"));
  shape.hidden_size = h;
  auto v = mxint4_views(out, e, h, i);
  v.gemm2_weights.extent[1] = 128;  // a shape the sizes do not give
  CHECK_THROWS_WITH(qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in, e, h, i), v),
                    Catch::Contains("gemm2_weights"));
  v = mxint4_views(out, e, h, i);
  v.gemm1_scales.stride[1] = 2 * (h / 32);  // not contiguous: the prepared buffer is flat
  v.gemm1_scales.stride[0] = 2 * i * 2 * (h / 32);
  std::vector<std::uint16_t> wide(out.g1s.size() * 2);
  v.gemm1_scales.data = wide.data();
  CHECK_THROWS_WITH(qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in, e, h, i), v),
                    Catch::Contains("must be contiguous"));
  auto const alias = mxint4_views(out, e, h, i);
  CHECK_THROWS_AS(
      qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(std::as_const(out), e, h, i), alias),
      qtl::value_error);
}

// ------------------------------------------------------------------------------------------------
// DeepSeek FP8, FP8 per tensor, BF16 and MXFP8 MoE weights
// ------------------------------------------------------------------------------------------------

namespace {

// Per expert of `in` [e, rows, cols]: rows gathered by `perm`, then [rows, cols] -> [cols/bk, rows, bk].
std::vector<std::uint8_t> oracle_rows_blocks(std::vector<std::uint8_t> const& in, index_t e, index_t rows, index_t cols,
                                             std::vector<std::int32_t> const& perm, index_t bk) {
  std::vector<std::uint8_t> out;
  for (index_t x = 0; x < e; ++x) {
    for (index_t kb = 0; kb < cols / bk; ++kb) {
      for (index_t n = 0; n < rows; ++n) {
        for (index_t c = 0; c < bk; ++c) {
          out.push_back(
              in[static_cast<std::size_t>((x * rows + perm[static_cast<std::size_t>(n)]) * cols + kb * bk + c)]);
        }
      }
    }
  }
  return out;
}

std::vector<std::int32_t> plus_half(std::vector<std::int32_t> p) {
  auto const r = static_cast<std::int32_t>(p.size());
  for (auto& v : p) v = (v + r / 2) % r;
  return p;
}

auto cview(std::vector<std::uint8_t> const& v, index_t e, index_t r, index_t c) {
  return qtl::make_view(v.data(), e, r, c);
}
auto mview(std::vector<std::uint8_t>& v, index_t e, index_t r, index_t c) { return qtl::make_view(v.data(), e, r, c); }

}  // namespace

TEST_CASE("the FP8 / BF16 trtllm-gen weight layouts equal the engines' steps and round-trip", "[moe]") {
  index_t const e = 2;
  SECTION("shuffle_deepseek_fp8_moe_weights: tile 64 shuffle, BlockMajorK") {
    index_t const m1 = 48, k1 = 256, m2 = 32, k2 = 128;  // 48: whole 16-row blocks, not 32-row ones
    auto const w13 = random_bytes(static_cast<std::size_t>(e * m1 * k1), 1);
    auto const w2 = random_bytes(static_cast<std::size_t>(e * m2 * k2), 2);
    std::vector<std::uint8_t> o13(w13.size()), o2(w2.size()), back(w13.size());
    qtl::shuffle_deepseek_fp8_moe_weights(cview(w13, e, m1, k1), cview(w2, e, m2, k2), mview(o13, e, m1, k1),
                                          mview(o2, e, m2, k2));
    CHECK(o13 == oracle_rows_blocks(w13, e, m1, k1, oracle_shuffle(m1, 64), 128));
    CHECK(o2 == oracle_rows_blocks(w2, e, m2, k2, oracle_shuffle(m2, 64), 128));
    qtl::trtllm_moe_unshuffle_rows(cview(o13, e, m1, k1), mview(back, e, m1, k1),
                                   {qtl::trtllm_row_map::kind::shuffle, 0, 64}, 128);
    CHECK(back == w13);
    CHECK_THROWS_WITH(qtl::shuffle_deepseek_fp8_moe_weights(cview(w13, e, 40, 2 * k1), cview(w2, e, m2, k2),
                                                            mview(o13, e, 40, 2 * k1), mview(o2, e, m2, k2)),
                      Catch::Contains("w13 has 40 rows") && Catch::Contains("multiple of 16"));
    CHECK_THROWS_WITH(qtl::shuffle_deepseek_fp8_moe_weights(cview(w13, e, 64, 192), cview(w2, e, m2, k2),
                                                            mview(o13, e, 64, 192), mview(o2, e, m2, k2)),
                      Catch::Contains("multiple of block_k 128"));
  }
  SECTION("rotate_weights_for_fi_trtllm_fp8_per_tensor_moe, gated and not") {
    for (bool const gated : {true, false}) {
      index_t const r1 = 64, k1 = 40, r2 = 32, k2 = 24;
      auto const g1 = random_bytes(static_cast<std::size_t>(e * r1 * k1), 3);
      auto const g2 = random_bytes(static_cast<std::size_t>(e * r2 * k2), 4);
      std::vector<std::uint8_t> o1(g1.size()), o2(g2.size());
      qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(cview(g1, e, r1, k1), cview(g2, e, r2, k2), gated,
                                                           mview(o1, e, r1, k1), mview(o2, e, r2, k2));
      CHECK(o1 == oracle_rows_blocks(g1, e, r1, k1, oracle_w3w1(r1, 128, gated), k1));
      CHECK(o2 == oracle_rows_blocks(g2, e, r2, k2, oracle_shuffle(r2, 128), k2));
    }
  }
  SECTION("convert_moe_weights_to_flashinfer_trtllm_block_layout, out of place and in place") {
    for (bool const gated : {true, false}) {
      index_t const r1 = 64, k1 = 256, r2 = 32, k2 = 384;  // bytes of bf16 rows
      auto const w13 = random_bytes(static_cast<std::size_t>(e * r1 * k1), 5);
      auto const w2 = random_bytes(static_cast<std::size_t>(e * r2 * k2), 6);
      std::vector<std::uint8_t> o13(w13.size()), o2(w2.size());
      qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout(cview(w13, e, r1, k1), cview(w2, e, r2, k2), gated,
                                                                 mview(o13, e, r1, k1), mview(o2, e, r2, k2));
      auto const p1 = gated ? plus_half(oracle_w3w1(r1, 128, true)) : oracle_shuffle(r1, 128);
      CHECK(o13 == oracle_rows_blocks(w13, e, r1, k1, p1, 128));
      CHECK(o2 == oracle_rows_blocks(w2, e, r2, k2, oracle_shuffle(r2, 128), 128));
      auto i13 = w13;
      auto i2 = w2;
      qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout_inplace(mview(i13, e, r1, k1), mview(i2, e, r2, k2),
                                                                         gated);
      CHECK(i13 == o13);
      CHECK(i2 == o2);
    }
  }
}

TEST_CASE("shuffle_mxfp8_moe_weights equals the engine's steps", "[moe]") {
  index_t const e = 2, h = 128, i = 128;
  for (bool const gated : {true, false}) {
    CAPTURE(gated);
    index_t const r1 = (gated ? 2 : 1) * i;  // 256 or 128 rows: whole 128-row scale tiles
    auto const w13 = random_bytes(static_cast<std::size_t>(e * r1 * h), 7);
    auto const s13 = random_bytes(static_cast<std::size_t>(e * r1 * h / 32), 8);
    auto const w2 = random_bytes(static_cast<std::size_t>(e * h * i), 9);
    auto const s2 = random_bytes(static_cast<std::size_t>(e * h * i / 32), 10);
    std::vector<std::uint8_t> o13(w13.size()), os13(s13.size()), o2(w2.size()), os2(s2.size());
    using in_t = qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const>;
    using out_t = qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>;
    qtl::shuffle_mxfp8_moe_weights(
        in_t{cview(w13, e, r1, h), cview(s13, e, r1, h / 32), cview(w2, e, h, i), cview(s2, e, h, i / 32)},
        out_t{mview(o13, e, r1, h), mview(os13, e, r1, h / 32), mview(o2, e, h, i), mview(os2, e, h, i / 32)}, gated);
    auto const p1 = oracle_w3w1(r1, 128, gated);
    auto const p2 = oracle_shuffle(h, 128);
    CHECK(o13 == oracle_rows_blocks(w13, e, r1, h, p1, h));
    CHECK(o2 == oracle_rows_blocks(w2, e, h, i, p2, i));
    auto const rows13 = oracle_rows_blocks(s13, e, r1, h / 32, p1, h / 32);
    auto const rows2 = oracle_rows_blocks(s2, e, h, i / 32, p2, i / 32);
    std::vector<std::uint8_t> want13, want2;
    for (index_t x = 0; x < e; ++x) {
      auto const a = oracle_interleave(rows13.data() + x * r1 * (h / 32), r1, h / 32);
      auto const b = oracle_interleave(rows2.data() + x * h * (i / 32), h, i / 32);
      want13.insert(want13.end(), a.begin(), a.end());
      want2.insert(want2.end(), b.begin(), b.end());
    }
    CHECK(os13 == want13);
    CHECK(os2 == want2);
    // QTL's inverse gives the checkpoint's tensors back
    std::vector<std::uint8_t> b13(w13.size()), bs13(s13.size()), b2(w2.size()), bs2(s2.size());
    qtl::unshuffle_mxfp8_moe_weights(
        in_t{cview(o13, e, r1, h), cview(os13, e, r1, h / 32), cview(o2, e, h, i), cview(os2, e, h, i / 32)},
        out_t{mview(b13, e, r1, h), mview(bs13, e, r1, h / 32), mview(b2, e, h, i), mview(bs2, e, h, i / 32)}, gated);
    CHECK(b13 == w13);
    CHECK(bs13 == s13);
    CHECK(b2 == w2);
    CHECK(bs2 == s2);
  }
  std::vector<std::uint8_t> a(2 * 64 * 128), b(a.size()), sa(2 * 64 * 4), sb(sa.size());
  CHECK_THROWS_WITH(qtl::shuffle_mxfp8_moe_weights(
                        qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const>{
                            cview(a, 2, 64, 128), cview(sa, 2, 64, 4), cview(a, 2, 64, 128), cview(sa, 2, 64, 4)},
                        qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>{
                            mview(b, 2, 64, 128), mview(sb, 2, 64, 4), mview(b, 2, 64, 128), mview(sb, 2, 64, 4)},
                        true),
                    Catch::Contains("w13_scale has 64 rows") && Catch::Contains("multiple of 128"));
}

TEST_CASE("trtllm_moe_shuffle_rows past the streaming-store size round-trips through the plain inverse", "[moe]") {
  index_t const e = 2, rows = 1024, cols = 4096;  // 8 MiB: the forward pass streams its stores
  auto const in = random_bytes(static_cast<std::size_t>(e * rows * cols), 11);
  std::vector<std::uint8_t> out(in.size()), back(in.size());
  qtl::trtllm_row_map const map{qtl::trtllm_row_map::kind::w1w3_gated, 0, 128};
  for (bool const flip : {false, true}) {  // plain streaming stores, and the nibble flip on the way
    CAPTURE(flip);
    qtl::trtllm_moe_shuffle_rows(cview(in, e, rows, cols), mview(out, e, rows, cols), map, 128, flip);
    auto want = oracle_rows_blocks(in, e, rows, cols, plus_half(oracle_w3w1(rows, 128, true)), 128);
    for (auto& b : want) b = static_cast<std::uint8_t>(flip ? b ^ 0x88 : b);
    CHECK((out == want));  // a bool: a failure does not print 8 MiB
    qtl::trtllm_moe_unshuffle_rows(cview(out, e, rows, cols), mview(back, e, rows, cols), map, 128, flip);
    CHECK((back == in));
  }
}

namespace {

// The 128x4 scale pass (`detail::scale_words`) of `s` [e, rows, cols] with elements of type T under
// `cap`, into a fresh buffer.
template <class T>
std::vector<T> scale_words_at(qtl::x86::level cap, std::vector<T> const& s, index_t e, index_t rows, index_t cols,
                              qtl::trtllm_row_map map) {
  qtl::x86::scoped_level_cap const capped(cap);
  std::vector<T> out(s.size());
  qtl::detail::scale_words<false>(qtl::make_view(s.data(), e, rows, cols), out.data(), map);
  return out;
}

}  // namespace

TEST_CASE("the trtllm-gen layout passes past the streaming-store size equal the portable pass at each width", "[moe]") {
  using qtl::x86::level;
  using kind = qtl::trtllm_row_map::kind;
  // Each pass with every streaming width the CPU has (capped to SSE2: 16-byte stores; AVX-512F:
  // 64-byte ones) against the portable pass (plain copies), on outputs of 8 MiB and more.
  SECTION("weights: odd expert counts, 32- and 16-row tiles, whole rows with and without 16-byte tails") {
    struct weights {
      index_t e, rows, cols, bk;
      qtl::trtllm_row_map map;
      bool flip;
    };
    for (weights const w : {weights{3, 1024, 2816, 128, {kind::w1w3_gated, 0, 128}, true},
                            weights{3, 1360, 2176, 128, {kind::shuffle, 0, 64}, false},  // 1360 = 85 16-row tiles
                            weights{5, 832, 2064, 2064, {kind::w3w1_gated, 0, 128}, false},
                            weights{5, 800, 2104, 2104, {kind::shuffle, 0, 128}, false}}) {  // rows not streamed
      CAPTURE(w.e, w.rows, w.cols, w.bk);
      auto const in = random_bytes(static_cast<std::size_t>(w.e * w.rows * w.cols), 12);
      auto const run = [&](level cap) {
        qtl::x86::scoped_level_cap const capped(cap);
        std::vector<std::uint8_t> out(in.size());
        qtl::trtllm_moe_shuffle_rows(cview(in, w.e, w.rows, w.cols), mview(out, w.e, w.rows, w.cols), w.map, w.bk,
                                     w.flip);
        return out;
      };
      auto const want = run(level::portable);
      CHECK((run(level::sse2) == want));  // bools: a failure does not print megabytes
      CHECK((run(level::avx512) == want));
    }
  }
  SECTION("scales: 4-byte words (E8M0) and 8-byte words (BF16) of three experts, and back") {
    qtl::trtllm_row_map const map{kind::w1w3_gated, 1536, 128};
    auto const bytes = random_bytes(static_cast<std::size_t>(3 * 1536 * 1824), 13);
    std::vector<std::uint16_t> words(bytes.size() / 2);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    auto const want8 = scale_words_at(level::portable, bytes, 3, 1536, 1824, map);
    auto const want16 = scale_words_at(level::portable, words, 3, 1536, 912, map);
    for (level const cap : {level::sse2, level::avx512}) {
      CAPTURE(static_cast<int>(cap));
      CHECK((scale_words_at(cap, bytes, 3, 1536, 1824, map) == want8));
      CHECK((scale_words_at(cap, words, 3, 1536, 912, map) == want16));
    }
    std::vector<std::uint16_t> back(words.size());
    qtl::detail::scale_words<true>(qtl::make_view(back.data(), 3, 1536, 912), want16.data(), map);
    CHECK((back == words));
  }
}
