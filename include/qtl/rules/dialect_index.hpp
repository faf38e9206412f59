#pragma once
/// \file
/// Indexes of the pattern dialects (`docs/spec/matchers.md` §2): each answers one question of
/// `linear_config_index` (`qtl/rules/consumers.hpp`) — "the first list entry that matches this
/// name" — with the same index and the same exceptions, in time independent of the list's
/// length for the entries it compiles:
///
///   dialect (consumer)                       entries                  index
///   compressed-tensors `ignore`              `re:X`                   one regex_set of the X (re.match)
///     (vllm_/sglang_compressed_tensors,      other, exact             hash table
///      compressed_tensors)                   other, case-insensitive  Aho-Corasick, case folded
///                                            substring (sglang)
///   fnmatch, fnmatch_subtree, vLLM ModelOpt  globs                    regex_set of glob_to_regex
///     step 3                                                          (and of `glob + ".*"`);
///                                            `*`-led globs            alone behind their literal
///   vLLM ModelOpt step 2                     e != name, e in name     Aho-Corasick (first_proper_in)
///   sglang ModelOpt                          glob -> regex, fullmatch regex_set of `(?:R)\Z`, run on
///                                            of the name, or of a     the name and each component;
///                                            component; MLA tails     the first entry of each tail
///   transformers v4 bitsandbytes             `e + "."` in name        Aho-Corasick of the `e + "."`
///   transformers v5                          re.match(e + "\."),      regex_set of both; a hash table
///                                            re.match(e), endswith    asked for every suffix
///   AutoRound `extra_config` (sglang, vLLM)  exact key                hash table
///                                            regex key, fullmatch /   regex_set of `(?:K)\Z` /
///                                            search                   `(?:.|\n)*(?:K)`
///                                            block_name_to_quantize   hash table, every prefix
///                                            keys starting with name  sorted keys
///
/// An entry that cannot be compiled so (its regex does not compile alone, a glob with a
/// non-ASCII byte, a set that outgrows the regex limits) stays *on its own*: the reference test
/// (`detail::ct_entry_match`, `glob_match`, ...) runs for it, in list order, only while it could
/// still come first — so an invalid pattern raises its error exactly when the reference loop
/// would reach it (no earlier entry matched), and never otherwise.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <qtl/error.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>
#include <qtl/match/substring_set.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/skip.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace qtl {

namespace detail {

/// The first index of each distinct string of `list` (a repeated string keeps its first).
template <class Range>
std::unordered_map<std::string_view, std::size_t> first_index_map(Range const& list) {
  std::unordered_map<std::string_view, std::size_t> m;
  std::size_t i = 0;
  for (auto const& e : list) {
    m.emplace(std::string_view(e), i++);
  }
  return m;
}

/// The smallest index of `m` among the suffixes of `name` ("" included).
inline std::size_t first_suffix(std::unordered_map<std::string_view, std::size_t> const& m, std::string_view name) {
  std::size_t best = no_rule;
  if (m.empty()) {
    return best;
  }
  for (std::size_t k = 0; k <= name.size(); ++k) {
    auto const it = m.find(name.substr(k));
    if (it != m.end()) {
      best = std::min(best, it->second);
    }
  }
  return best;
}

/// What QTL's engine makes of a regex alone: it compiles, Python rejects it too (`re.error`), or
/// Python accepts it but the engine does not run it.
enum class regex_status : std::uint8_t { compiles, invalid, unsupported };
inline regex_status regex_status_of(std::string_view pattern) {
  try {
    check_regex(pattern);
    return regex_status::compiles;
  } catch (regex_error const&) {
    return regex_status::invalid;
  } catch (regex_unsupported_error const&) {
    return regex_status::unsupported;
  }
}

/// Whether `pattern` compiles as a regex alone.
inline bool compiles(std::string_view pattern) { return regex_status_of(pattern) == regex_status::compiles; }

/// A regex for `ordered_regex_index` that runs alone behind a literal prefilter (`literal`: a
/// string every match contains, `regex_required_literal`).
struct filtered_pattern {
  std::size_t entry;
  std::string pattern;
  std::string literal;
};

/// The `filtered_pattern` of a search-like pattern (every position may start a match: a combined
/// DFA blows up) whose required `literal` is selective enough, at least 3 bytes; else nothing.
inline std::optional<filtered_pattern> filtered_by_literal(std::size_t entry, std::string const& pattern,
                                                           std::string literal) {
  if (literal.size() < 3) {
    return std::nullopt;
  }
  return filtered_pattern{entry, pattern, std::move(literal)};
}

/// `filtered_by_literal` for a regex `pattern` written from `raw` when `raw` is search-like
/// (begins with `.*` or `^.*`, or `search_wrapped`), with `raw`'s `regex_required_literal`.
inline std::optional<filtered_pattern> prefilter(std::size_t entry, std::string const& pattern, std::string_view raw,
                                                 bool search_wrapped = false) {
  bool const search_like = search_wrapped || raw.starts_with(".*") || raw.starts_with("^.*");
  if (!search_like) {
    return std::nullopt;
  }
  return filtered_by_literal(entry, pattern, regex_required_literal(raw));
}

/// Entries of a list (indices in list order) tested in order: the entries' regexes (one or
/// more per entry, `re.match` semantics) run together on one `regex_set`, or one by one behind
/// an Aho-Corasick prefilter of their required literals (`filtered`: only the patterns whose
/// literal occurs in the text run, in order); the entries on their own are tested by the
/// caller's reference test. A pattern that does not compile puts its entry on its own.
class ordered_regex_index {
 public:
  ordered_regex_index() = default;

