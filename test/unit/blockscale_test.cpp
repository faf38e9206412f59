// Tests of qtl/blockscale.hpp: the host swizzle against an independent oracle (the reference's
// 6-D reshape/permute, written out as loops), the inverse, padding, strides, scale types, errors.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>

#include <qtl/blockscale.hpp>

namespace {

using qtl::index_t;

// A stand-in for a one-byte scale storage struct (qtl::float8_e4m3fn_t has this shape).
struct scale_e4m3 {
  std::uint8_t bits;
  friend bool operator==(scale_e4m3, scale_e4m3) = default;
};

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) {
    b = static_cast<std::uint8_t>(1 + rng() % 255);  // never 0, so a misplaced pad byte shows
  }
  return v;
}

// sglang's swizzle_blockscale, literally: zeros(B, Mp, Kp); copy; reshape(B, Mp/128, 4, 32, Kp/4, 4);
// permute(0, 1, 4, 3, 2, 5); contiguous. Output index = row-major over the permuted dims.
std::vector<std::uint8_t> oracle_swizzle_128x4(std::vector<std::uint8_t> const& in, index_t B, index_t M, index_t K) {
  index_t const mp = (M + 127) / 128 * 128;
  index_t const kp = (K + 3) / 4 * 4;
  std::vector<std::uint8_t> padded(static_cast<std::size_t>(B * mp * kp), 0);
  for (index_t b = 0; b < B; ++b) {
    for (index_t m = 0; m < M; ++m) {
      for (index_t k = 0; k < K; ++k) {
        padded[static_cast<std::size_t>((b * mp + m) * kp + k)] = in[static_cast<std::size_t>((b * M + m) * K + k)];
      }
    }
  }
  // dims of the 6-D view: d0=b, d1=m/128, d2=(m%128)/32, d3=m%32, d4=k/4, d5=k%4
  index_t const D[6] = {B, mp / 128, 4, 32, kp / 4, 4};
  std::vector<std::uint8_t> out(padded.size());
  std::size_t o = 0;
  // permuted order (0, 1, 4, 3, 2, 5): iterate d0, d1, d4, d3, d2, d5 row-major
  for (index_t i0 = 0; i0 < D[0]; ++i0) {
    for (index_t i1 = 0; i1 < D[1]; ++i1) {
      for (index_t i4 = 0; i4 < D[4]; ++i4) {
        for (index_t i3 = 0; i3 < D[3]; ++i3) {
          for (index_t i2 = 0; i2 < D[2]; ++i2) {
            for (index_t i5 = 0; i5 < D[5]; ++i5) {
              index_t const src = ((((i0 * D[1] + i1) * D[2] + i2) * D[3] + i3) * D[4] + i4) * D[5] + i5;
              out[o++] = padded[static_cast<std::size_t>(src)];
            }
          }
        }
      }
    }
  }
  return out;
}

index_t const shapes_m[] = {1, 2, 3, 31, 32, 33, 127, 128, 129, 130, 200, 256, 300};
index_t const shapes_k[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 36, 70};

}  // namespace

TEST_CASE("swizzle_blockscale equals the reference's reshape/permute, 2-D and 3-D, any M and K", "[blockscale]") {
  for (index_t const batch : {1, 3}) {
    for (index_t const m : shapes_m) {
      for (index_t const k : shapes_k) {
        CAPTURE(batch, m, k);
        auto const in = random_bytes(static_cast<std::size_t>(batch * m * k), static_cast<std::uint32_t>(m * 977 + k));
        auto const expected = oracle_swizzle_128x4(in, batch, m, k);
        index_t const mp = qtl::layout_128x4::pad_rows(m);
        index_t const kp = qtl::layout_128x4::pad_cols(k);
        std::vector<std::uint8_t> out(expected.size(), 0xEE);
        if (batch == 1) {
          qtl::swizzle_blockscale(qtl::make_view(in.data(), m, k), qtl::make_view(out.data(), mp, kp));
        } else {
          qtl::swizzle_blockscale(qtl::make_view(in.data(), batch, m, k), qtl::make_view(out.data(), batch, mp, kp));
        }
        REQUIRE(out == expected);
        // ... and the exact inverse brings back the input.
        std::vector<std::uint8_t> back(in.size(), 0xEE);
        qtl::unswizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(out.data()), batch, mp, kp),
                                  qtl::make_view(back.data(), batch, m, k));
        REQUIRE(back == in);
      }
    }
  }
}

