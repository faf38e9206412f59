#pragma once
// What the x86 executor tests (fp8_x86_test.cpp, fp4_x86_test.cpp) share: the same call under every
// executor level against the portable loop, byte for byte, on adversarial inputs.
//   check_executors_agree(f)   f() (the bytes of every output) under each level this CPU runs
//   matrix<T>                  rows that start at odd addresses, padded past their width
//   hostile_input<T>           every 16-bit code, then values from subnormal to huge with specials
//   boundary_floats()          float patterns at every rounding boundary of E4M3, E5M2 and E2M1
#include <qtl/fp8.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#if QTL_X86

namespace qtl_test::x86_compare {

using qtl::index_t;
namespace x86 = qtl::detail::x86;

using bytes = std::vector<std::uint8_t>;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();

/// Caps the executor for its lifetime (the one hook of qtl/x86/isa.hpp).
using isa_limit = qtl::x86::scoped_level_cap;

/// The executors above the portable loops that this CPU runs.
inline std::vector<x86::fp8_isa> fast_isas() {
  std::vector<x86::fp8_isa> r;
  for (x86::fp8_isa l : {x86::fp8_isa::sse2, x86::fp8_isa::avx2, x86::fp8_isa::avx512}) {
    if (l == x86::fp8_isa::sse2 || x86::fp8_cpu_isa() >= l) {
      r.push_back(l);
    }
  }
  return r;
}

/// `f()` (the bytes of every output) under every executor equals `f()` under the portable one.
template <class F>
void check_executors_agree(F const& f) {
  bytes want;
  {
    isa_limit const limit(x86::fp8_isa::portable);
    want = f();
  }
  if (fast_isas().size() == 1) {
    WARN("no AVX2 or AVX-512 on this CPU: only the portable and SSE2 executors ran");
  }
  for (x86::fp8_isa const l : fast_isas()) {
    isa_limit const limit(l);
    bytes const got = f();
    INFO("executor " << static_cast<int>(l));
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) {
        INFO("byte " << i);
        REQUIRE(int(got[i]) == int(want[i]));
      }
    }
  }
}

template <class T>
void append(bytes& b, T const* p, std::size_t n) {
  std::size_t const at = b.size();
  b.resize(at + n * sizeof(T));
  if (n != 0) {
    std::memcpy(b.data() + at, p, n * sizeof(T));
  }
}

/// A [rows, cols] matrix whose rows start `pad` elements apart past `cols` and one element past
/// an aligned allocation: every row starts at an odd address, and no vector step is aligned.
template <class T>
struct matrix {
  index_t rows;
  index_t cols;
  index_t stride;
  std::vector<T> storage;
  matrix(index_t r, index_t c, index_t pad = 3)
      : rows(r), cols(c), stride(c + pad), storage(static_cast<std::size_t>(r * (c + pad) + 1)) {}
  T* data() { return storage.data() + 1; }
  T const* data() const { return storage.data() + 1; }
  T& at(index_t i, index_t j) { return data()[i * stride + j]; }
  qtl::view2d<T> view() {
    auto v = qtl::make_view(data(), rows, cols);
    v.stride[0] = stride;
    return v;
  }
  qtl::view2d<T const> cview() const {
    auto v = qtl::make_view(data(), rows, cols);
    v.stride[0] = stride;
    return v;
  }
  void append_to(bytes& b) const {
    for (index_t i = 0; i < rows; ++i) {
      append(b, data() + i * stride, static_cast<std::size_t>(cols));
    }
  }
};

/// Every 16-bit code once (shuffled, so that blocks and groups mix specials and ordinary values)
/// in the first rows, then rows of normally distributed values at magnitudes from subnormal to
/// huge, with a few specials planted.
template <class T>
matrix<T> hostile_input(index_t rows, index_t cols, std::uint32_t seed) {
  matrix<T> m(rows, cols);
  std::mt19937 gen(seed);
  std::vector<std::uint32_t> codes(65536);
  for (std::uint32_t c = 0; c < 65536; ++c) {
    codes[c] = c;
  }
  std::shuffle(codes.begin(), codes.end(), gen);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float const magnitudes[] = {1.0f, 1e-3f, 300.0f, 1e-38f, 1e30f, 0x1p-130f};
  std::size_t next = 0;
  for (index_t i = 0; i < rows; ++i) {
    for (index_t j = 0; j < cols; ++j) {
      float v;
      if (i < rows / 2) {
        std::uint32_t const c = codes[next++ % codes.size()];
        if constexpr (std::is_same_v<T, float>) {
          v = qtl::bits_to_float((c << 16) | (gen() & 0xffffu));  // every top half, random low bits
        } else {
          m.at(i, j) = T{static_cast<std::uint16_t>(c)};
          continue;
        }
      } else {
        v = normal(gen) * magnitudes[static_cast<std::size_t>(i) % 6];
        if (gen() % 97 == 0) {
          float const specials[] = {inf, -inf, nan, -nan, 0.0f, -0.0f, 448.0f, -448.0f, 6.0f};
          v = specials[gen() % 9];
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        m.at(i, j) = v;
      } else {
        m.at(i, j) = qtl::from_float<T>(v);
      }
    }
  }
  return m;
}

// Float patterns at every rounding boundary of E4M3, E5M2 and E2M1: every 16-bit top half (all
// exponents, signs, NaN, Inf, 7 mantissa bits) with low halves that are zero (exact ties), one
// (just above), all ones (just below the next tie), and each single bit of the sticky range.
inline std::vector<float> boundary_floats() {
  std::vector<float> r;
  std::uint32_t const lows[] = {0x0000, 0x0001, 0xffff, 0x8000, 0x7fff, 0x0100};
  for (std::uint32_t hi = 0; hi < 65536; ++hi) {
    for (std::uint32_t const lo : lows) {
      r.push_back(qtl::bits_to_float((hi << 16) | lo));
    }
  }
  // every pattern of the top 11 mantissa bits around the E2M1 and E4M3 ranges, sticky bits varied
  for (std::uint32_t e = 110; e <= 135; ++e) {
    for (std::uint32_t m = 0; m < (1u << 11); ++m) {
      for (std::uint32_t const tail : {0u, 1u, 0x7ffu, 0x400u}) {
        std::uint32_t const bits = (e << 23) | (m << 12) | tail;
        r.push_back(qtl::bits_to_float(bits));
        r.push_back(qtl::bits_to_float(bits | 0x80000000u));
      }
    }
  }
  return r;
}

}  // namespace qtl_test::x86_compare

#endif  // ^^^ QTL_X86 ^^^