  /// `patterns`: (entry, regex) pairs; `own`: entries the caller tests itself; `filtered`:
  /// patterns run alone behind their literal.
  ordered_regex_index(std::vector<std::pair<std::size_t, std::string>> patterns, std::vector<std::size_t> own,
                      std::vector<filtered_pattern> filtered = {})
      : own_(std::move(own)) {
    std::stable_sort(filtered.begin(), filtered.end(), [](auto const& a, auto const& b) { return a.entry < b.entry; });
    std::unordered_map<std::string_view, std::size_t> literal_id;
    std::vector<std::string_view> literals;
    for (filtered_pattern const& f : filtered) {
      if (!compiles(f.pattern)) {
        own_.push_back(f.entry);
        continue;
      }
      alone_.emplace_back(f.pattern, regex_verbs::match);  // run with match() alone
      alone_entry_.push_back(f.entry);
      auto const [it, fresh] = literal_id.emplace(f.literal, literals.size());
      if (fresh) {
        literals.push_back(f.literal);
        by_literal_.emplace_back();
      }
      by_literal_[it->second].push_back(alone_.size() - 1);
    }
    literals_owned_.assign(literals.begin(), literals.end());
    literal_set_ = substring_set(literals_owned_);
    std::stable_sort(patterns.begin(), patterns.end(), [](auto const& a, auto const& b) { return a.first < b.first; });
    std::erase_if(patterns, [&](auto const& pe) {
      bool const bad = !compiles(pe.second);
      if (bad) {
        own_.push_back(pe.first);
      }
      return bad;
    });
    if (!patterns.empty()) {
      build(patterns);
    }
    std::sort(own_.begin(), own_.end());
    own_.erase(std::unique(own_.begin(), own_.end()), own_.end());
  }

  /// The first entry (smallest index) whose regex (one of them) matches `text`, among the
  /// compiled entries, or `no_rule`.
  std::size_t compiled_first(std::string_view text) const {
    std::size_t best = no_rule;
    if (set_) {
      int const r = set_->first_match(text);
      best = r < 0 ? no_rule : entry_of_[static_cast<std::size_t>(r)];
    }
    if (!alone_.empty()) {
      std::vector<std::size_t> candidates;
      literal_set_.each_in(text, [&](int l) {
        auto const& ps = by_literal_[static_cast<std::size_t>(l)];
        candidates.insert(candidates.end(), ps.begin(), ps.end());
      });
      std::sort(candidates.begin(), candidates.end());
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      for (std::size_t const p : candidates) {
        if (alone_entry_[p] >= best) {
          break;
        }
        if (alone_[p].match(text)) {
          best = alone_entry_[p];
          break;
        }
      }
    }
    return best;
  }

  /// `best`, or the first entry on its own below it for which `test(entry)` holds (tested in
  /// ascending order; an exception of `test` propagates, as in the reference loop).
  template <class Test>
  std::size_t own_before(std::size_t best, Test&& test) const {
    for (std::size_t const j : own_) {
      if (j >= best) {
        break;
      }
      if (test(j)) {
        return j;
      }
    }
    return best;
  }

