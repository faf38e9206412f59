#pragma once
/// \file
/// `qtl::decision`: what one consumer does with one layer, and its JSON form. The `qtl` tool
/// prints exactly these keys:
///
///     {"module": "model.layers.18.mlp.gate_up_proj", "consumer": "sglang_gptq",
///      "skipped": false, "bits": 4, "group_size": 32, "desc_act": false, "sym": true,
///      "quant_type": "uint4b8", "rule": "+:.*\\.18\\..*gate.*", "error": null}
///
/// `skipped` is true when the layer stays unquantized (a skip list or `-:` rule matched, or the
/// consumer's quantization method does not handle the layer); the weight fields are then null.
/// `rule` is the config entry that decided (text as in the file) or null; `error` is the
/// exception the consumer would raise for this layer (`Type: message`) or null — or a limit of
/// QTL itself, `qtl::Type: message` (`error_from_qtl`: a module name too long for it, a pattern
/// Python's `re` accepts that QTL's regex engine does not run), when the consumer's answer is not
/// known. When `error` is set the other fields show how far the consumer got.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <qtl/scalar_type.hpp>

namespace qtl {

/// One consumer's decision for one layer.
struct decision {
  std::string module;
  std::string consumer;
  bool skipped = false;
  std::optional<std::int64_t> bits;
  std::optional<std::int64_t> group_size;
  std::optional<bool> desc_act;
  std::optional<bool> sym;
  std::optional<scalar_type> quant_type;
  std::optional<std::string> rule;
  std::optional<std::string> error;
  /// Under a mixed-precision config (qtl/rules/mixed.hpp): the scheme the layer gets and the
  /// entry that gives it (`group_1 (pack-quantized)`, `NVFP4`); null otherwise. Not one of
  /// `to_json`'s keys (the tool prints it beside them).
  std::optional<std::string> scheme;

  /// Whether `error` is a limit of QTL (`qtl::...`) rather than what the consumer raises.
  bool error_from_qtl() const { return error.has_value() && error->starts_with("qtl::"); }

  /// Same outcome (everything but the module and consumer names).
  bool same_outcome(decision const& o) const {
    return skipped == o.skipped && bits == o.bits && group_size == o.group_size && desc_act == o.desc_act &&
           sym == o.sym && quant_type == o.quant_type && error.has_value() == o.error.has_value() &&
           scheme == o.scheme;
  }
};

/// A JSON string literal (RFC 8259 escapes; bytes >= 0x80 are passed through).
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char const c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8] = "\\u00";
          char const* hex = "0123456789abcdef";
          buf[4] = hex[(static_cast<unsigned char>(c) >> 4) & 0xF];
          buf[5] = hex[static_cast<unsigned char>(c) & 0xF];
          buf[6] = '\0';
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

/// The decision as one JSON object, keys in the order module, consumer, skipped, bits,
/// group_size, desc_act, sym, quant_type, rule, error.
inline std::string to_json(decision const& d) {
  auto const opt_int = [](std::optional<std::int64_t> const& v) {
    return v ? std::to_string(*v) : std::string("null");
  };
  auto const opt_bool = [](std::optional<bool> const& v) {
    return v ? std::string(*v ? "true" : "false") : std::string("null");
  };
  auto const opt_str = [](std::optional<std::string> const& v) {
    return v ? json_quote(*v) : std::string("null");
  };
  std::string out = "{\"module\": " + json_quote(d.module);
  out += ", \"consumer\": " + json_quote(d.consumer);
  out += ", \"skipped\": " + std::string(d.skipped ? "true" : "false");
  out += ", \"bits\": " + opt_int(d.bits);
  out += ", \"group_size\": " + opt_int(d.group_size);
  out += ", \"desc_act\": " + opt_bool(d.desc_act);
  out += ", \"sym\": " + opt_bool(d.sym);
  out += ", \"quant_type\": " + (d.quant_type ? json_quote(d.quant_type->name().view()) : std::string("null"));
  out += ", \"rule\": " + opt_str(d.rule);
  out += ", \"error\": " + opt_str(d.error);
  out += "}";
  return out;
}

}  // namespace qtl
