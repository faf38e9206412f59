// qtl inspect --assume marlin: the logical shapes of Marlin-repacked tensor sets (see inspect.hpp).
//
// A Marlin weight is int32 [K/16, N*16/pf] ([E, K/16, N*16/pf] for MoE); its shape alone fixes K
// but not N and the bits together (4-bit: N*2 columns, 8-bit: N*4), so the user says the tensors
// are Marlin, and the scales beside the weight give N:
//   <prefix>qweight I32 (GPTQ/AWQ) or <prefix>weight I32 (FP8/FP4) Marlin weight
//   <prefix>scales / <prefix>weight_scale [G, N] (or [E, G, N])   -> N, G groups of K/G rows
//   <prefix>g_idx, <prefix>g_idx_sort_indices [K] non-empty        -> act-order
//   <prefix>qzeros [G, N/pf]                                       -> zero points
// where <prefix> is "module." or "module.w13_" (vLLM's MoE names). bits = 2 * columns / N.

#include "inspect.hpp"

#include <map>
#include <string>

#include <qtl/io/safetensors.hpp>

#include "common.hpp"

namespace qtl::tool {
namespace {

using qtl::io::json;

std::int64_t product(std::vector<std::int64_t> const& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

json marlin_report(std::vector<qtl::io::tensor_info const*> const& tensors) {
  std::map<std::string, qtl::io::tensor_info const*> by_name;
  for (auto const* t : tensors) by_name[t->name] = t;
  auto const find = [&](std::string const& name) -> qtl::io::tensor_info const* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  json out = json::array();
  for (auto const& [name, t] : by_name) {
    std::string prefix;
    std::string matched;
    for (char const* suffix : {"qweight", "weight"}) {
      std::string const s = suffix;
      if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        prefix = name.substr(0, name.size() - s.size());
        matched = s;
        break;
      }
    }
    int const rank = static_cast<int>(t->shape.size());
    if (matched.empty() || t->type != qtl::io::dtype::I32 || (rank != 2 && rank != 3)) {
      continue;
    }
    // "x.weight" counts only where "x.qweight" does not exist (then it is another tensor).
    if (matched == "weight" && find(prefix + "qweight") != nullptr) {
      continue;
    }
    bool const moe = rank == 3;
    std::int64_t const rows = t->shape[static_cast<std::size_t>(rank - 2)];
    std::int64_t const cols = t->shape[static_cast<std::size_t>(rank - 1)];
    json m = {{"tensor", name}, {"K", rows * 16}};
    if (moe) m["experts"] = t->shape[0];
    qtl::io::tensor_info const* scales = find(prefix + "scales");
    if (scales == nullptr) scales = find(prefix + "weight_scale");
    std::int64_t N = 0;
    if (scales != nullptr && static_cast<int>(scales->shape.size()) == rank) {
      N = scales->shape.back();
      m["scales"] = scales->name;
    }
    if (N > 0 && (2 * cols) % N == 0 && (2 * cols / N == 4 || 2 * cols / N == 8)) {
      std::int64_t const bits = 2 * cols / N;
      std::int64_t const groups = scales->shape[static_cast<std::size_t>(rank - 2)];
      m["bits"] = bits;
      m["N"] = N;
      m["groups"] = groups;
      m["group_size"] = groups > 1 && (rows * 16) % groups == 0 ? json((rows * 16) / groups) : json(-1);
    } else {
      // Without scales (or with scales that fit neither width) both readings are reported.
      m["bits"] = nullptr;
      m["N_if_4_bit"] = cols / 2;
      m["N_if_8_bit"] = cols / 4;
    }
    bool act_order = false;
    for (char const* g : {"g_idx", "g_idx_sort_indices"}) {
      if (auto const* gi = find(prefix + g); gi != nullptr && product(gi->shape) != 0) act_order = true;
    }
    m["act_order"] = act_order;
    m["zero_points"] = find(prefix + "qzeros") != nullptr;
    out.push_back(std::move(m));
  }
  return out;
}

std::string marlin_line(json const& m) {
  std::string s = shown(m["tensor"].get<std::string>()) + ": ";
  std::string const e = m.contains("experts") ? std::to_string(m["experts"].get<std::int64_t>()) + " x " : "";
  if (m["bits"].is_null()) {
    s += e + "[K=" + std::to_string(m["K"].get<std::int64_t>()) + ", N=" +
         std::to_string(m["N_if_4_bit"].get<std::int64_t>()) + "] if 4-bit, [K=" + std::to_string(m["K"].get<std::int64_t>()) +
         ", N=" + std::to_string(m["N_if_8_bit"].get<std::int64_t>()) + "] if 8-bit (no scales beside it give N)";
  } else {
    s += std::to_string(m["bits"].get<std::int64_t>()) + "-bit " + e + "[K=" + std::to_string(m["K"].get<std::int64_t>()) +
         ", N=" + std::to_string(m["N"].get<std::int64_t>()) + "]";
    auto const g = m["group_size"].get<std::int64_t>();
    s += g == -1 ? ", channelwise" : ", " + std::to_string(m["groups"].get<std::int64_t>()) + " groups of " + std::to_string(g);
  }
  if (m["act_order"].get<bool>()) s += ", act-order";
  if (m["zero_points"].get<bool>()) s += ", zero points";
  return s;
}

}  // namespace qtl::tool