  /// Whether `entry` is tested by the caller (`own_before`).
  bool on_own(std::size_t entry) const { return std::binary_search(own_.begin(), own_.end(), entry); }
  /// The number of entries on their own.
  std::size_t own_count() const { return own_.size(); }

 private:
  std::optional<regex_set> set_;
  std::vector<std::size_t> entry_of_;  // set pattern -> entry
  std::vector<std::size_t> own_;       // ascending
  std::vector<regex> alone_;           // the filtered patterns, by entry
  std::vector<std::size_t> alone_entry_;
  std::vector<std::string> literals_owned_;           // the distinct literals
  substring_set literal_set_;                         // over literals_owned_
  std::vector<std::vector<std::size_t>> by_literal_;  // literal -> alone_ indices, ascending

  void build(std::vector<std::pair<std::size_t, std::string>> const& patterns) {
    std::vector<std::string_view> texts;
    entry_of_.clear();
    for (auto const& [entry, pattern] : patterns) {
      texts.emplace_back(pattern);
      entry_of_.push_back(entry);
    }
    set_.emplace(texts);
  }
};

/// A `T` built on first use, once (`std::call_once`): safe to ask from several threads.
template <class T>
class built_once {
 public:
  template <class Make>
  T const& get(Make&& make) const {
    std::call_once(once_, [&] { value_ = make(); });
    return *value_;
  }

 private:
  mutable std::once_flag once_;
  mutable std::unique_ptr<T const> value_;
};

}  // namespace detail

/// compressed-tensors' `ignore` list compiled for `_is_equal_or_regex_match(name, entry,
/// check_contains)`: `re:` entries `re.match`, the others exact (vLLM, the library) or a
/// case-insensitive substring (sglang, `check_contains`). Holds views of `list`.
class ct_ignore_index {
 public:
  ct_ignore_index(std::vector<std::string> const& list, bool check_contains)
      : list_(&list), check_contains_(check_contains) {
    std::vector<std::pair<std::size_t, std::string>> patterns;
    std::vector<detail::filtered_pattern> filtered;
    std::vector<std::string_view> literals;
    for (std::size_t i = 0; i != list.size(); ++i) {
      std::string_view const e = list[i];
      if (e.starts_with("re:")) {
        std::string const re(e.substr(3));
        if (auto f = detail::compiles(re) ? detail::prefilter(i, re, re) : std::nullopt) {
          filtered.push_back(std::move(*f));
        } else {
          patterns.emplace_back(i, re);
        }
      } else {
        literal_of_.push_back(i);
        literals.push_back(e);
        exact_.emplace(e, i);
      }
    }
    regexes_ = detail::ordered_regex_index(std::move(patterns), {}, std::move(filtered));
    if (check_contains) {
      folded_ = substring_set(literals, true);
    }
  }

  /// The first entry the compiled tests find for `name` (entries on their own not asked).
  std::size_t compiled_first(std::string_view name) const {
    std::size_t best = regexes_.compiled_first(name);
    if (check_contains_) {
      int const r = folded_.first_in(name);
      if (r >= 0) {
        best = std::min(best, literal_of_[static_cast<std::size_t>(r)]);
      }
    } else if (auto const it = exact_.find(name); it != exact_.end()) {
      best = std::min(best, it->second);
    }
    return best;
  }

  /// `best`, or the first entry on its own below it for which `test(entry text)` holds.
  template <class Test>
  std::size_t own_before(std::size_t best, Test&& test) const {
    return regexes_.own_before(best, [&](std::size_t j) { return test(std::string_view((*list_)[j])); });
  }

  /// The first entry that matches `name` (`linear_config_index::ct_find`).
  std::size_t find(std::string_view name) const {
    return own_before(compiled_first(name),
                      [&](std::string_view e) { return detail::ct_entry_match(e, name, check_contains_); });
  }

 private:
  std::vector<std::string> const* list_;
  bool check_contains_;
  detail::ordered_regex_index regexes_;
  std::unordered_map<std::string_view, std::size_t> exact_;  // non-`re:` entries, first index
  std::vector<std::size_t> literal_of_;                      // folded_ entry -> list index
  substring_set folded_;
};

