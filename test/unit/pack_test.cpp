// <qtl/pack.hpp>: bit layouts of hand-worked words, agreement with a direct transcription of the
// reference's numpy loops on random shapes for every width, round trips, strided views, every
// error path, and the golden cases produced by the Python reference.

#include <qtl/pack.hpp>

#include <catch2/catch.hpp>

#include <golden.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl_test::random_codes;

using qtl::index_t;
using qtl::make_view;

// The reference's loops (sglang pack_cols / pack_rows / unpack_cols), transcribed on uint32:
//   q_res |= q_w[:, i::pf] << b*i     (cols)      q_res |= q_w[i::pf, :] << b*i     (rows)
// Valid codes only (the reference does not mask, QTL rejects the rest).
std::vector<std::int32_t> reference_pack(std::vector<std::int32_t> const& q, index_t k, index_t n, int bits,
                                         bool along_rows) {
  index_t const pf = 32 / bits;
  index_t const rk = along_rows ? k / pf : k;
  index_t const rn = along_rows ? n : n / pf;
  std::vector<std::uint32_t> res(static_cast<std::size_t>(rk * rn), 0);
  for (index_t i = 0; i < pf; ++i) {
    for (index_t r = 0; r < rk; ++r) {
      for (index_t c = 0; c < rn; ++c) {
        index_t const src = along_rows ? (r * pf + i) * n + c : r * n + c * pf + i;
        res[static_cast<std::size_t>(r * rn + c)] |= static_cast<std::uint32_t>(q[static_cast<std::size_t>(src)])
                                                      << (bits * i);
      }
    }
  }
  return {res.begin(), res.end()};
}

template <int Bits>
void check_width_against_reference(std::mt19937& rng) {
  constexpr index_t pf = qtl::pack_factor<Bits>;
  std::int64_t const hi = Bits == 32 ? 0x7FFFFFFF : (std::int64_t{1} << Bits) - 1;
  std::int64_t const lo = Bits == 32 ? -0x7FFFFFFF - 1 : 0;  // b = 32: every int32 round-trips
  std::uniform_int_distribution<index_t> blocks(0, 9);
  // Random shapes, some crossing the host loops' 64-column chunks.
  for (int trial = 0; trial < 12; ++trial) {
    index_t const k = pf * blocks(rng) + (trial % 3 == 0 ? pf * 9 : 0);
    index_t const n = pf * blocks(rng) + (trial % 2 == 0 ? 64 * pf : 0);
    INFO("bits " << Bits << ", shape (" << k << ", " << n << ")");
    auto const q = random_codes(k * n, lo, hi, rng);
    auto const in = make_view(q.data(), k, n);

    auto const rows = qtl::pack_rows<Bits>(in);
    REQUIRE(rows.extent(0) == k / pf);
    REQUIRE(rows.extent(1) == n);
    CHECK(rows.storage() == reference_pack(q, k, n, Bits, true));
    auto const cols = qtl::pack_cols<Bits>(in);
    REQUIRE(cols.extent(0) == k);
    REQUIRE(cols.extent(1) == n / pf);
    CHECK(cols.storage() == reference_pack(q, k, n, Bits, false));

    CHECK(qtl::unpack_rows<Bits>(rows.view()).storage() == q);
    CHECK(qtl::unpack_cols<Bits>(cols.view()).storage() == q);
  }
}

}  // namespace

