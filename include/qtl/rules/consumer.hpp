#pragma once
/// \file
/// `qtl::consumer`: the engines' loaders whose matching dialects QTL reproduces, with their names
/// as the tool prints them and the labels of the golden configs. What each one decides is in
/// <qtl/rules/consumers.hpp>.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qtl {

/// Every consumer whose dialect QTL reproduces.
enum class consumer : std::uint8_t {
  sglang_fp8,
  vllm_fp8,
  sglang_is_layer_skipped,
  sglang_awq,
  vllm_awq,
  sglang_compressed_tensors,
  vllm_compressed_tensors,
  compressed_tensors,
  sglang_modelopt,
  vllm_modelopt,
  fnmatch,
  fnmatch_subtree,
  transformers_v4,
  transformers_v4_bnb,
  transformers_v5,
  sglang_gptq,
  vllm_gptq,
  sglang_auto_round,
  vllm_auto_round,
};

inline constexpr std::array<consumer, 19> all_consumers = {
    consumer::sglang_fp8,
    consumer::vllm_fp8,
    consumer::sglang_is_layer_skipped,
    consumer::sglang_awq,
    consumer::vllm_awq,
    consumer::sglang_compressed_tensors,
    consumer::vllm_compressed_tensors,
    consumer::compressed_tensors,
    consumer::sglang_modelopt,
    consumer::vllm_modelopt,
    consumer::fnmatch,
    consumer::fnmatch_subtree,
    consumer::transformers_v4,
    consumer::transformers_v4_bnb,
    consumer::transformers_v5,
    consumer::sglang_gptq,
    consumer::vllm_gptq,
    consumer::sglang_auto_round,
    consumer::vllm_auto_round,
};

/// The consumer's name (snake_case, as the tool prints it).
constexpr std::string_view consumer_name(consumer c) {
  switch (c) {
    case consumer::sglang_fp8:
      return "sglang_fp8";
    case consumer::vllm_fp8:
      return "vllm_fp8";
    case consumer::sglang_is_layer_skipped:
      return "sglang_is_layer_skipped";
    case consumer::sglang_awq:
      return "sglang_awq";
    case consumer::vllm_awq:
      return "vllm_awq";
    case consumer::sglang_compressed_tensors:
      return "sglang_compressed_tensors";
    case consumer::vllm_compressed_tensors:
      return "vllm_compressed_tensors";
    case consumer::compressed_tensors:
      return "compressed_tensors";
    case consumer::sglang_modelopt:
      return "sglang_modelopt";
    case consumer::vllm_modelopt:
      return "vllm_modelopt";
    case consumer::fnmatch:
      return "fnmatch";
    case consumer::fnmatch_subtree:
      return "fnmatch_subtree";
    case consumer::transformers_v4:
      return "transformers_v4";
    case consumer::transformers_v4_bnb:
      return "transformers_v4_bnb";
    case consumer::transformers_v5:
      return "transformers_v5";
    case consumer::sglang_gptq:
      return "sglang_gptq";
    case consumer::vllm_gptq:
      return "vllm_gptq";
    case consumer::sglang_auto_round:
      return "sglang_auto_round";
    case consumer::vllm_auto_round:
      return "vllm_auto_round";
  }
  return "?";
}

/// The consumer of a canonical name, or nothing.
constexpr std::optional<consumer> consumer_from_name(std::string_view name) {
  for (consumer const c : all_consumers) {
    if (consumer_name(c) == name) {
      return c;
    }
  }
  return std::nullopt;
}

namespace detail {
constexpr bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
constexpr char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
/// Case-insensitive (ASCII) `part in s`.
constexpr bool icontains(std::string_view s, std::string_view part) {
  if (part.size() > s.size()) {
    return false;
  }
  for (std::size_t i = 0; i + part.size() <= s.size(); ++i) {
    bool ok = true;
    for (std::size_t j = 0; j != part.size() && ok; ++j) {
      ok = ascii_lower(s[i + j]) == ascii_lower(part[j]);
    }
    if (ok) {
      return true;
    }
  }
  return false;
}
}  // namespace detail

/// The consumer a label names: a canonical name, or a label of the `expected` fields of the
/// golden configs (`"sglang_Fp8Config (model.-normalized, ...)"`, `"vllm_INC (...)"`,
/// `"fnmatch_glob_reading"`, ...): the words before the first parenthesis decide.
constexpr std::optional<consumer> consumer_from_label(std::string_view label) {
  if (auto const c = consumer_from_name(label.substr(0, label.find_first_of(" (")))) {
    return c;
  }
  std::string_view const head = label.substr(0, label.find('('));
  using detail::icontains;
  bool const sg = head.starts_with("sglang");
  bool const vl = head.starts_with("vllm");
  if (icontains(head, "awq")) {
    return sg ? consumer::sglang_awq : consumer::vllm_awq;  // "sglang/vllm is_layer_skipped_awq"
  }
  if (icontains(head, "fp8config") || (icontains(head, "fp8") && (sg || vl))) {
    return sg ? consumer::sglang_fp8 : consumer::vllm_fp8;
  }
  if (icontains(head, "dot_boundary") || head == "sglang_is_layer_skipped") {
    return consumer::sglang_is_layer_skipped;
  }
  if (icontains(head, "should_ignore_layer") || icontains(head, "compressed_tensors") ||
      icontains(head, "compressed-tensors") || icontains(head, "match_name")) {
    if (!sg && !vl) {
      return consumer::compressed_tensors;  // the library's own match_name
    }
    return sg ? consumer::sglang_compressed_tensors : consumer::vllm_compressed_tensors;
  }
  if (icontains(head, "modelopt")) {
    return sg ? consumer::sglang_modelopt : consumer::vllm_modelopt;
  }
  if (icontains(head, "fnmatch") || icontains(head, "glob")) {
    return icontains(head, "reading") || icontains(head, "subtree") ? consumer::fnmatch_subtree : consumer::fnmatch;
  }
  if (icontains(head, "transformers_v5")) {
    return consumer::transformers_v5;
  }
  if (icontains(head, "transformers_v4")) {
    return icontains(head, "bnb") || icontains(head, "int8") ? consumer::transformers_v4_bnb
                                                             : consumer::transformers_v4;
  }
  if (icontains(head, "dynamic_override") || icontains(head, "gptq")) {
    return sg ? consumer::sglang_gptq : consumer::vllm_gptq;
  }
  if (icontains(head, "auto_round") || icontains(head, "autoround") || icontains(head, "_inc")) {
    return sg ? consumer::sglang_auto_round : consumer::vllm_auto_round;
  }
  return std::nullopt;
}

}  // namespace qtl
