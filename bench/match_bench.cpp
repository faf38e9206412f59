// Deciding every linear layer of a 94-layer MoE model against a GPTQ `dynamic` config, as
// sglang/vLLM's get_dynamic_override does: rules in the config's order, each `re.match`ed
// (anchored at the start) against the module name, the first match wins.
//
//   names   94 layers x (4 attention projections + 128 experts x 3 projections) = 36,472
//   rules   40 keys in the style of GPTQModel's dynamic configs (test/data/golden/configs/gptq_*),
//           two of them with negative lookahead
//
// Engines, on the same names and rules in the same run (items_per_second = names per second):
//   BM_qtl_regex       qtl::regex::match rule by rule (DFA for lookahead-free rules, NFA for the
//                      two lookahead rules)
//   BM_qtl_regex_set   qtl::regex_set::first_match: the same decision, the lookahead-free rules on
//                      one combined DFA
//   BM_qtl_re_match    qtl::re_match(pattern, name), the constexpr free function, at run time:
//                      it keeps a qtl::regex per pattern after the pattern's second use
//   BM_qtl_nfa_only    the NFA alone, parsing on every call (what re_match costs uncached)
//   BM_std_regex       std::regex (ECMAScript) with match_continuous, i.e. anchored at the start.
//                      ECMAScript differs from Python re in places these rules do not touch
//                      ($ never matches before a final '\n', no \Z, '{' rules, Unicode classes).
//   BM_pcre2_jit       PCRE2 with JIT, compiled with PCRE2_ANCHORED (QTL_HAVE_PCRE2 builds only).
//                      PCRE2 backtracks: (a*)*b-style rules are exponential there, not here.
//   BM_memcpy_names    a copy of the names' bytes (the contract's reference figure; bytes_per_second).
// Every engine's decisions are compared with qtl's once, before timing; a difference stops the
// benchmark with an error.

#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>

#include "support/memcpy_baseline.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#if defined(QTL_HAVE_PCRE2)
#  define PCRE2_CODE_UNIT_WIDTH 8
#  include <pcre2.h>
#endif  // ^^^ QTL_HAVE_PCRE2 ^^^