TEST_CASE("pack_cols and pack_rows place element j in bits [j*b, (j+1)*b) (semantics §8.3)", "[pack]") {
  // b = 4: [1..8] -> 0x87654321, as a row (pack_cols) and as a column (pack_rows).
  std::vector<std::int32_t> const row = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(qtl::pack_cols<4>(make_view(row.data(), 1, 8)).storage() == std::vector<std::int32_t>{-2023406815});
  CHECK(qtl::pack_rows<4>(make_view(row.data(), 8, 1)).storage() == std::vector<std::int32_t>{-2023406815});
  CHECK(qtl::unpack_cols<4>(make_view(std::vector<std::int32_t>{-2023406815}.data(), 1, 1)).storage() == row);
  // b = 8: [0x11, 0x22, 0x33, 0x44] -> 0x44332211
  std::vector<std::int32_t> const bytes = {0x11, 0x22, 0x33, 0x44};
  CHECK(qtl::pack_cols<8>(make_view(bytes.data(), 1, 4)).storage() == std::vector<std::int32_t>{0x44332211});
  // b = 16: two fields; b = 32: the identity on every int32.
  std::vector<std::int32_t> const halves = {0x1234, 0xFFFF};
  CHECK(static_cast<std::uint32_t>(qtl::pack_cols<16>(make_view(halves.data(), 1, 2)).storage()[0]) == 0xFFFF1234u);
  std::vector<std::int32_t> const any = {-1, 0x7FFFFFFF, -2147483647 - 1};
  CHECK(qtl::pack_rows<32>(make_view(any.data(), 3, 1)).storage() == any);
  CHECK(qtl::unpack_cols<32>(make_view(any.data(), 1, 3)).storage() == any);
  // b = 2 and b = 1, one field set at a time.
  for (int j = 0; j < 16; ++j) {
    std::vector<std::int32_t> codes(16, 0);
    codes[static_cast<std::size_t>(j)] = 2;
    CHECK(static_cast<std::uint32_t>(qtl::pack_cols<2>(make_view(codes.data(), 1, 16)).storage()[0]) ==
          (2u << (2 * j)));
  }
  for (int j = 0; j < 32; ++j) {
    std::vector<std::int32_t> codes(32, 0);
    codes[static_cast<std::size_t>(j)] = 1;
    CHECK(static_cast<std::uint32_t>(qtl::pack_rows<1>(make_view(codes.data(), 32, 1)).storage()[0]) ==
          (1u << j));
  }
}

TEST_CASE("pack_rows packs down columns (GPTQ qweight layout)", "[pack]") {
  // (8, 3): column c holds 8 codes; out (1, 3)
  std::vector<std::int32_t> q(24);
  for (int r = 0; r < 8; ++r) {
    q[static_cast<std::size_t>(r * 3 + 0)] = r;           // 0..7    -> 0x76543210
    q[static_cast<std::size_t>(r * 3 + 1)] = 15 - r;      // 15..8   -> 0x89ABCDEF
    q[static_cast<std::size_t>(r * 3 + 2)] = r % 2 ? 15 : 0;  //     -> 0xF0F0F0F0
  }
  auto const packed = qtl::pack_rows<4>(make_view(q.data(), 8, 3));
  REQUIRE(packed.extent(0) == 1);
  REQUIRE(packed.extent(1) == 3);
  CHECK(static_cast<std::uint32_t>(packed.storage()[0]) == 0x76543210u);
  CHECK(static_cast<std::uint32_t>(packed.storage()[1]) == 0x89ABCDEFu);
  CHECK(static_cast<std::uint32_t>(packed.storage()[2]) == 0xF0F0F0F0u);
  CHECK(qtl::unpack_rows<4>(packed.view()).storage() == q);
}

TEST_CASE("every width agrees with the reference's loops and round-trips, on random shapes", "[pack]") {
  std::mt19937 rng(20261202);
  check_width_against_reference<1>(rng);
  check_width_against_reference<2>(rng);
  check_width_against_reference<4>(rng);
  check_width_against_reference<8>(rng);
  check_width_against_reference<16>(rng);
  check_width_against_reference<32>(rng);
}

