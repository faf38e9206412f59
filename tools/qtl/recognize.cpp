// Quantization-scheme recognition for `qtl inspect` (see recognize.hpp for the rules).

#include "recognize.hpp"

#include <algorithm>
#include <string_view>

namespace qtl::tool {
namespace {

using qtl::io::dtype;
using qtl::io::tensor_info;
using module_map = std::map<std::string, std::map<std::string, tensor_info const*>>;

std::int64_t dim(tensor_info const* t, int d) {
  int const r = static_cast<int>(t->shape.size());
  int const i = d < 0 ? r + d : d;
  return i >= 0 && i < r ? t->shape[static_cast<std::size_t>(i)] : -1;
}

int rank(tensor_info const* t) { return static_cast<int>(t->shape.size()); }

std::string group_text(std::int64_t k, std::int64_t groups) {
  if (groups <= 1) {
    return "channelwise";
  }
  if (k > 0 && k % groups == 0) {
    return "group " + std::to_string(k / groups);
  }
  return std::to_string(groups) + " groups";
}

/// GPTQ / AWQ from qweight, scales, qzeros, g_idx.
bool classify_int(std::map<std::string, tensor_info const*> const& m, quantized_module& q) {
  auto qw = m.find("qweight");
  auto sc = m.find("scales");
  if (qw == m.end() || sc == m.end() || qw->second->type != dtype::I32 || rank(qw->second) != 2 ||
      rank(sc->second) != 2) {
    return false;
  }
  tensor_info const* qweight = qw->second;
  tensor_info const* scales = sc->second;
  tensor_info const* qzeros = m.count("qzeros") ? m.at("qzeros") : nullptr;
  tensor_info const* g_idx = m.count("g_idx") ? m.at("g_idx") : nullptr;
  std::int64_t const n = dim(scales, 1);
  std::int64_t const groups = dim(scales, 0);
  std::int64_t bits = 0;
  std::int64_t k = 0;
  if (dim(qweight, 1) == n) {  // GPTQ: packed along K
    q.scheme = "GPTQ";
    if (g_idx != nullptr && dim(g_idx, 0) > 0) {
      k = dim(g_idx, 0);
      bits = 32 * dim(qweight, 0) / k;
    } else if (qzeros != nullptr && n > 0) {
      bits = 32 * dim(qzeros, 1) / n;
      k = bits > 0 ? dim(qweight, 0) * 32 / bits : 0;
    }
  } else if (n > 0 && dim(qweight, 1) > 0 && (32 * dim(qweight, 1)) % n == 0) {  // AWQ: along N
    q.scheme = "AWQ";
    bits = 32 * dim(qweight, 1) / n;
    k = dim(qweight, 0);
  } else {
    return false;
  }
  q.variant = (bits > 0 ? std::to_string(bits) + "-bit, " : std::string()) + group_text(k, groups);
  if (q.scheme == "GPTQ" && g_idx != nullptr && !g_idx->bytes.empty()) {
    // act-order (desc_act) iff g_idx is not the trivial k / group_size.
    auto const gi = qtl::io::tensor_values<std::int32_t>(*g_idx);
    std::int64_t const gs = groups > 0 ? (k + groups - 1) / groups : 1;
    for (std::size_t i = 0; i < gi.size(); ++i) {
      if (gs > 0 && gi[i] != static_cast<std::int32_t>(static_cast<std::int64_t>(i) / gs)) {
        q.variant += ", act-order";
        break;
      }
    }
  }
  if (qzeros == nullptr) {
    q.variant += ", no zero points";
  }
  for (char const* s : {"qweight", "qzeros", "scales", "g_idx"}) {
    if (m.count(s)) {
      q.tensors.push_back(m.at(s)->name);
    }
  }
  return true;
}

/// compressed-tensors pack-quantized (W4A16, W8A16, WnA16) from weight_packed, weight_scale,
/// weight_shape and the optional weight_zero_point / weight_g_idx.
bool classify_ct_packed(std::map<std::string, tensor_info const*> const& m, quantized_module& q) {
  auto get = [&](char const* s) -> tensor_info const* { return m.count(s) ? m.at(s) : nullptr; };
  tensor_info const* wp = get("weight_packed");
  tensor_info const* ws = get("weight_scale");
  tensor_info const* shape = get("weight_shape");
  if (wp == nullptr || ws == nullptr || shape == nullptr || wp->type != dtype::I32 || rank(wp) != 2 ||
      rank(ws) != 2 || shape->type != dtype::I64 || shape->numel() != 2 || shape->bytes.size() != 16) {
    return false;
  }
  auto const nk = qtl::io::tensor_values<std::int64_t>(*shape);
  std::int64_t const k = nk[1];
  std::int64_t const bits = k > 0 ? 32 * dim(wp, 1) / k : 0;
  tensor_info const* zp = get("weight_zero_point");
  q.scheme = "INT";
  q.variant = "compressed-tensors pack-quantized, " + (bits > 0 ? std::to_string(bits) + "-bit, " : std::string()) +
              group_text(k, dim(ws, 1)) + (zp != nullptr ? ", asymmetric" : ", symmetric");
  if (get("weight_g_idx") != nullptr) {
    q.variant += ", act-order";
  }
  for (char const* n : {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx"}) {
    if (tensor_info const* t = get(n)) {
      q.tensors.push_back(t->name);
    }
  }
  return true;
}

bool classify_float(std::map<std::string, tensor_info const*> const& m, quantized_module& q, fp8_scale_hint hint) {
  auto get = [&](char const* s) -> tensor_info const* { return m.count(s) ? m.at(s) : nullptr; };
  tensor_info const* w = get("weight");
  tensor_info const* wp = get("weight_packed");
  tensor_info const* ws = get("weight_scale");
  tensor_info const* wsi = get("weight_scale_inv");
  auto add = [&](std::initializer_list<char const*> names) {
    for (char const* s : names) {
      if (tensor_info const* t = get(s)) {
        q.tensors.push_back(t->name);
      }
    }
  };
  if (w != nullptr && (w->type == dtype::F8_E4M3 || w->type == dtype::F8_E5M2) &&
      (ws != nullptr || wsi != nullptr)) {
    q.scheme = "FP8";
    tensor_info const* s = wsi != nullptr ? wsi : ws;
    std::string const fmt = w->type == dtype::F8_E4M3 ? "e4m3" : "e5m2";
    std::uint64_t const count = s->numel();
    // A [1, 1] scale fits a tensor, a channel (N = 1) and a block (N, K <= block): the config decides.
    bool const block = rank(s) == 2 && rank(w) == 2 && dim(s, 0) > 0 && dim(s, 1) > 0;
    bool const channel = rank(s) == 2 && dim(s, 1) == 1 && dim(s, 0) == dim(w, 0);
    if (count == 1 && !(hint == fp8_scale_hint::block && block) && !(hint == fp8_scale_hint::channel && channel)) {
      q.variant = fmt + ", per-tensor weight scale";
    } else if (channel && hint != fp8_scale_hint::block) {
      q.variant = fmt + ", per-channel weight scale";
    } else if (block) {
      q.variant = fmt + ", block scales " + qtl::io::shape_string(s->shape) + " for " +
                  qtl::io::shape_string(w->shape);
    } else {
      q.variant = fmt + ", scale " + qtl::io::shape_string(s->shape);
    }
    q.variant += get("input_scale") != nullptr ? ", static input scale" : ", dynamic activations";
    add({"weight", "weight_scale", "weight_scale_inv", "input_scale"});
    return true;
  }
  tensor_info const* packed = wp != nullptr ? wp : w;
  if (packed != nullptr && packed->type == dtype::U8 && ws != nullptr && rank(packed) >= 2) {
    std::int64_t const k = 2 * dim(packed, -1);
    if (ws->type == dtype::F8_E4M3 && dim(ws, -1) * 16 == k) {
      q.scheme = "NVFP4";
      if (get("weight_scale_2") != nullptr) {
        q.variant = "ModelOpt, group 16";
      } else if (get("weight_global_scale") != nullptr) {
        q.variant = "compressed-tensors, group 16";
      } else {
        q.variant = "group 16, no global scale";
      }
      add({"weight", "weight_packed", "weight_scale", "weight_scale_2", "weight_global_scale",
           "input_scale", "input_global_scale"});
      return true;
    }
    if ((ws->type == dtype::U8 || ws->type == dtype::F8_E8M0) && dim(ws, -1) * 32 == k) {
      q.scheme = "MXFP4";
      q.variant = "group 32, E8M0 scales";
      add({"weight", "weight_packed", "weight_scale"});
      return true;
    }
  }
  return false;
}

}  // namespace

fp8_scale_hint fp8_scale_hint_of(qtl::io::json const& qc) {
  if (!qc.is_object()) {
    return fp8_scale_hint::none;
  }
  auto const method = qc.find("quant_method");
  if (method == qc.end() || !method->is_string()) {
    return fp8_scale_hint::none;
  }
  if (*method == "fp8") {
    auto const b = qc.find("weight_block_size");
    return b != qc.end() && b->is_array() ? fp8_scale_hint::block : fp8_scale_hint::tensor;
  }
  auto const groups = qc.find("config_groups");
  if (*method != "compressed-tensors" || groups == qc.end() || !groups->is_object() || groups->empty()) {
    return fp8_scale_hint::none;
  }
  std::string strategy;
  for (auto const& [name, g] : groups->items()) {
    auto const w = g.is_object() ? g.find("weights") : g.end();
    if (!g.is_object() || w == g.end() || !w->is_object() || !w->contains("strategy") ||
        !(*w)["strategy"].is_string()) {
      return fp8_scale_hint::none;
    }
    std::string const s = (*w)["strategy"].get<std::string>();
    if (!strategy.empty() && s != strategy) {
      return fp8_scale_hint::none;  // groups disagree: the shapes alone decide
    }
    strategy = s;
  }
  return strategy == "block"     ? fp8_scale_hint::block
         : strategy == "channel" ? fp8_scale_hint::channel
         : strategy == "tensor"  ? fp8_scale_hint::tensor
                                 : fp8_scale_hint::none;
}

std::vector<quantized_module> recognize(std::vector<tensor_info const*> const& tensors, fp8_scale_hint hint) {
  module_map modules;
  std::map<std::string, std::pair<tensor_info const*, tensor_info const*>> gpt_oss;  // blocks, scales
  for (tensor_info const* t : tensors) {
    std::string_view const name = t->name;
    if (name.ends_with("_blocks")) {
      gpt_oss[std::string(name.substr(0, name.size() - 7))].first = t;
    } else if (name.ends_with("_scales")) {
      gpt_oss[std::string(name.substr(0, name.size() - 7))].second = t;
    }
    auto const dot = name.rfind('.');
    std::string const module = dot == std::string_view::npos ? "" : std::string(name.substr(0, dot));
    std::string const leaf(dot == std::string_view::npos ? name : name.substr(dot + 1));
    modules[module][leaf] = t;
  }
  std::vector<quantized_module> out;
  for (auto const& [module, m] : modules) {
    quantized_module q;
    q.module = module;
    if (classify_int(m, q) || classify_ct_packed(m, q) || classify_float(m, q, hint)) {
      out.push_back(std::move(q));
    }
  }
  for (auto const& [module, bs] : gpt_oss) {
    auto const [blocks, scales] = bs;
    if (blocks != nullptr && scales != nullptr && blocks->type == dtype::U8 &&
        (scales->type == dtype::U8 || scales->type == dtype::F8_E8M0) && rank(blocks) >= 2 &&
        dim(blocks, -1) == 16 && rank(scales) == rank(blocks) - 1 &&
        dim(scales, -1) == dim(blocks, -2)) {
      out.push_back({module, "MXFP4", "gpt-oss blocks, group 32, E8M0 scales",
                     {blocks->name, scales->name}});
    }
  }
  std::sort(out.begin(), out.end(),
            [](quantized_module const& a, quantized_module const& b) { return a.module < b.module; });
  return out;
}

}  // namespace qtl::tool
