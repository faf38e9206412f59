#pragma once
/// \file
/// `qtl::module_path_match`: the dotted-boundary rule of sglang's `_module_path_match`
/// (sglang's `quantization/utils.py`; docs/spec/semantics.md §4.1), `constexpr`.
///
///   static_assert(qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate"));
///   static_assert(!qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate_up_proj"));

#include <cstddef>
#include <string_view>

namespace qtl {

/// Removes every trailing '.' (Python's `s.rstrip(".")`).
constexpr std::string_view rstrip_dots(std::string_view s) {
  while (!s.empty() && s.back() == '.') {
    s.remove_suffix(1);
  }
  return s;
}

/// sglang's `_module_path_match(ignored, prefix)`: after stripping trailing dots from both, true
/// iff `ignored` is a contiguous run of whole dotted components of `prefix` — anywhere in it,
/// not only at the start ("layers.0.mlp.gate" matches "model.mtp.layers.0.mlp.gate").
/// Equivalently, `"." + ignored + "."` is a substring of `"." + prefix + "."`, which is how the
/// reference writes it (its other two tests are special cases). Case-sensitive; no wildcards.
/// Edge cases kept from the reference: ("", "") is true, ("", "a.b") is false, and an empty
/// component in prefix ("a..b") is matched by an empty `ignored`.
constexpr bool module_path_match(std::string_view ignored, std::string_view prefix) {
  ignored = rstrip_dots(ignored);
  prefix = rstrip_dots(prefix);
  if (ignored.size() > prefix.size()) {
    return false;
  }
  // Occurrences of ignored at k with a '.' (or the padding) on both sides.
  for (std::size_t k = 0; k + ignored.size() <= prefix.size(); ++k) {
    bool const left = k == 0 || prefix[k - 1] == '.';
    std::size_t const end = k + ignored.size();
    bool const right = end == prefix.size() || prefix[end] == '.';
    if (left && right && prefix.substr(k, ignored.size()) == ignored) {
      return true;
    }
  }
  return false;
}

}  // namespace qtl