/// The compressed-tensors library's `match_name(name, entry, fused)` over a list: a name that
/// ends with a fused suffix (the first in mapping order) is matched through its shard names (any
/// shard), others directly. Holds views of `list` and `mapping`.
class ct_library_index {
 public:
  ct_library_index(std::vector<std::string> const& list, packed_mapping const& mapping)
      : exact_(list, false), mapping_(&mapping) {
    for (std::size_t k = 0; k != mapping.size(); ++k) {
      suffix_.emplace(mapping[k].first, k);
    }
  }

  /// `linear_config_index::ct_library`.
  std::size_t find(std::string_view name) const {
    std::size_t const k = detail::first_suffix(suffix_, name);
    if (k == no_rule) {
      return exact_.find(name);
    }
    auto const& fused = (*mapping_)[k];
    std::string const& suffix = fused.first;
    std::vector<std::string> const& shards = fused.second;  // (a structured binding: clang 14 cannot capture it)
    std::string const stem(name.substr(0, name.size() - suffix.size()));
    std::size_t best = no_rule;
    for (std::string const& shard : shards) {
      best = std::min(best, exact_.compiled_first(stem + shard));
    }
    // The reference tests entry by entry, every shard for each: an entry on its own matches
    // when it matches any shard.
    return exact_.own_before(best, [&](std::string_view e) {
      return std::any_of(shards.begin(), shards.end(),
                         [&](std::string const& shard) { return detail::ct_entry_match(e, stem + shard, false); });
    });
  }

 private:
  ct_ignore_index exact_;
  packed_mapping const* mapping_;
  std::unordered_map<std::string_view, std::size_t> suffix_;  // fused name -> first mapping index
};

/// A list of fnmatch globs compiled (`glob_to_regex`) for "the first that matches", with
/// `subtree` also `glob + ".*"` per entry (`detail::fnmatch_entry`). Holds views of `list`.
class glob_index {
 public:
  glob_index(std::vector<std::string> const& list, bool subtree) : list_(&list), subtree_(subtree) {
    std::vector<std::pair<std::size_t, std::string>> patterns;
    std::vector<detail::filtered_pattern> filtered;
    std::vector<std::size_t> own;
    // A glob that starts with `*` is search-like: it runs alone behind its literal, as
    // `detail::prefilter` does for regexes.
    auto const add = [&](std::size_t i, std::string const& glob, std::string regex) {
      if (auto f = glob.starts_with('*') ? detail::filtered_by_literal(i, regex, glob_required_literal(glob))
                                         : std::nullopt) {
        filtered.push_back(std::move(*f));
      } else {
        patterns.emplace_back(i, std::move(regex));
      }
    };
    for (std::size_t i = 0; i != list.size(); ++i) {
      std::string const subtree_glob = subtree ? list[i] + ".*" : std::string();
      std::optional<std::string> a = glob_to_regex(list[i]);
      std::optional<std::string> b = subtree ? glob_to_regex(subtree_glob) : std::nullopt;
      if (!a || (subtree && !b)) {
        own.push_back(i);
        continue;
      }
      add(i, list[i], std::move(*a));
      if (b) {
        add(i, subtree_glob, std::move(*b));
      }
    }
    globs_ = detail::ordered_regex_index(std::move(patterns), std::move(own), std::move(filtered));
  }

  /// `linear_config_index::fnmatch(module, subtree)`.
  std::size_t find(std::string_view module) const {
    return globs_.own_before(globs_.compiled_first(module),
                             [&](std::size_t j) { return detail::fnmatch_entry((*list_)[j], module, subtree_); });
  }

 private:
  std::vector<std::string> const* list_;
  bool subtree_;
  detail::ordered_regex_index globs_;
};

