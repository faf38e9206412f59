// libFuzzer target for the compiled rule indexes: every answer from an index equals the linear
// reference loop it replaces.
// Input: <entries> '\0' <names>, each a list separated by '\x1f' (no '\0': the entries are also
// the names). The entries serve as a skip list, as `extra_config` keys, as block names and (the
// first four) as a packed-modules mapping. Properties checked (abort on violation):
//   * substring_set::first_in / first_proper_in (plain and case-folded) equal the first-entry
//     loops; containing_index::first_containing equals the first-text loop;
//   * glob_to_regex(entry), when it gives a regex, matches exactly what glob_match matches;
//   * decide(compiled_config, c, name) equals decide(quant_config, c, name) for every consumer
//     and two layer kinds (the dialect indexes, the skip-list and fused indexes, the compiled
//     `dynamic` rules — the entries are also `dynamic` keys), errors included.
// Build: fuzz/run.sh (clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -Iinclude ...).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <qtl/match/containing_index.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/substring_set.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/consumers.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  while (true) {
    std::size_t const cut = s.find('\x1f');
    out.emplace_back(s.substr(0, cut));
    if (cut == std::string_view::npos) {
      return out;
    }
    s = s.substr(cut + 1);
  }
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string s) {
  for (char& c : s) {
    c = lower(c);
  }
  return s;
}

void check_substring_indexes(std::vector<std::string> const& entries, std::string const& name) {
  for (bool const fold : {false, true}) {
    qtl::substring_set const set(entries, fold);
    int first = -1;
    int proper = -1;
    for (std::size_t i = 0; i != entries.size(); ++i) {
      bool const in = fold ? lowered(name).find(lowered(entries[i])) != std::string::npos
                           : name.find(entries[i]) != std::string::npos;
      if (in && first < 0) {
        first = static_cast<int>(i);
      }
      if (!fold && in && entries[i] != name && proper < 0) {
        proper = static_cast<int>(i);
      }
    }
    if (set.first_in(name) != first || (!fold && set.first_proper_in(name) != proper)) {
      std::abort();
    }
  }
  qtl::containing_index const containing(entries);
  long expect = -1;
  for (std::size_t i = 0; i != entries.size() && expect < 0; ++i) {
    expect = entries[i].find(name) != std::string::npos ? static_cast<long>(i) : -1;
  }
  if (containing.first_containing(name) != expect) {
    std::abort();
  }
}

void check_glob(std::string const& glob, std::string const& name) {
  std::optional<std::string> const re = qtl::glob_to_regex(glob);
  if (!re) {
    return;
  }
  bool expect = false;
  try {
    expect = qtl::glob_match(glob, name);
  } catch (...) {
    std::abort();  // a glob that translates never makes glob_match throw
  }
  try {
    if (qtl::regex(*re).match(name) != expect) {
      std::abort();
    }
  } catch (qtl::regex_unsupported_error const&) {
    // the translation outgrew a regex limit: the indexes then ask glob_match
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size > 2048) {
    return 0;
  }
  std::string_view const all(reinterpret_cast<char const*>(data), size);
  std::size_t const cut = all.find('\0');
  std::vector<std::string> const entries = split(all.substr(0, cut));
  std::vector<std::string> const names = cut == std::string_view::npos ? entries : split(all.substr(cut + 1));
  if (entries.size() > 48 || names.size() > 8) {
    return 0;
  }
  qtl::quant_config cfg;
  cfg.family = static_cast<qtl::quant_family>(size % 7);
  cfg.quant_algo = size % 2 ? "NVFP4" : "FP8";
  cfg.skip_list = entries;
  for (std::size_t i = 0; i != entries.size(); ++i) {
    qtl::extra_config_entry e;
    e.key = entries[i];
    e.bits = qtl::py_value::of_int(i % 2 ? 16 : 8);
    cfg.extra_config.push_back(e);
    cfg.dynamic.push_back(qtl::dynamic_rule{entries[i], {}});
    if (i % 3 == 0) {
      cfg.block_name_to_quantize.push_back(entries[i]);
    }
  }
  for (std::size_t i = 0; i + 1 < entries.size() && i < 4; i += 2) {
    cfg.packed_modules_mapping.push_back({entries[i], {entries[i + 1], entries[i] + "_b"}});
  }
  qtl::compiled_config const cc(cfg);
  for (std::string const& name : names) {
    check_substring_indexes(entries, name);
    for (std::string const& e : entries) {
      check_glob(e, name);
    }
    for (qtl::consumer const c : qtl::all_consumers) {
      for (qtl::layer_kind const kind : {qtl::infer_layer_kind(name), qtl::layer_kind::moe}) {
        std::string const ref = to_json(qtl::decide(cfg, c, name, kind));
        std::string const fast = to_json(qtl::decide(cc, c, name, kind));
        if (ref != fast) {
          std::fprintf(stderr, "reference %s\ncompiled  %s\n", ref.c_str(), fast.c_str());
          std::abort();
        }
      }
    }
  }
  return 0;
}