TEST_CASE("integer scalar types pack like their bit width; signed ones in two's complement", "[pack]") {
  std::mt19937 rng(7);
  auto const q = random_codes(16 * 72, 0, 15, rng);
  auto const in = make_view(q.data(), 16, 72);
  CHECK(qtl::pack_rows<qtl::uint4b8>(in).storage() == qtl::pack_rows<4>(in).storage());
  CHECK(qtl::pack_cols<qtl::uint4>(in).storage() == qtl::pack_cols<4>(in).storage());
  CHECK(qtl::pack_rows<qtl::uint8b128>(in).storage() == qtl::pack_rows<8>(in).storage());

  // int4: [-8, 7] stored as the low nibble of the two's complement; unpacking sign-extends.
  auto const s = random_codes(16 * 72, -8, 7, rng);
  auto const sin = make_view(s.data(), 16, 72);
  auto const srows = qtl::pack_rows<qtl::int4>(sin);
  CHECK(qtl::unpack_rows<qtl::int4>(srows.view()).storage() == s);
  auto const scols = qtl::pack_cols<qtl::int4>(sin);
  CHECK(qtl::unpack_cols<qtl::int4>(scols.view()).storage() == s);
  // The same words, read unsigned, hold the nibbles v & 0xF.
  auto const nibbles = qtl::unpack_cols<4>(scols.view()).storage();
  for (std::size_t i = 0; i < s.size(); ++i) {
    REQUIRE(nibbles[i] == (s[i] & 0xF));
  }
  auto const b = random_codes(4 * 80, -128, 127, rng);
  CHECK(qtl::unpack_cols<qtl::int8>(qtl::pack_cols<qtl::int8>(make_view(b.data(), 4, 80)).view()).storage() == b);
}

TEST_CASE("strided views take the general path and give the same words", "[pack]") {
  std::mt19937 rng(11);
  index_t const k = 16;
  index_t const n = 24;
  auto const q = random_codes(k * n, 0, 15, rng);
  auto const packed_rows = qtl::pack_rows<4>(make_view(q.data(), k, n)).storage();
  auto const packed_cols = qtl::pack_cols<4>(make_view(q.data(), k, n)).storage();

  // The codes inside a wider buffer (row stride 2n, column stride 2).
  std::vector<std::int32_t> wide(static_cast<std::size_t>(k * 4 * n), -99);
  qtl::view2d<std::int32_t> strided;
  strided.data = wide.data();
  strided.extent[0] = k;
  strided.extent[1] = n;
  strided.stride[0] = 4 * n;
  strided.stride[1] = 2;
  for (index_t i = 0; i < k; ++i) {
    for (index_t j = 0; j < n; ++j) {
      strided(i, j) = q[static_cast<std::size_t>(i * n + j)];
    }
  }
  CHECK(qtl::pack_rows<4>(strided).storage() == packed_rows);
  CHECK(qtl::pack_cols<4>(strided).storage() == packed_cols);

  // Strided outputs: unpack back into the strided view, padding untouched.
  std::vector<std::int32_t> const before = wide;
  for (index_t i = 0; i < k; ++i) {
    for (index_t j = 0; j < n; ++j) {
      strided(i, j) = 0;
    }
  }
  qtl::unpack_rows<4>(make_view(packed_rows.data(), k / 8, n), strided);
  CHECK(wide == before);
  qtl::unpack_cols<4>(make_view(packed_cols.data(), k, n / 8), strided);
  CHECK(wide == before);

  // A transposed view: pack_cols of the transpose == pack_rows of the original.
  qtl::view2d<std::int32_t const> t;
  t.data = q.data();
  t.extent[0] = n;
  t.extent[1] = k;
  t.stride[0] = 1;
  t.stride[1] = n;
  auto const tcols = qtl::pack_cols<4>(t);  // (n, k/8): element (j, r) = pack_rows (r, j)
  for (index_t r = 0; r < k / 8; ++r) {
    for (index_t j = 0; j < n; ++j) {
      REQUIRE(tcols.storage()[static_cast<std::size_t>(j * (k / 8) + r)] ==
              packed_rows[static_cast<std::size_t>(r * n + j)]);
    }
  }
}