TEST_CASE("the 1x1 scale matrix swizzles into one 512-byte tile, the rest zero", "[blockscale]") {
  std::uint8_t const one = 0x7E;
  auto const t = qtl::swizzle_blockscale(qtl::make_view(&one, 1, 1));
  REQUIRE(t.extent(0) == 128);
  REQUIRE(t.extent(1) == 4);
  CHECK(t.storage()[0] == 0x7E);
  for (std::size_t i = 1; i < 512; ++i) {
    REQUIRE(t.storage()[i] == 0);
  }
  auto const back = qtl::unswizzle_blockscale(t.view(), 1, 1);
  CHECK(back.storage()[0] == 0x7E);
}

TEMPLATE_TEST_CASE("every layout: padding is zero and unswizzle(swizzle(x)) == x", "[blockscale]", qtl::layout_128x4,
                   qtl::layout_8x4, qtl::layout_8x16, qtl::layout_linear) {
  using layout = TestType;
  for (index_t const m : shapes_m) {
    for (index_t const k : shapes_k) {
      CAPTURE(m, k);
      index_t const batch = 2;
      auto const in = random_bytes(static_cast<std::size_t>(batch * m * k), static_cast<std::uint32_t>(m + 1000 * k));
      index_t const mp = layout::pad_rows(m);
      index_t const kp = layout::pad_cols(k);
      std::vector<std::uint8_t> out(static_cast<std::size_t>(batch * mp * kp), 0xEE);
      qtl::swizzle_blockscale<layout>(qtl::make_view(in.data(), batch, m, k),
                                      qtl::make_view(out.data(), batch, mp, kp));
      for (index_t b = 0; b < batch; ++b) {
        for (index_t r = 0; r < mp; ++r) {
          for (index_t c = 0; c < kp; ++c) {
            std::uint8_t const want = r < m && c < k ? in[static_cast<std::size_t>((b * m + r) * k + c)] : 0;
            REQUIRE(out[static_cast<std::size_t>(qtl::blockscale_offset<layout>(b, r, c, mp, kp))] == want);
          }
        }
      }
      std::vector<std::uint8_t> back(in.size(), 0xEE);
      qtl::unswizzle_blockscale<layout>(qtl::make_view(static_cast<std::uint8_t const*>(out.data()), batch, mp, kp),
                                        qtl::make_view(back.data(), batch, m, k));
      REQUIRE(back == in);
    }
  }
}

TEST_CASE("strided scale views (a column slice, a transposed matrix) swizzle as their values", "[blockscale]") {
  index_t const m = 130;
  index_t const k = 9;
  // The scales are columns 2..10 of a [130, 16] buffer: row stride 16.
  auto const wide = random_bytes(static_cast<std::size_t>(m * 16), 7);
  qtl::view2d<std::uint8_t const> sliced = qtl::make_view(wide.data() + 2, m, index_t{16});
  sliced.extent[1] = k;
  std::vector<std::uint8_t> dense(static_cast<std::size_t>(m * k));
  for (index_t r = 0; r < m; ++r) {
    for (index_t c = 0; c < k; ++c) {
      dense[static_cast<std::size_t>(r * k + c)] = sliced(r, c);
    }
  }
  // Transposed: stored [k, m], viewed [m, k] with strides {1, m}.
  std::vector<std::uint8_t> transposed(dense.size());
  for (index_t r = 0; r < m; ++r) {
    for (index_t c = 0; c < k; ++c) {
      transposed[static_cast<std::size_t>(c * m + r)] = dense[static_cast<std::size_t>(r * k + c)];
    }
  }
  qtl::view2d<std::uint8_t const> tview{transposed.data(), {m, k}, {1, m}};
  auto const expected = oracle_swizzle_128x4(dense, 1, m, k);
  CHECK(qtl::swizzle_blockscale(sliced).storage() == expected);
  CHECK(qtl::swizzle_blockscale(tview).storage() == expected);

  // Unswizzle into a strided destination.
  std::vector<std::uint8_t> target(static_cast<std::size_t>(m * 16), 0xAB);
  qtl::view2d<std::uint8_t> tgt = qtl::make_view(target.data() + 3, m, index_t{16});
  tgt.extent[1] = k;
  qtl::unswizzle_blockscale(qtl::make_view(expected.data(), index_t{256}, index_t{12}), tgt);
  for (index_t r = 0; r < m; ++r) {
    for (index_t c = 0; c < 16; ++c) {
      bool const inside = c >= 3 && c < 3 + k;
      REQUIRE(target[static_cast<std::size_t>(r * 16 + c)] ==
              (inside ? dense[static_cast<std::size_t>(r * k + c - 3)] : 0xAB));
    }
  }
}

