// Fused 3-D MoE expert stacks cut into per-expert 2-D tensors (see expert_stacks.hpp).

#include "expert_stacks.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace qtl::tool {

namespace {

using ojson = nlohmann::ordered_json;
using qtl::io::dtype;

/// How a family stores its stacks: (in, out) per expert (`transposed`: [E, H, 2I], [E, I, H]) or
/// (out, in) ([E, 2I, H], [E, H, I]); gate/up alternating along the fused output dimension
/// (`interleaved`) or gate the first half.
struct stack_layout {
  bool transposed = false;
  bool interleaved = false;
};

/// The layout of the model type `model_type`, if qtl knows it.
std::optional<stack_layout> layout_of(std::string_view model_type) {
  if (model_type == "llama4" || model_type == "llama4_text") {
    return stack_layout{true, false};
  }
  if (model_type == "gpt_oss") {
    return stack_layout{true, true};
  }
  static constexpr std::array<std::string_view, 11> v5_fused = {
      "mixtral",      "qwen2_moe",         "qwen3_moe", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next",
      "qwen3_vl_moe", "qwen3_vl_moe_text", "olmoe",     "deepseek_v3", "deepseek_v4"};
  if (std::find(v5_fused.begin(), v5_fused.end(), model_type) != v5_fused.end()) {
    return stack_layout{false, false};
  }
  return std::nullopt;
}

/// The first positive integer of `keys` in `o`.
std::optional<std::int64_t> first_positive(ojson const& o, std::initializer_list<char const*> keys) {
  for (char const* k : keys) {
    auto const it = o.find(k);
    if (it != o.end() && it->is_number_integer() && it->get<std::int64_t>() > 0) {
      return it->get<std::int64_t>();
    }
  }
  return std::nullopt;
}

/// `name` without `suffix`, or nothing when it does not end with it.
std::optional<std::string_view> without_suffix(std::string_view name, std::string_view suffix) {
  if (name.size() < suffix.size() || name.substr(name.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  return name.substr(0, name.size() - suffix.size());
}

/// Which projection a stack holds.
enum class proj { gate_up, down, gate_up_bias, down_bias, other };

/// The projection of the stack `name` and its prefix (up to and including `experts.`).
proj proj_of(std::string_view name, bool bias_tensor, std::string& prefix) {
  if (!bias_tensor) {
    name = without_suffix(name, ".weight").value_or(name);
  }
  static constexpr std::pair<std::string_view, proj> suffixes[] = {{"experts.gate_up_proj", proj::gate_up},
                                                                   {"experts.down_proj", proj::down},
                                                                   {"experts.gate_up_proj_bias", proj::gate_up_bias},
                                                                   {"experts.down_proj_bias", proj::down_bias}};
  for (auto const& [suffix, p] : suffixes) {
    if (auto const base = without_suffix(name, suffix);
        base && (p == proj::gate_up_bias || p == proj::down_bias) == bias_tensor) {
      prefix = std::string(*base) + "experts.";
      return p;
    }
  }
  return proj::other;
}

bool stack_float_type(dtype t) { return t == dtype::F16 || t == dtype::BF16 || t == dtype::F32; }

}  // namespace

bool stack_part::contiguous() const {
  std::int64_t const k = shape.size() == 2 ? shape[1] : 1;
  return k == 1 ? row_step == 1 : (col_step == 1 && row_step == k);
}

bool is_expert_stack(qtl::io::tensor_info const& t) {
  if (!stack_float_type(t.type) || t.name.find("experts") == std::string::npos) {
    return false;
  }
  std::string prefix;
  return t.shape.size() == 3 || (t.shape.size() == 2 && proj_of(t.name, true, prefix) != proj::other);
}

std::string bias_stack_weight(std::string const& name) {
  std::string_view const n(name);
  if (auto const base = without_suffix(n, "_bias");
      base && (base->ends_with("experts.gate_up_proj") || base->ends_with("experts.down_proj"))) {
    return std::string(*base);
  }
  return {};
}

stack_split split_expert_stack(qtl::io::tensor_info const& t, ojson const& model_config) {
  stack_split r;
  bool const bias = t.shape.size() == 2;
  std::string prefix;
  proj const p = proj_of(t.name, bias, prefix);
  if (p == proj::other) {
    r.why_not = "a 3-D expert tensor that is not a gate_up_proj or down_proj stack";
    return r;
  }
  // Llama 4 and the vision-language MoE models keep the text model's dimensions in text_config
  ojson const empty = ojson::object();
  ojson const& top = model_config.is_object() ? model_config : empty;
  auto const tc = top.find("text_config");
  ojson const& dims = tc != top.end() && tc->is_object() && tc->contains("hidden_size") ? *tc : top;
  std::string model_type;
  for (ojson const* o : {&top, &dims}) {
    if (auto const it = o->find("model_type"); model_type.empty() && it != o->end() && it->is_string()) {
      model_type = it->get<std::string>();
    }
  }
  std::optional<stack_layout> const layout = layout_of(model_type);
  if (!layout) {
    r.why_not = model_type.empty()
                    ? std::string("the input has no config.json model_type to tell its stacked layout by")
                    : "its layout is not known for model_type '" + qtl::io::printable(model_type) +
                          "' (qtl cuts the stacks of llama4, gpt_oss and the transformers v5 fused families)";
    return r;
  }
  auto const experts =
      first_positive(dims, {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"});
  auto const hidden = first_positive(dims, {"hidden_size"});
  auto const inter = first_positive(dims, {"moe_intermediate_size", "intermediate_size"});
  if (!experts || !hidden || !inter) {
    r.why_not =
        "config.json lacks the expert count, hidden_size or (moe_)intermediate_size of model_type '" + model_type + "'";
    return r;
  }
  std::int64_t const e = *experts;
  std::int64_t const h = *hidden;
  std::int64_t const i = *inter;
  bool const tr = layout->transposed;
  std::vector<std::int64_t> const expected =
      p == proj::gate_up        ? (tr ? std::vector<std::int64_t>{e, h, 2 * i} : std::vector<std::int64_t>{e, 2 * i, h})
      : p == proj::down         ? (tr ? std::vector<std::int64_t>{e, i, h} : std::vector<std::int64_t>{e, h, i})
      : p == proj::gate_up_bias ? std::vector<std::int64_t>{e, 2 * i}
                                : std::vector<std::int64_t>{e, h};
  if (t.shape != expected) {
    r.why_not = "shape " + qtl::io::shape_string(t.shape) + " is not " + model_type + "'s " +
                qtl::io::shape_string(expected) + " (E = " + std::to_string(e) + ", H = " + std::to_string(h) +
                ", I = " + std::to_string(i) + " from config.json)";
    return r;
  }
  auto const block = static_cast<std::uint64_t>(expected[1]) * static_cast<std::uint64_t>(bias ? 1 : expected[2]);
  for (std::int64_t x = 0; x < e; ++x) {
    std::uint64_t const base = static_cast<std::uint64_t>(x) * block;
    std::string const ex = prefix + std::to_string(x) + ".";
    auto add = [&](char const* leaf, std::vector<std::int64_t> shape, std::uint64_t offset, std::int64_t rs,
                   std::int64_t cs) {
      r.parts.push_back(
          {ex + leaf + (bias ? ".bias" : ".weight"), std::move(shape), base + offset, rs, cs, base, base + block});
    };
    if (p == proj::gate_up || p == proj::gate_up_bias) {
      // gate, up: interleaved (gpt-oss) start at 0 and 1 with step 2; halves at 0 and I
      std::uint64_t const up = layout->interleaved ? 1 : static_cast<std::uint64_t>(i) * (tr || bias ? 1 : h);
      std::int64_t const step = layout->interleaved ? 2 : 1;
      std::vector<std::int64_t> const shape = bias ? std::vector<std::int64_t>{i} : std::vector<std::int64_t>{i, h};
      std::int64_t const rs = bias || tr ? step : h;
      std::int64_t const cs = bias ? 0 : tr ? 2 * i : 1;
      add("gate_proj", shape, 0, rs, cs);
      add("up_proj", shape, up, rs, cs);
    } else {
      std::vector<std::int64_t> const shape = bias ? std::vector<std::int64_t>{h} : std::vector<std::int64_t>{h, i};
      add("down_proj", shape, 0, bias || tr ? 1 : i, bias ? 0 : tr ? h : 1);
    }
  }
  return r;
}

namespace {

/// Elements of `sizeof(U)` bytes moved as U through memcpy (the stack's bytes may be misaligned
/// in a foreign file; the compiler makes each a plain load).
template <class U>
void gather_typed(stack_part const& p, std::byte const* src, std::byte* out) {
  std::int64_t const n = p.shape[0];
  std::int64_t const k = p.shape.size() == 2 ? p.shape[1] : 1;
  constexpr std::int64_t tile = 64;
  for (std::int64_t k0 = 0; k0 < k; k0 += tile) {
    for (std::int64_t n0 = 0; n0 < n; n0 += tile) {
      std::int64_t const k1 = std::min(k, k0 + tile);
      std::int64_t const n1 = std::min(n, n0 + tile);
      for (std::int64_t kk = k0; kk < k1; ++kk) {
        std::byte const* col = src + (p.first + static_cast<std::uint64_t>(kk * p.col_step)) * sizeof(U);
        for (std::int64_t nn = n0; nn < n1; ++nn) {
          U v;
          std::memcpy(&v, col + static_cast<std::uint64_t>(nn * p.row_step) * sizeof(U), sizeof(U));
          std::memcpy(out + static_cast<std::uint64_t>(nn * k + kk) * sizeof(U), &v, sizeof(U));
        }
      }
    }
  }
}

}  // namespace

void gather_part(stack_part const& part, std::span<std::byte const> stack, std::size_t elem, std::byte* out) {
  // copied as unsigned integers of the element's width: the bits travel unchanged
  if (elem == 2) {
    gather_typed<std::uint16_t>(part, stack.data(), out);
  } else {
    gather_typed<std::uint32_t>(part, stack.data(), out);
  }
}

}  // namespace qtl::tool
