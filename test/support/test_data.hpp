#pragma once
// Small inputs and views that the unit and CUDA test tiers share (one copy, so that two tiers that
// compare against each other build their inputs alike):
//
//   auto const x = qtl_test::random_codes(k * n, 0, 15, rng);      // int32 codes in [lo, hi]
//   auto const b = qtl_test::random_bytes(n, seed);                 // bytes of a fixed seed
//   auto const v = qtl_test::cview(x, k, n);                        // a const [rows, cols] view
//   auto const w = qtl_test::block_ranged_normal<bfloat16_t>(m, k, seed, 6);  // blocks of own ranges
//   std::string const t = qtl_test::percent_decode("a%2Eb");        // "a.b": test tables' escapes

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl_test {

/// `count` codes drawn uniformly from [lo, hi].
inline std::vector<std::int32_t> random_codes(qtl::index_t count, std::int64_t lo, std::int64_t hi, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> dist(lo, hi);
  std::vector<std::int32_t> v(static_cast<std::size_t>(count));
  for (auto& x : v) {
    x = static_cast<std::int32_t>(dist(rng));
  }
  return v;
}

/// `n` bytes of mt19937(`seed`), each the low byte of one draw.
inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) {
    b = static_cast<std::uint8_t>(rng());
  }
  return v;
}

/// `rows * cols` draws of normal(0, 1) from mt19937(`seed`), each run of 16 consecutive elements
/// (a block of the block formats) scaled by its own 2^e, e in [-spread, spread] (a hash of the
/// run's index), rounded to T: blocks and rows whose ranges differ by up to 2^(2 * spread).
template <class T>
std::vector<T> block_ranged_normal(qtl::index_t rows, qtl::index_t cols, std::uint32_t seed, int spread) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> v(static_cast<std::size_t>(rows * cols));
  auto const span = static_cast<std::uint32_t>(2 * spread + 1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto const e = static_cast<float>(static_cast<std::uint32_t>(i / 16 * 2654435761u) % span) - spread;
    v[i] = qtl::from_float<T>(normal(gen) * std::exp2(e));
  }
  return v;
}

/// The bytes of the `n` elements at `p`, or of `v` (compares float, bf16 and FP8 values bit for
/// bit, NaN payloads included).
template <class T>
std::vector<std::uint8_t> raw(T const* p, std::size_t n) {
  std::vector<std::uint8_t> b(n * sizeof(T));
  if (n != 0) {
    std::memcpy(b.data(), p, b.size());
  }
  return b;
}
template <class T, class A>
std::vector<std::uint8_t> raw(std::vector<T, A> const& v) {
  return raw(v.data(), v.size());
}

/// `v` as a const [rows, cols] row-major view.
template <class T>
qtl::view2d<T const> cview(std::vector<T> const& v, qtl::index_t rows, qtl::index_t cols) {
  return qtl::make_view(v.data(), rows, cols);
}

/// `v` as the [a, b, c] view with strides (1, a, a * b): the transpose (axes reversed) of `v` read
/// as a contiguous [c, b, a] array, for the ops' tests of non-contiguous views.
template <class T>
qtl::view3d<T const> reversed_axes_view(std::vector<T> const& v, qtl::index_t a, qtl::index_t b, qtl::index_t c) {
  qtl::view3d<T const> t;
  t.data = v.data();
  t.extent[0] = a;
  t.extent[1] = b;
  t.extent[2] = c;
  t.stride[0] = 1;
  t.stride[1] = a;
  t.stride[2] = a * b;
  return t;
}

/// `s` with each %XX replaced by the byte 0xXX (the test tables write unprintable bytes so).
inline std::string percent_decode(std::string const& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

/// One line of a matcher corpus (test/data/regex/corpus.txt and its kin): "<kind> <string> <results...>", single
/// spaces, the %-encoded string possibly empty.
struct corpus_line {
  std::string kind;
  std::string text;  ///< the string, decoded
  std::string rest;  ///< the results, as written
};
inline corpus_line parse_corpus_line(std::string const& line) {
  auto const sp1 = line.find(' ');
  auto const sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  std::string const s =
      sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 == std::string::npos ? sp2 : sp2 - sp1 - 1);
  return {line.substr(0, sp1), percent_decode(s), sp2 == std::string::npos ? "" : line.substr(sp2 + 1)};
}

}  // namespace qtl_test