TEST_CASE("swizzle keeps the scale type: E4M3 storage structs and std::byte", "[blockscale]") {
  index_t const m = 33;
  index_t const k = 6;
  auto const raw = random_bytes(static_cast<std::size_t>(m * k), 3);
  std::vector<scale_e4m3> typed(raw.size());
  std::vector<std::byte> bytes(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    typed[i].bits = raw[i];
    bytes[i] = std::byte{raw[i]};
  }
  auto const expected = oracle_swizzle_128x4(raw, 1, m, k);
  auto const t = qtl::swizzle_blockscale(qtl::make_view(typed.data(), m, k));
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(t.storage()[0])>, scale_e4m3>);
  auto const b = qtl::swizzle_blockscale(qtl::make_view(bytes.data(), m, k));
  REQUIRE(t.size() == static_cast<index_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    REQUIRE(t.storage()[i].bits == expected[i]);
    REQUIRE(std::to_integer<std::uint8_t>(b.storage()[i]) == expected[i]);
  }
}

TEST_CASE("swizzle_blockscale and unswizzle_blockscale reject bad outputs with the expected shape", "[blockscale]") {
  std::vector<std::uint8_t> in(3 * 5, 1);
  std::vector<std::uint8_t> out(128 * 8);
  auto const src = qtl::make_view(static_cast<std::uint8_t const*>(in.data()), 3, 5);
  CHECK_THROWS_AS(qtl::swizzle_blockscale(src, qtl::make_view(out.data(), 128, 5)), qtl::shape_error);
  CHECK_THROWS_WITH(qtl::swizzle_blockscale(src, qtl::make_view(out.data(), 3, 8)),
                    Catch::Contains("expected [128, 8]"));
  qtl::view2d<std::uint8_t> strided{out.data(), {128, 4}, {8, 1}};
  CHECK_THROWS_AS(qtl::swizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(in.data()), 3, 1), strided),
                  qtl::shape_error);
  // Output overlapping the input.
  std::vector<std::uint8_t> buf(2048);
  CHECK_THROWS_AS(qtl::swizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(buf.data() + 100), 3, 5),
                                          qtl::make_view(buf.data(), 128, 8)),
                  qtl::value_error);
  // Unswizzle: the swizzled input must be [pad_rows(M), pad_cols(K)].
  std::vector<std::uint8_t> back(15);
  CHECK_THROWS_WITH(qtl::unswizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(out.data()), 64, 16),
                                              qtl::make_view(back.data(), 3, 5)),
                    Catch::Contains("expected [128, 8]"));
  CHECK_THROWS_AS(
      qtl::unswizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(out.data()), 128, 8), -1, 5),
      qtl::shape_error);
}

TEST_CASE("empty scale matrices give empty outputs", "[blockscale]") {
  std::vector<std::uint8_t> none;
  auto const t = qtl::swizzle_blockscale(qtl::make_view(static_cast<std::uint8_t const*>(none.data()), 2, 0, 5));
  CHECK(t.extent(0) == 2);
  CHECK(t.extent(1) == 0);
  CHECK(t.extent(2) == 8);
  CHECK(t.size() == 0);
}

// ------------------------------------------------------------------------------------------------
// Golden cases (outputs of sglang's swizzle_blockscale itself; unswizzle is its exact inverse)
// ------------------------------------------------------------------------------------------------

namespace {

std::vector<std::uint8_t> bytes_of(qtl::io::tensor_info const& t) {
  auto const* p = reinterpret_cast<std::uint8_t const*>(t.bytes.data());
  return {p, p + t.bytes.size()};
}

}  // namespace

