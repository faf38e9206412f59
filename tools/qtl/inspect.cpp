// qtl inspect (see inspect.hpp).

#include "inspect.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <tuple>

#include <qtl/io/safetensors.hpp>

#include "common.hpp"
#include "config_tools.hpp"
#include "recognize.hpp"
#include "staged_output.hpp"

namespace qtl::tool {
namespace {

using qtl::io::json;

/// Per-scheme summary: (scheme, variant) -> module count, in first-seen order of the sorted list.
std::vector<std::tuple<std::string, std::string, std::size_t>> summarize(
    std::vector<quantized_module> const& mods) {
  std::vector<std::tuple<std::string, std::string, std::size_t>> s;
  for (auto const& m : mods) {
    auto it = std::find_if(s.begin(), s.end(), [&](auto const& e) {
      return std::get<0>(e) == m.scheme && std::get<1>(e) == m.variant;
    });
    if (it == s.end()) {
      s.emplace_back(m.scheme, m.variant, 1);
    } else {
      ++std::get<2>(*it);
    }
  }
  return s;
}

/// The FP8 scale hint of the config.json beside `path` (a folder, or a file in one): what settles
/// a scale shape that fits two schemes (a ct-block layer of one block has a [1, 1] scale). None
/// when there is no config.json or it cannot be read: inspect describes tensors, and the config
/// only breaks ties.
fp8_scale_hint config_hint(std::string const& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path const dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  fs::path const cfg = (dir.empty() ? fs::path(".") : dir) / "config.json";
  if (!fs::is_regular_file(cfg, ec)) {
    return fp8_scale_hint::none;
  }
  try {
    auto const doc = read_json_document(cfg, "config.json");
    auto const q = doc.is_object() ? doc.find("quantization_config") : doc.end();
    return q == doc.end() ? fp8_scale_hint::none : fp8_scale_hint_of(*q);
  } catch (std::exception const&) {
    return fp8_scale_hint::none;
  }
}

/// The mixed-precision config of the checkpoint at `path` (its config.json or
/// hf_quant_config.json), summarised: compressed-tensors' groups (format, weights, targets) or
/// ModelOpt's algorithms with their module counts; null when there is none or it cannot be read
/// (inspect describes tensors: a bad config is for explain and lint to report).
json mixed_config_report(std::string const& path) {
  quant_config cfg;
  std::string file;
  try {
    std::filesystem::path const p = quant_config_path({}, path);
    cfg = read_config_file(p).config;
    file = p.filename().string();
  } catch (std::exception const&) {
    return nullptr;
  }
  if (!is_mixed(cfg)) {
    return nullptr;
  }
  json r = {{"file", file}};
  if (cfg.family == quant_family::compressed_tensors) {
    r["kind"] = "compressed-tensors " + cfg.format;
    json groups = json::array();
    for (auto const& g : cfg.config_groups) {
      weight_params const w = ct_group_weights(g);
      std::string weights = w.bits ? std::to_string(*w.bits) + "-bit" : std::string("no weights");
      if (w.quant_type) {
        weights += " " + std::string(w.quant_type->name().view());
      }
      if (!g.strategy.empty()) {
        weights += ", strategy " + g.strategy;
      }
      if (w.group_size) {
        weights += ", group_size " + std::to_string(*w.group_size);
      }
      groups.push_back({{"name", g.name},
                        {"format", g.format.empty() ? cfg.format : g.format},
                        {"weights", weights},
                        {"targets", g.targets}});
    }
    r["groups"] = std::move(groups);
    r["ignore"] = cfg.skip_list;
    return r;
  }
  r["kind"] = "modelopt " + cfg.quant_algo;
  r["moe_quant_algo"] = cfg.moe_quant_algo.empty() ? json(nullptr) : json(cfg.moe_quant_algo);
  std::map<std::string, std::size_t> count;
  std::vector<std::string> order;
  for (auto const& e : cfg.quantized_layers) {
    std::string const a = ascii_upper(e.quant_algo);
    if (count[a]++ == 0) {
      order.push_back(a);
    }
  }
  json algos = json::array();
  for (auto const& a : order) {
    algos.push_back({{"quant_algo", a}, {"modules", count[a]}});
  }
  r["algorithms"] = std::move(algos);
  r["exclude"] = cfg.skip_list;
  return r;
}

json report(std::string const& path, qtl::io::safetensors_checkpoint const& ck, std::string const& assume) {
  json r = json::object();
  r["path"] = path;
  json shards = json::array();
  for (auto const& s : ck.shards()) {
    shards.push_back(s.path().string());
  }
  r["shards"] = shards;
  r["metadata"] = ck.metadata();
  json tensors = json::array();
  std::uint64_t total = 0;
  std::vector<qtl::io::tensor_info const*> infos;
  for (auto const& e : ck.tensors()) {
    auto const& t = *e.tensor;
    json j = json::object();
    j["name"] = t.name;
    j["dtype"] = std::string(qtl::io::dtype_name(t.type));
    j["shape"] = t.shape;
    j["bytes"] = t.bytes.size();
    if (ck.shards().size() > 1) {
      j["shard"] = ck.shards()[e.shard].path().filename().string();
    }
    tensors.push_back(std::move(j));
    total += t.bytes.size();
    infos.push_back(&t);
  }
  r["tensor_count"] = infos.size();
  r["tensor_bytes"] = total;
  r["tensors"] = std::move(tensors);
  auto const mods = recognize(infos, config_hint(path));
  json schemes = json::array();
  for (auto const& [scheme, variant, count] : summarize(mods)) {
    schemes.push_back({{"scheme", scheme}, {"variant", variant}, {"modules", count}});
  }
  json modules = json::array();
  for (auto const& m : mods) {
    modules.push_back(
        {{"module", m.module}, {"scheme", m.scheme}, {"variant", m.variant}, {"tensors", m.tensors}});
  }
  r["quantization"] = {{"schemes", std::move(schemes)}, {"modules", std::move(modules)}};
  if (json mixed = mixed_config_report(path); !mixed.is_null()) {
    r["mixed_config"] = std::move(mixed);
  }
  if (assume == "marlin") {
    r["marlin"] = marlin_report(infos);
  }
  return r;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) {
    s.append(width - s.size(), ' ');
  }
  return s;
}

void print_table(json const& r, std::ostream& out) {
  out << shown(r["path"].get<std::string>()) << ": " << r["tensor_count"].get<std::size_t>()
      << " tensors, " << r["tensor_bytes"].get<std::uint64_t>() << " bytes";
  if (r["shards"].size() > 1) {
    out << " in " << r["shards"].size() << " shards";
  }
  out << "\n";
  for (auto const& [k, v] : r["metadata"].items()) {
    out << "  metadata " << shown(k) << " = " << shown(v.is_string() ? v.get<std::string>() : v.dump())
        << "\n";
  }
  std::size_t wn = 6, wd = 5, ws = 5;
  for (auto const& t : r["tensors"]) {
    wn = std::max(wn, shown(t["name"].get_ref<std::string const&>()).size());
    wd = std::max(wd, t["dtype"].get_ref<std::string const&>().size());
    ws = std::max(ws, qtl::io::shape_string(t["shape"].get<std::vector<std::int64_t>>()).size());
  }
  bool const sharded = r["shards"].size() > 1;
  out << "  " << pad("TENSOR", wn) << "  " << pad("DTYPE", wd) << "  " << pad("SHAPE", ws)
      << "  BYTES" << (sharded ? "        SHARD" : "") << "\n";
  for (auto const& t : r["tensors"]) {
    std::string const bytes = std::to_string(t["bytes"].get<std::uint64_t>());
    out << "  " << pad(shown(t["name"].get<std::string>()), wn) << "  "
        << pad(t["dtype"].get<std::string>(), wd) << "  "
        << pad(qtl::io::shape_string(t["shape"].get<std::vector<std::int64_t>>()), ws) << "  "
        << (sharded ? pad(bytes, 11) + "  " + shown(t["shard"].get<std::string>()) : bytes) << "\n";
  }
  auto const& schemes = r["quantization"]["schemes"];
  if (schemes.empty()) {
    out << "  quantization: none recognised (GPTQ, AWQ, FP8, NVFP4, MXFP4 tensor naming)\n";
  }
  for (auto const& s : schemes) {
    out << "  quantization: " << s["scheme"].get<std::string>() << " ("
        << s["variant"].get<std::string>() << "): " << s["modules"].get<std::size_t>()
        << (s["modules"].get<std::size_t>() == 1 ? " module\n" : " modules\n");
  }
  if (r.contains("mixed_config")) {
    json const& m = r["mixed_config"];
    out << "  config: " << shown(m["kind"].get<std::string>()) << " (" << shown(m["file"].get<std::string>()) << ")";
    if (m.contains("moe_quant_algo") && m["moe_quant_algo"].is_string()) {
      out << ", moe_quant_algo " << shown(m["moe_quant_algo"].get<std::string>());
    }
    out << "\n";
    for (auto const& g : m.value("groups", json::array())) {
      std::string targets;
      std::size_t n = 0;
      for (auto const& t : g["targets"]) {
        if (n++ < 3) {
          targets += (targets.empty() ? "" : ", ") + t.get<std::string>();
        }
      }
      if (n > 3) {
        targets += ", ... (" + std::to_string(n) + " targets)";
      }
      out << "    " << shown(g["name"].get<std::string>()) << " (" << shown(g["format"].get<std::string>())
          << "): " << g["weights"].get<std::string>() << "; targets " << shown(targets, shown_line_limit) << "\n";
    }
    for (auto const& a : m.value("algorithms", json::array())) {
      out << "    " << shown(a["quant_algo"].get<std::string>()) << ": " << a["modules"].get<std::size_t>()
          << " quantized_layers entries\n";
    }
  }
  if (r.contains("marlin")) {
    if (r["marlin"].empty()) out << "  marlin: no I32 qweight/weight tensors\n";
    for (auto const& m : r["marlin"]) out << "  marlin: " << marlin_line(m) << "\n";
  }
}

}  // namespace

void inspect(std::vector<std::string> const& paths, bool as_json, std::ostream& out, std::string const& assume) {
  json files = json::array();
  for (auto const& p : paths) {
    guard_opening_inputs();
    auto const ck = qtl::io::safetensors_checkpoint::open(p);
    guard_checkpoint_mappings(ck);  // recognize() reads g_idx values from the mapping
    test_stop_point("reading");     // test hook (staged_output.hpp): truncate the input here
    files.push_back(report(p, ck, assume));
  }
  if (as_json) {
    out << json{{"files", files}}.dump(2, ' ', true) << "\n";  // non-ASCII as \u escapes
    return;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (i > 0) {
      out << "\n";
    }
    print_table(files[i], out);
  }
}

}  // namespace qtl::tool