namespace {

std::vector<std::string> const& module_names() {
  static std::vector<std::string> const names = [] {
    std::vector<std::string> v;
    for (int layer = 0; layer != 94; ++layer) {
      std::string const base = "model.layers." + std::to_string(layer) + ".";
      for (char const* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
        v.push_back(base + "self_attn." + p);
      }
      for (int e = 0; e != 128; ++e) {
        for (char const* p : {"gate_proj", "up_proj", "down_proj"}) {
          v.push_back(base + "mlp.experts." + std::to_string(e) + "." + p);
        }
      }
    }
    return v;
  }();
  return names;
}

struct rule {
  bool negative;  // "-:" key: the layer is not quantized
  std::string pattern;
};

// 40 GPTQ dynamic keys; "+:" / "-:" prefixes as GPTQModel writes them.
std::vector<rule> const& dynamic_rules() {
  static std::vector<rule> const rules = [] {
    std::vector<std::string> keys = {
        R"(-:^model\.layers\.(?!(?:[0-9]|[1-8][0-9]|9[0-3])\.)\d+\.)",  // lookahead: layers past the model
        R"(-:.*lm_head.*)",
        R"(-:.*\.mlp\.gate$)",
        R"(-:.*shared_expert.*)",
        R"(-:.*\.embed_tokens.*)",
    };
    for (char const* layer : {"1", "5", "17", "33", "48", "60", "77", "90"}) {
      keys.push_back(std::string(R"(+:model\.layers\.)") + layer + R"(\.mlp\.experts\.\d+\.down_proj$)");
    }
    for (char const* pair : {"0|64", "1|65", "7|71", "13|99", "21|100", "34|111", "55|120", "63|127"}) {
      keys.push_back(std::string(R"(+:.*\.experts\.(?:)") + pair + R"()\.(?:gate|up)_proj)");
    }
    keys.push_back(R"(+:^model\.layers\.(?!(?:0|1|2|3)\.)\d+\.self_attn\.[qkv]_proj$)");  // lookahead
    keys.push_back(R"(+:.*\.self_attn\.o_proj)");
    for (char const* layer : {"2", "11", "29", "41", "52", "68", "80", "93"}) {
      keys.push_back(std::string(R"(-:.*\.layers\.)") + layer + R"(\.mlp\.experts\.1[0-2][0-9]\.up_proj)");
    }
    for (char const* tens : {"1", "2", "3", "4", "5", "6", "7", "8"}) {
      keys.push_back(std::string(R"(+:.*layers\.(?:)") + tens + R"([0-9])\.mlp\.experts\.[0-9]{1,2}\.gate_proj)");
    }
    keys.push_back(R"(+:.*\.mlp\.experts\.\d+\.(?:gate|up|down)_proj)");
    std::vector<rule> out;
    for (auto const& k : keys) {
      bool const neg = k.rfind("-:", 0) == 0;
      bool const pos = k.rfind("+:", 0) == 0;
      out.push_back({neg, (neg || pos) ? k.substr(2) : k});
    }
    return out;
  }();
  return rules;
}

// The decision: index of the first matching rule, or -1 (the config's defaults).
template <class Match>
int decide(std::string const& name, std::size_t n_rules, Match&& match) {
  for (std::size_t r = 0; r != n_rules; ++r) {
    if (match(r, name)) {
      return static_cast<int>(r);
    }
  }
  return -1;
}

std::vector<int> const& qtl_decisions() {
  static std::vector<int> const d = [] {
    std::vector<qtl::regex> rx;
    for (auto const& r : dynamic_rules()) {
      rx.emplace_back(r.pattern);
    }
    std::vector<int> out;
    for (auto const& name : module_names()) {
      out.push_back(decide(name, rx.size(), [&](std::size_t r, std::string const& n) { return rx[r].match(n); }));
    }
    return out;
  }();
  return d;
}

template <class Match>
void run(benchmark::State& state, std::size_t n_rules, Match&& match) {
  auto const& names = module_names();
  auto const& expect = qtl_decisions();
  std::size_t evaluated = 0;
  for (std::size_t i = 0; i != names.size(); ++i) {
    int const d = decide(names[i], n_rules, match);
    evaluated += d < 0 ? n_rules : static_cast<std::size_t>(d) + 1;
    if (d != expect[i]) {
      state.SkipWithError(("decision differs from qtl's on " + names[i]).c_str());
      return;
    }
  }
  std::size_t bytes = 0;
  for (auto const& n : names) {
    bytes += n.size();
  }
  for (auto _ : state) {
    for (auto const& name : names) {
      int const d = decide(name, n_rules, match);
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * names.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["names"] = static_cast<double>(names.size());
  state.counters["rules_per_name"] = static_cast<double>(evaluated) / static_cast<double>(names.size());
}

void bm_qtl_regex(benchmark::State& state) {
  std::vector<qtl::regex> rx;
  std::size_t dfa = 0;
  for (auto const& r : dynamic_rules()) {
    rx.emplace_back(r.pattern);
    dfa += rx.back().uses_dfa() ? 1 : 0;
  }
  run(state, rx.size(), [&](std::size_t r, std::string const& n) { return rx[r].match(n); });
  state.counters["rules_on_dfa"] = static_cast<double>(dfa);
}
BENCHMARK(bm_qtl_regex)->Name("BM_qtl_regex")->Unit(benchmark::kMillisecond);

void bm_qtl_regex_set(benchmark::State& state) {
  // The same decision through qtl::regex_set::first_match: the 38 lookahead-free rules on one
  // combined DFA (one pass per name), the two lookahead rules on their own while they can win.
  std::vector<std::string> patterns;
  for (auto const& r : dynamic_rules()) {
    patterns.push_back(r.pattern);
  }
  qtl::regex_set const set(patterns);
  auto const& names = module_names();
  auto const& expect = qtl_decisions();
  for (std::size_t i = 0; i != names.size(); ++i) {
    if (set.first_match(names[i]) != expect[i]) {
      state.SkipWithError(("regex_set decision differs on " + names[i]).c_str());
      return;
    }
  }
  for (auto _ : state) {
    for (auto const& name : names) {
      int const d = set.first_match(name);
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * names.size()));
  state.counters["names"] = static_cast<double>(names.size());
  state.counters["rules_on_combined_dfa"] = static_cast<double>(set.combined_patterns());
}
BENCHMARK(bm_qtl_regex_set)->Name("BM_qtl_regex_set")->Unit(benchmark::kMillisecond);

void bm_qtl_re_match(benchmark::State& state) {
  auto const& rules = dynamic_rules();
  run(state, rules.size(), [&](std::size_t r, std::string const& n) { return qtl::re_match(rules[r].pattern, n); });
}
BENCHMARK(bm_qtl_re_match)->Name("BM_qtl_re_match")->Unit(benchmark::kMillisecond);

void bm_qtl_nfa_only(benchmark::State& state) {
  auto const& rules = dynamic_rules();
  run(state, rules.size(), [&](std::size_t r, std::string const& n) {
    return qtl::detail::re::run_uncached(rules[r].pattern, n, qtl::detail::re::verb::match);
  });
}
BENCHMARK(bm_qtl_nfa_only)->Name("BM_qtl_nfa_only")->Unit(benchmark::kMillisecond);

void bm_std_regex(benchmark::State& state) {
  std::vector<std::regex> rx;
  for (auto const& r : dynamic_rules()) {
    rx.emplace_back(r.pattern, std::regex::ECMAScript | std::regex::optimize);
  }
  run(state, rx.size(), [&](std::size_t r, std::string const& n) {
    return std::regex_search(n, rx[r], std::regex_constants::match_continuous);
  });
}
BENCHMARK(bm_std_regex)->Name("BM_std_regex")->Unit(benchmark::kMillisecond);

#if defined(QTL_HAVE_PCRE2)
void bm_pcre2_jit(benchmark::State& state) {
  std::vector<pcre2_code*> codes;
  for (auto const& r : dynamic_rules()) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r.pattern.data()), r.pattern.size(), PCRE2_ANCHORED,
                                  &err, &off, nullptr);
    if (c == nullptr || pcre2_jit_compile(c, PCRE2_JIT_COMPLETE) != 0) {
      state.SkipWithError(("pcre2 cannot compile " + r.pattern).c_str());
      return;
    }
    codes.push_back(c);
  }
  pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
  run(state, codes.size(), [&](std::size_t r, std::string const& n) {
    return pcre2_jit_match(codes[r], reinterpret_cast<PCRE2_SPTR>(n.data()), n.size(), 0, 0, md, nullptr) >= 0;
  });
  pcre2_match_data_free(md);
  for (auto* c : codes) {
    pcre2_code_free(c);
  }
}
BENCHMARK(bm_pcre2_jit)->Name("BM_pcre2_jit")->Unit(benchmark::kMillisecond);
#endif  // ^^^ QTL_HAVE_PCRE2 ^^^

void bm_memcpy_names(benchmark::State& state) {
  std::string all;
  for (auto const& n : module_names()) {
    all += n;
  }
  std::string dst(all.size(), '\0');
  qtl_bench::memcpy_baseline(state, all.data(), dst.data(), all.size());
}
BENCHMARK(bm_memcpy_names)->Name("BM_memcpy_names");

}  // namespace

BENCHMARK_MAIN();