/// sglang ModelOpt's `is_layer_excluded` over a pattern list (`detail::sglang_modelopt_excluded`).
class sglang_modelopt_index {
 public:
  explicit sglang_modelopt_index(std::vector<std::string> const& list) : list_(&list) {
    std::vector<std::pair<std::size_t, std::string>> patterns;
    std::vector<detail::filtered_pattern> filtered;
    std::vector<std::size_t> own;
    for (std::size_t i = 0; i != list.size(); ++i) {
      std::string const re = detail::sglang_modelopt_regex(list[i]);
      if (!detail::compiles(re)) {  // the wrapped form may compile where the pattern does not
        own.push_back(i);
        continue;
      }
      std::string wrapped = "(?:" + re + ")\\Z";
      if (auto f = detail::prefilter(i, wrapped, re)) {
        filtered.push_back(std::move(*f));
      } else {
        patterns.emplace_back(i, std::move(wrapped));
      }
    }
    regexes_ = detail::ordered_regex_index(std::move(patterns), std::move(own), std::move(filtered));
    tail_first_.fill(no_rule);
    for (std::size_t i = 0; i != list.size(); ++i) {
      if (regexes_.on_own(i)) {
        continue;  // tested whole by the reference, in order
      }
      std::string_view const tail = detail::last_component(list[i]);
      for (std::size_t t = 0; t != tail_first_.size(); ++t) {
        if (tail == detail::sglang_modelopt_mla_tails[t] && tail_first_[t] == no_rule) {
          tail_first_[t] = i;
        }
      }
    }
  }

  /// `linear_config_index::sglang_modelopt(prefix)`.
  std::size_t find(std::string_view prefix) const {
    std::vector<std::string> const candidates = detail::sglang_modelopt_candidates(prefix);
    std::size_t best = no_rule;
    for (std::string const& cand : candidates) {
      best = std::min(best, regexes_.compiled_first(cand));
      std::string_view rest = cand;
      while (true) {
        std::size_t const dot = rest.find('.');
        best = std::min(best, regexes_.compiled_first(rest.substr(0, dot)));
        if (dot == std::string_view::npos) {
          break;
        }
        rest = rest.substr(dot + 1);
      }
    }
    std::string_view const leaf = detail::last_component(prefix);
    for (std::size_t t = 0; t != tail_first_.size(); ++t) {
      if (tail_first_[t] < best && detail::contains(leaf, detail::sglang_modelopt_mla_tails[t])) {
        best = tail_first_[t];
      }
    }
    return regexes_.own_before(
        best, [&](std::size_t j) { return detail::sglang_modelopt_pattern_excludes((*list_)[j], candidates, leaf); });
  }

 private:
  std::vector<std::string> const* list_;
  detail::ordered_regex_index regexes_;
  std::array<std::size_t, std::size(detail::sglang_modelopt_mla_tails)> tail_first_{};
};

/// vLLM ModelOpt's steps 2 and 3 (`detail::vllm_modelopt_excluded`): the first entry other than
/// the name that is a substring of it, else the first glob that matches.
class vllm_modelopt_index {
 public:
  explicit vllm_modelopt_index(std::vector<std::string> const& list) : substrings_(list), globs_(list, false) {}

  std::size_t find(std::string_view prefix) const {
    int const r = substrings_.first_proper_in(prefix);
    return r >= 0 ? static_cast<std::size_t>(r) : globs_.find(prefix);
  }

 private:
  substring_set substrings_;
  glob_index globs_;
};

/// transformers v4 bitsandbytes beyond the leaf (`detail::transformers_v4_bnb_entry`): an
/// entry equal to the name, or `entry + "."` in it.
class transformers_v4_bnb_index {
 public:
  explicit transformers_v4_bnb_index(std::vector<std::string> const& list) : exact_(detail::first_index_map(list)) {
    std::vector<std::string> dotted;
    dotted.reserve(list.size());
    for (std::string const& e : list) {
      dotted.push_back(e + ".");
    }
    dotted_ = substring_set(dotted);
  }

  std::size_t find(std::string_view module) const {
    std::size_t best = no_rule;
    if (auto const it = exact_.find(module); it != exact_.end()) {
      best = it->second;
    }
    int const r = dotted_.first_in(module);
    return r >= 0 ? std::min(best, static_cast<std::size_t>(r)) : best;
  }

 private:
  std::unordered_map<std::string_view, std::size_t> exact_;
  substring_set dotted_;
};

/// transformers v5's `should_convert_module` over a list (`detail::transformers_v5_entry`).
class transformers_v5_index {
 public:
  explicit transformers_v5_index(std::vector<std::string> const& list) : list_(&list) {
    std::vector<std::pair<std::size_t, std::string>> patterns;
    for (std::size_t i = 0; i != list.size(); ++i) {
      patterns.emplace_back(i, list[i] + "\\.");
      patterns.emplace_back(i, list[i]);
    }
    regexes_ = detail::ordered_regex_index(std::move(patterns), {});
    for (std::size_t i = 0; i != list.size(); ++i) {
      if (!regexes_.on_own(i)) {  // an entry on its own is tested whole (its regex may raise first)
        suffix_.emplace(list[i], i);
      }
    }
  }

