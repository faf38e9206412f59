#pragma once
/// \file
/// The `qtl::error` hierarchy. Host functions throw these, naming the argument and the value at
/// fault; CUDA launchers return `cudaError_t` instead, and device code never throws.

#include <cstddef>
#include <stdexcept>
#include <string>

namespace qtl {

/// Base of every error QTL throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A shape, dimension or extent that the operation cannot take (names the dimension and value).
class shape_error : public error {
 public:
  using error::error;
};

/// A run-time value outside the supported set of a compile-time dispatch (names value and set).
class unsupported_error : public error {
 public:
  using error::error;
};

/// A malformed or unknown field of a quantization config (names the field).
class config_error : public error {
 public:
  using error::error;
};

/// A file whose bytes do not follow its format (names the file and the problem).
class format_error : public error {
 public:
  using error::error;
};

/// A regular expression that Python's `re` rejects too (`re.error`), or that QTL's glob matcher
/// cannot read; `position()` is the offset in the pattern where the problem starts.
class regex_error : public error {
 public:
  regex_error(std::string const& what, std::size_t position)
      : error(what + " at position " + std::to_string(position)), position_(position) {}
  std::size_t position() const noexcept { return position_; }

 private:
  std::size_t position_;
};

/// A regular expression that Python's `re` accepts but QTL's regex engine does not run (a
/// backreference, an inline flag, a non-ASCII character, ...; see `<qtl/match/regex.hpp>`) or
/// one beyond its capacities: not a `regex_error`, since Python would not raise one for it.
/// `position()` is the offset in the pattern where the construct starts.
class regex_unsupported_error : public unsupported_error {
 public:
  regex_unsupported_error(std::string const& what, std::size_t position)
      : unsupported_error(what + " at position " + std::to_string(position)), position_(position) {}
  std::size_t position() const noexcept { return position_; }

 private:
  std::size_t position_;
};

/// A value outside the range an operation accepts (e.g. a code wider than its pack width).
class value_error : public error {
 public:
  using error::error;
};

}  // namespace qtl