TEST_CASE("a large matrix gives the reference's words, chunks and remainder columns alike", "[pack]") {
  // 16-bit codes, (2048, 4096 + 48): 32 MiB of codes, 16 MiB of words along rows and cols; the
  // host loops' 64-column chunks and the 48 remainder columns are both covered.
  std::mt19937 rng(3);
  index_t const k = 2048;
  index_t const n = 4096 + 48;
  auto const q = random_codes(k * n, 0, 0xFFFF, rng);
  auto const in = make_view(q.data(), k, n);
  auto const rows = qtl::pack_rows<16>(in);
  CHECK(rows.storage() == reference_pack(q, k, n, 16, true));
  auto const cols = qtl::pack_cols<16>(in);
  CHECK(cols.storage() == reference_pack(q, k, n, 16, false));
  CHECK(qtl::unpack_rows<16>(rows.view()).storage() == q);
  CHECK(qtl::unpack_cols<16>(cols.view()).storage() == q);
  // An error in the last block of rows still leaves the whole output zeroed.
  auto bad = q;
  bad[static_cast<std::size_t>(1500 * n + 7)] = 0x10000;
  qtl::host_tensor<std::int32_t, 2> out({k / 2, n});
  std::fill(out.storage().begin(), out.storage().end(), 77);
  CHECK_THROWS_MATCHES(qtl::pack_rows<16>(make_view(bad.data(), k, n), out.view()), qtl::value_error,
                       Catch::Message("qtl::pack_rows<16>: in(1500, 7) = 65536 is outside [0, 65535], the range of 16-bit codes"));
  CHECK(std::all_of(out.storage().begin(), out.storage().end(), [](std::int32_t v) { return v == 0; }));
}

TEST_CASE("empty matrices pack to empty matrices", "[pack]") {
  std::vector<std::int32_t> none;
  CHECK(qtl::pack_rows<4>(make_view(none.data(), 0, 5)).size() == 0);
  CHECK(qtl::pack_cols<4>(make_view(none.data(), 3, 0)).size() == 0);
  CHECK(qtl::unpack_rows<4>(make_view(none.data(), 0, 5)).extent(1) == 5);
  CHECK(qtl::unpack_cols<4>(make_view(none.data(), 3, 0)).extent(0) == 3);
}

TEST_CASE("shapes the pack factor does not divide are shape_errors naming the dimension", "[pack][errors]") {
  std::vector<std::int32_t> buf(1024, 0);
  // pack_rows: K = 12 rows, pf 8
  CHECK_THROWS_MATCHES(qtl::pack_rows<4>(make_view(buf.data(), 12, 8)), qtl::shape_error,
                       Catch::Message("qtl::pack_rows<4>: in rows (K = 12) is not a multiple of the pack factor 8"));
  CHECK_THROWS_MATCHES(qtl::pack_cols<8>(make_view(buf.data(), 2, 10)), qtl::shape_error,
                       Catch::Message("qtl::pack_cols<8>: in cols (N = 10) is not a multiple of the pack factor 4"));
  // unpack: the unpacked side is `out`
  CHECK_THROWS_MATCHES(qtl::unpack_rows<4>(make_view(buf.data(), 1, 8), make_view(buf.data() + 64, 9, 8)),
                       qtl::shape_error,
                       Catch::Message("qtl::unpack_rows<4>: out rows (K = 9) is not a multiple of the pack factor 8"));
  CHECK_THROWS_MATCHES(qtl::unpack_cols<qtl::uint4b8>(make_view(buf.data(), 2, 1), make_view(buf.data() + 64, 2, 7)),
                       qtl::shape_error,
                       Catch::Message("qtl::unpack_cols<uint4b8>: out cols (N = 7) is not a multiple of the pack factor 8"));
  // Mismatched outputs, on the packed dimension and on the other one.
  CHECK_THROWS_MATCHES(qtl::pack_rows<4>(make_view(buf.data(), 16, 4), make_view(buf.data() + 512, 3, 4)),
                       qtl::shape_error,
                       Catch::Message("qtl::pack_rows<4>: out has 3 rows; expected in rows / pack factor = 16 / 8 = 2"));
  CHECK_THROWS_MATCHES(qtl::pack_rows<4>(make_view(buf.data(), 16, 4), make_view(buf.data() + 512, 2, 5)),
                       qtl::shape_error,
                       Catch::Message("qtl::pack_rows<4>: out has 5 cols; expected 4, the cols of in"));
  CHECK_THROWS_MATCHES(qtl::pack_cols<2>(make_view(buf.data(), 2, 32), make_view(buf.data() + 512, 2, 3)),
                       qtl::shape_error,
                       Catch::Message("qtl::pack_cols<2>: out has 3 cols; expected in cols / pack factor = 32 / 16 = 2"));
  CHECK_THROWS_MATCHES(qtl::unpack_cols<4>(make_view(buf.data(), 3, 2), make_view(buf.data() + 512, 2, 16)),
                       qtl::shape_error,
                       Catch::Message("qtl::unpack_cols<4>: in has 3 rows; expected 2, the rows of out"));
  CHECK_THROWS_MATCHES(qtl::unpack_rows<8>(make_view(buf.data(), 3, 2), make_view(buf.data() + 512, 8, 2)),
                       qtl::shape_error,
                       Catch::Message("qtl::unpack_rows<8>: in has 3 rows; expected out rows / pack factor = 8 / 4 = 2"));
  // Negative extents.
  qtl::view2d<std::int32_t const> bad = make_view(static_cast<std::int32_t const*>(buf.data()), 8, 8);
  bad.extent[1] = -8;
  CHECK_THROWS_MATCHES(qtl::pack_rows<4>(bad), qtl::shape_error,
                       Catch::Message("qtl::pack_rows<4>: in has a negative extent [8, -8]"));
}

