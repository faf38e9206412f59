#pragma once
/// \file
/// `qtl::fixed_string<N>`: a string literal usable as a template argument, and
/// `qtl::static_string<Cap>`: a `constexpr` string of bounded capacity (no `std::string`, so it
/// works in constant evaluation under g++ 12 and clang 14, and in device code).

#include <cstddef>
#include <string_view>

#include <qtl/macros.hpp>

namespace qtl {

/// A string literal as a structural value: `template <qtl::fixed_string S>`.
template <std::size_t N>
struct fixed_string {
  char data[N + 1] = {};

  constexpr fixed_string(char const (&s)[N + 1]) {
    for (std::size_t i = 0; i != N + 1; ++i) {
      data[i] = s[i];
    }
  }
  constexpr std::size_t size() const { return N; }
  constexpr std::string_view view() const { return {data, N}; }
  constexpr operator std::string_view() const { return view(); }
};
template <std::size_t M>
fixed_string(char const (&)[M]) -> fixed_string<M - 1>;

/// A string of at most `Cap` characters, built and compared in constant evaluation.
template <std::size_t Cap>
struct static_string {
  char data_[Cap + 1] = {};
  std::size_t size_ = 0;

  constexpr static_string() = default;
  constexpr static_string(std::string_view s) { append(s); }

  constexpr std::size_t size() const { return size_; }
  constexpr char const* c_str() const { return data_; }
  constexpr std::string_view view() const { return {data_, size_}; }
  constexpr operator std::string_view() const { return view(); }

  /// Appends `s`; characters past the capacity are a programming error (caught in constant
  /// evaluation by the out-of-bounds write).
  constexpr static_string& append(std::string_view s) {
    for (char const c : s) {
      data_[size_++] = c;
    }
    data_[size_] = '\0';
    return *this;
  }
  /// Appends the decimal form of `v`.
  constexpr static_string& append_int(long long v) {
    char buf[24] = {};
    int n = 0;
    bool const neg = v < 0;
    unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    do {
      buf[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (neg) {
      buf[n++] = '-';
    }
    while (n > 0) {
      char const c[1] = {buf[--n]};
      append(std::string_view(c, 1));
    }
    return *this;
  }
  friend constexpr bool operator==(static_string const& a, std::string_view b) { return a.view() == b; }
};

}  // namespace qtl