TEST_CASE("swizzle_blockscale reproduces every golden swizzle-blockscale case", "[blockscale][golden]") {
  for (auto const& c : qtl::test::golden_cases("swizzle-blockscale")) {
    INFO(c.name);
    auto const& in = c.in.at("scale");
    auto const& want = c.expected.at("scale");
    REQUIRE(c.expected.tensors().size() == 1);
    REQUIRE((in.shape.size() == 2 || in.shape.size() == 3));
    REQUIRE(qtl::io::dtype_size(in.type) == 1);
    auto const src = bytes_of(in);
    std::vector<std::int64_t> shape = in.shape;
    shape[shape.size() - 2] = qtl::layout_128x4::pad_rows(shape[shape.size() - 2]);
    shape[shape.size() - 1] = qtl::layout_128x4::pad_cols(shape[shape.size() - 1]);
    qtl::aligned_vector<std::uint8_t> got;
    if (in.shape.size() == 2) {
      got = qtl::swizzle_blockscale(qtl::make_view(src.data(), in.shape[0], in.shape[1])).storage();
    } else {
      got = qtl::swizzle_blockscale(qtl::make_view(src.data(), in.shape[0], in.shape[1], in.shape[2])).storage();
    }
    CHECK(want.type == in.type);  // the scale type is kept
    CHECK(want.shape == shape);
    CHECK(got == bytes_of(want));
  }
}

TEST_CASE("unswizzle_blockscale reproduces every golden unswizzle-blockscale case", "[blockscale][golden]") {
  for (auto const& c : qtl::test::golden_cases("unswizzle-blockscale")) {
    INFO(c.name);
    auto const& in = c.in.at("scale");
    auto const& want = c.expected.at("scale");
    REQUIRE(c.expected.tensors().size() == 1);
    index_t const rows = c.params.at("rows").get<index_t>();
    index_t const cols = c.params.at("cols").get<index_t>();
    auto const src = bytes_of(in);
    qtl::aligned_vector<std::uint8_t> got;
    std::vector<std::int64_t> shape;
    if (in.shape.size() == 2) {
      got = qtl::unswizzle_blockscale(qtl::make_view(src.data(), in.shape[0], in.shape[1]), rows, cols).storage();
      shape = {rows, cols};
    } else {
      got = qtl::unswizzle_blockscale(qtl::make_view(src.data(), in.shape[0], in.shape[1], in.shape[2]), rows, cols)
                .storage();
      shape = {in.shape[0], rows, cols};
    }
    CHECK(want.type == in.type);
    CHECK(want.shape == shape);
    CHECK(got == bytes_of(want));
  }
}

static_assert(qtl::cutedsl_mma_view_of(2, 256, 8).offset({31, 3, 1, 3, 1, 1}) ==
                  qtl::blockscale_offset<qtl::layout_128x4>(1, 1 * 128 + 3 * 32 + 31, 1 * 4 + 3, 256, 8),
              "the CuteDSL view indexes the 128x4 layout's bytes");

TEST_CASE("the CuteDSL MMA view indexes every byte of the 128x4 buffers once, where blockscale_offset puts it",
          "[blockscale][cutedsl]") {
  for (auto const [groups, rows, cols] : {std::array<qtl::index_t, 3>{1, 128, 4}, {3, 384, 12}, {2, 256, 4}}) {
    qtl::cutedsl_mma_view const v = qtl::cutedsl_mma_view_of(groups, rows, cols);
    // flashinfer's view(groups, m_tiles, k_tiles, 32, 4, 4).permute(3, 4, 1, 5, 2, 0)
    qtl::index_t const mt = rows / 128;
    qtl::index_t const kt = cols / 4;
    CHECK(v.shape == std::array<qtl::index_t, 6>{32, 4, mt, 4, kt, groups});
    CHECK(v.strides == std::array<qtl::index_t, 6>{16, 4, kt * 512, 1, 512, mt * kt * 512});
    std::vector<int> seen(static_cast<std::size_t>(groups * rows * cols), 0);
    std::size_t mismatches = 0;
    for (qtl::index_t b = 0; b != groups; ++b) {
      for (qtl::index_t m = 0; m != rows; ++m) {
        for (qtl::index_t k = 0; k != cols; ++k) {
          qtl::index_t const off = v.offset({m % 32, (m % 128) / 32, m / 128, k % 4, k / 4, b});
          mismatches += off != qtl::blockscale_offset<qtl::layout_128x4>(b, m, k, rows, cols);
          ++seen[static_cast<std::size_t>(off)];
        }
      }
    }
    CHECK(mismatches == 0);
    CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(seen.size()));
  }
}
