// libFuzzer target for the quantization-config loader (qtl/io/quant_config.hpp) and the rules it
// feeds (qtl/rules/consumers.hpp). Any input must either be rejected with qtl::config_error or
// load into a config that every consumer can decide on for a fixed set of module names without
// throwing (the consumers' own errors, bad regexes included, are recorded in the decision), and
// whose decisions print as JSON. A loaded config's values (top level and every `dynamic` rule's
// overrides, whatever their JSON types) then go through qtl/io/config_values.hpp under both rule
// sets: accepted, or refused with qtl::config_error. Anything else (a crash, another exception,
// an over-read) aborts.
// Seeds: fuzz/corpus/quant_config/ (quantization configs of the golden files, and variants).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <qtl/error.hpp>
#include <qtl/io/config_values.hpp>
#include <qtl/io/json_parse.hpp>
#include <qtl/io/quant_config.hpp>
#include <qtl/rules/consumers.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  std::string_view const text(reinterpret_cast<char const*>(data), size);
  qtl::quant_config cfg;
  try {
    cfg = qtl::io::parse_quant_config(text);
  } catch (qtl::config_error const&) {
    return 0;  // rejected: the expected outcome for most inputs
  }
  static constexpr std::string_view modules[] = {
      "model.layers.0.self_attn.qkv_proj",
      "model.layers.1.mlp.gate_up_proj",
      "model.layers.2.mlp.experts",
      "model.layers.3.mlp.down_proj",
      "lm_head",
      "model.embed_tokens",
      "model.language_model.layers.0.self_attn.fused_qkv_a_proj_with_mqa",
  };
  nlohmann::ordered_json doc = qtl::io::parse_json_like_python<qtl::config_error>(text, "");  // parsed above
  nlohmann::ordered_json const qobj =
      doc.is_object() && doc.contains("quantization_config") ? doc["quantization_config"] : doc;
  for (auto const rules : {qtl::io::value_rules::engines, qtl::io::value_rules::written}) {
    try {
      qtl::io::validate_config_values(cfg, qobj, "fuzz", rules);
    } catch (qtl::config_error const&) {
      // refused: fine
    }
  }
  std::size_t total = 0;
  for (std::string_view const m : modules) {
    for (qtl::consumer const c : qtl::all_consumers) {
      qtl::decision const d = qtl::decide(cfg, c, m);  // must not throw
      total += qtl::to_json(d).size();
      if (d.skipped && d.bits) {
        std::abort();  // a skipped layer carries no weight parameters
      }
    }
  }
  return total == 0 ? 1 : 0;
}