TEST_CASE("codes outside the width are value_errors naming the first (row, col) and value", "[pack][errors]") {
  std::vector<std::int32_t> q(16 * 80, 3);
  q[5 * 80 + 70] = 16;  // the first offender in row-major order
  q[6 * 80 + 1] = -1;
  q[12 * 80 + 0] = 300;  // in a later block of 8 rows
  auto const in = make_view(q.data(), 16, 80);
  std::vector<std::int32_t> out(16 * 80, 12345);

  CHECK_THROWS_MATCHES(qtl::pack_rows<4>(in, make_view(out.data(), 2, 80)), qtl::value_error,
                       Catch::Message("qtl::pack_rows<4>: in(5, 70) = 16 is outside [0, 15], the range of 4-bit codes"));
  // A failed call leaves the output zeroed, never half written.
  CHECK(std::all_of(out.begin(), out.begin() + 160, [](std::int32_t v) { return v == 0; }));
  CHECK(out[160] == 12345);

  CHECK_THROWS_MATCHES(qtl::pack_cols<4>(in, make_view(out.data(), 16, 10)), qtl::value_error,
                       Catch::Message("qtl::pack_cols<4>: in(5, 70) = 16 is outside [0, 15], the range of 4-bit codes"));
  CHECK(std::all_of(out.begin(), out.begin() + 160, [](std::int32_t v) { return v == 0; }));

  q[5 * 80 + 70] = 3;
  CHECK_THROWS_MATCHES(qtl::pack_rows<qtl::uint4b8>(in), qtl::value_error,
                       Catch::Message("qtl::pack_rows<uint4b8>: in(6, 1) = -1 is outside [0, 15], the range of 4-bit codes"));
  q[6 * 80 + 1] = 3;
  CHECK_THROWS_MATCHES(qtl::pack_cols<2>(in), qtl::value_error,
                       Catch::Message("qtl::pack_cols<2>: in(12, 0) = 300 is outside [0, 3], the range of 2-bit codes"));
  CHECK_THROWS_MATCHES(qtl::pack_cols<8>(in), qtl::value_error,
                       Catch::Message("qtl::pack_cols<8>: in(12, 0) = 300 is outside [0, 255], the range of 8-bit codes"));
  q[12 * 80 + 0] = 3;
  CHECK_NOTHROW(qtl::pack_rows<4>(in));
  CHECK_THROWS_MATCHES(qtl::pack_rows<1>(make_view(q.data(), 32, 40)), qtl::value_error,
                       Catch::Message("qtl::pack_rows<1>: in(0, 0) = 3 is outside [0, 1], the range of 1-bit codes"));

  // Signed types: [-8, 7] for int4, [-128, 127] for int8.
  std::vector<std::int32_t> s(8 * 8, -8);
  s[2 * 8 + 3] = 8;
  CHECK_THROWS_MATCHES(qtl::pack_rows<qtl::int4>(make_view(s.data(), 8, 8)), qtl::value_error,
                       Catch::Message("qtl::pack_rows<int4>: in(2, 3) = 8 is outside [-8, 7], the range of 4-bit codes"));
  s[2 * 8 + 3] = -129;
  CHECK_THROWS_MATCHES(qtl::pack_cols<qtl::int8>(make_view(s.data(), 8, 8)), qtl::value_error,
                       Catch::Message("qtl::pack_cols<int8>: in(2, 3) = -129 is outside [-128, 127], the range of 8-bit codes"));

  // The one-word form.
  CHECK_THROWS_MATCHES(qtl::pack<4>({0, 1, 2, 3, 4, 5, 6, 17}), qtl::value_error,
                       Catch::Message("qtl::pack<4>: in(0, 7) = 17 is outside [0, 15], the range of 4-bit codes"));
  // 32 bits: every int32 is a valid code.
  CHECK_NOTHROW(qtl::pack_rows<32>(in));
}