  std::size_t find(std::string_view module) const {
    std::size_t const best = std::min(regexes_.compiled_first(module), detail::first_suffix(suffix_, module));
    return regexes_.own_before(best, [&](std::size_t j) { return detail::transformers_v5_entry((*list_)[j], module); });
  }

 private:
  std::vector<std::string> const* list_;
  std::unordered_map<std::string_view, std::size_t> suffix_;  // entry -> first index (endswith)
  detail::ordered_regex_index regexes_;
};

/// AutoRound's `extra_config` and `block_name_to_quantize` compiled: exact keys, block
/// prefixes, keys by prefix, and the regex keys for re.search (vLLM) and re.fullmatch (sglang),
/// each set built when first asked. Holds views of `cfg`.
class auto_round_index {
 public:
  explicit auto_round_index(quant_config const& cfg) : cfg_(&cfg) {
    for (std::size_t i = 0; i != cfg.extra_config.size(); ++i) {
      std::string_view const key = cfg.extra_config[i].key;
      exact_.emplace(key, i);
      sorted_.emplace_back(key, i);
    }
    std::sort(sorted_.begin(), sorted_.end());
    for (std::string const& b : cfg.block_name_to_quantize) {
      blocks_.emplace(b);
    }
  }

  /// The first key equal to `name`.
  std::size_t exact(std::string_view name) const {
    auto const it = exact_.find(name);
    return it == exact_.end() ? no_rule : it->second;
  }

  /// The first regex key that hits `name` (`detail::auto_round_regex_hit`).
  std::size_t regex(std::string_view name, bool search) const {
    detail::ordered_regex_index const& set = regexes_[search ? 1 : 0].get([&] {
      std::vector<std::pair<std::size_t, std::string>> patterns;
      std::vector<detail::filtered_pattern> filtered;
      std::vector<std::size_t> own;  // keys QTL's engine does not run: asked (and raising) in order
      for (std::size_t i = 0; i != cfg_->extra_config.size(); ++i) {
        std::string const& key = cfg_->extra_config[i].key;
        if (!detail::auto_round_regex_key(key)) {
          continue;
        }
        detail::regex_status const st = detail::regex_status_of(key);
        if (st == detail::regex_status::unsupported) {
          own.push_back(i);
        } else if (st == detail::regex_status::compiles) {  // an invalid key never hits
          std::string wrapped = search ? "(?:.|\\n)*(?:" + key + ")" : "(?:" + key + ")\\Z";
          if (auto f = detail::prefilter(i, wrapped, key, search)) {
            filtered.push_back(std::move(*f));
          } else {
            patterns.emplace_back(i, std::move(wrapped));
          }
        }
      }
      return std::make_unique<detail::ordered_regex_index const>(std::move(patterns), std::move(own),
                                                                 std::move(filtered));
    });
    return set.own_before(set.compiled_first(name), [&](std::size_t j) {
      return detail::auto_round_regex_hit(cfg_->extra_config[j].key, name, search);
    });
  }

  /// Whether some block name is a prefix of `module`.
  bool in_blocks(std::string_view module) const {
    for (std::size_t k = 0; k <= module.size() && !blocks_.empty(); ++k) {
      if (blocks_.contains(module.substr(0, k))) {
        return true;
      }
    }
    return false;
  }

  /// The indices of the keys that start with `module`, ascending.
  std::vector<std::size_t> keys_starting_with(std::string_view module) const {
    std::vector<std::size_t> out;
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), module,
                               [](auto const& a, std::string_view m) { return a.first < m; });
    for (; it != sorted_.end() && it->first.starts_with(module); ++it) {
      out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  quant_config const* cfg_;
  std::unordered_map<std::string_view, std::size_t> exact_;
  std::vector<std::pair<std::string_view, std::size_t>> sorted_;  // (key, index), by key
  std::unordered_set<std::string_view> blocks_;
  detail::built_once<detail::ordered_regex_index> regexes_[2];  // fullmatch, search
};

}  // namespace qtl
