#pragma once
/// \file
/// The golden cases of test/data/golden/ops (reference outputs of the Python reference), loaded
/// through QTL's safetensors reader. Usage in a Catch2 test:
///
///   #include <golden.hpp>
///   TEST_CASE("pack_cols reproduces the golden cases") {
///     for (auto const& c : qtl::test::golden_cases("pack-cols")) {     // never empty
///       INFO(c.name);
///       int const bits = c.params.at("bits");                          // params: the JSON object
///       auto const q = qtl::test::tensor_values<std::int32_t>(c.in, "q_w");      // dtype checked
///       auto const& shape = c.in.at("q_w").shape;                      // {K, N}
///       auto const want = qtl::test::tensor_values<std::int32_t>(c.expected, "packed");
///       ... REQUIRE(mine == want);
///     }
///   }
///
/// F16/BF16/F8_* read as QTL's storage types (`tensor_values<qtl::bfloat16_t>(c.in, "w")`) or as
/// their bits with an explicit dtype: `tensor_values<std::uint16_t>(c.in, "w", qtl::io::dtype::BF16)`.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/io/safetensors.hpp>

#ifndef QTL_TEST_DATA_DIR
#  error "golden.hpp needs QTL_TEST_DATA_DIR (the build passes it to every unit test)"
#endif  // ^^^ QTL_TEST_DATA_DIR ^^^

namespace qtl::test {

/// One line of cases.jsonl with its two files opened.
struct golden_case {
  std::string name;                // file stem, e.g. "0000-pack-cols"
  std::string op;                  // e.g. "pack-cols"
  qtl::io::json params;            // e.g. {"bits": 2}; flags of `qtl op` (test/data/golden/README.md)
  std::vector<std::int64_t> shape; // [K, N], or [M, K] for scales
  qtl::io::safetensors_file in;        // NNNN-<op>.in.safetensors
  qtl::io::safetensors_file expected;  // NNNN-<op>.expected.safetensors
};

/// test/data/golden/ops
inline std::filesystem::path golden_ops_dir() {
  return std::filesystem::path(QTL_TEST_DATA_DIR) / "golden" / "ops";
}

/// Every case of `op` ("" for all), in file order, files opened and validated.
/// @throws qtl::error when cases.jsonl is missing or malformed, or when `op` has no case (a typo
///         in a test must not pass by looping over nothing).
inline std::vector<golden_case> golden_cases(std::string_view op = "") {
  auto const dir = golden_ops_dir();
  std::ifstream lines(dir / "cases.jsonl");
  if (!lines) {
    throw qtl::error("cannot open " + (dir / "cases.jsonl").string());
  }
  std::vector<golden_case> cases;
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) {
      continue;
    }
    auto const j = qtl::io::json::parse(line);
    if (!op.empty() && j.at("op").get<std::string>() != op) {
      continue;
    }
    golden_case c;
    c.name = j.at("case").get<std::string>();
    c.op = j.at("op").get<std::string>();
    c.params = j.at("params");
    c.shape = j.at("shape").get<std::vector<std::int64_t>>();
    c.in = qtl::io::safetensors_file::open(dir / (c.name + ".in.safetensors"));
    c.expected = qtl::io::safetensors_file::open(dir / (c.name + ".expected.safetensors"));
    cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    throw qtl::error("no golden case for op '" + std::string(op) + "' in " + dir.string());
  }
  return cases;
}

/// The elements of tensor `name` of `file` as `T` (see qtl::io::tensor_values for the dtype
/// check; `as` names the dtype for storage types such as half bits in std::uint16_t).
/// @throws qtl::format_error when the tensor is absent or its dtype is not the one asked for.
template <class T>
std::vector<T> tensor_values(qtl::io::safetensors_file const& file, std::string_view name,
                             std::optional<qtl::io::dtype> as = std::nullopt) {
  return qtl::io::tensor_values<T>(file.at(name), as);
}

}  // namespace qtl::test
