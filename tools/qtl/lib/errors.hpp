#pragma once
// The error types of the qtl commands. The CLI maps them to exit codes (common.hpp): a
// `usage_error` is a command-line mistake (1), every other exception a file or data problem (2).

#include <stdexcept>

#include <qtl/error.hpp>

namespace qtl::tool {

/// A mistake in the command's options (a flag that does not apply, values that exclude each
/// other), found after the command line was parsed (exit code 1).
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A problem with the files or the data that is not already a qtl::error (exit code 2).
class data_error : public qtl::error {
 public:
  using qtl::error::error;
};

}  // namespace qtl::tool