TEST_CASE("the golden pack/unpack cases of the Python reference are reproduced bit for bit", "[pack][golden]") {
  struct op_case {
    char const* op;
    char const* in_name;
    char const* out_name;
  };
  for (auto const& [op, in_name, out_name] :
       {op_case{"pack-cols", "q_w", "packed"}, op_case{"pack-rows", "q_w", "packed"},
        op_case{"unpack-cols", "packed", "q_w"}, op_case{"unpack-rows", "packed", "q_w"}}) {
    for (auto const& c : qtl::test::golden_cases(op)) {
      INFO(c.name);
      int const bits = c.params.at("bits").get<int>();
      index_t const k = c.shape.at(0);
      index_t const n = c.shape.at(1);
      auto const input = qtl::test::tensor_values<std::int32_t>(c.in, in_name);
      auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, out_name);
      auto const& in_shape = c.in.at(in_name).shape;
      auto const& want_shape = c.expected.at(out_name).shape;
      REQUIRE(in_shape.size() == 2);
      REQUIRE(want_shape.size() == 2);
      auto const in = make_view(input.data(), in_shape[0], in_shape[1]);
      std::string const o = op;  // (clang 14 cannot capture structured bindings)
      auto run = [&]<int Bits>() {
        if (o == "pack-cols") {
          return qtl::pack_cols<Bits>(in);
        }
        if (o == "pack-rows") {
          return qtl::pack_rows<Bits>(in);
        }
        if (o == "unpack-cols") {
          return qtl::unpack_cols<Bits>(in);
        }
        return qtl::unpack_rows<Bits>(in);
      };
      qtl::host_tensor<std::int32_t, 2> got;
      switch (bits) {
        case 2: got = run.operator()<2>(); break;
        case 4: got = run.operator()<4>(); break;
        case 8: got = run.operator()<8>(); break;
        default: FAIL("no golden width " << bits);
      }
      CHECK(got.extent(0) == want_shape[0]);
      CHECK(got.extent(1) == want_shape[1]);
      // The unpacked side has the case's [K, N].
      auto const& codes_shape = std::string(op).rfind("pack", 0) == 0 ? in_shape : want_shape;
      CHECK(codes_shape[0] == k);
      CHECK(codes_shape[1] == n);
      CHECK(got.storage() == want);
    }
  }
}
