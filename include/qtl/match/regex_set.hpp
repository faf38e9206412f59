#pragma once
/// \file
/// `qtl::regex_set`: an ordered list of run-time patterns asked "which is the first to match", on
/// a few combined DFAs (<qtl/match/regex.hpp> is the single-pattern engine it builds on).
///
///   qtl::regex_set const dynamic(keys);   // GPTQ `dynamic`: first match wins
///   int const i = dynamic.first_match(name);   // -1: none

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include <qtl/match/regex.hpp>

namespace qtl {

/// An ordered list of patterns that answers "which is the first to match" — the question of a
/// GPTQ `dynamic` config (rules in the config's order, `re.match`, first match wins).
///
/// `first_match` runs the lookaround-free patterns on combined DFAs, one pass over the text per
/// DFA: consecutive patterns are grouped so that each group's DFA stays within
/// `regex_limits::set_dfa_states` (a group that would not fit is halved, down to single
/// patterns), the groups are run in order until one matches; the other patterns (lookarounds,
/// \b, or too large even alone) run one by one on their own engine, only while they could still
/// win. A set's builds together construct at most `regex_limits::set_build_states` states;
/// patterns left when that is spent also run one by one. The result always equals the loop
/// `for i: if (pattern[i].match(text)) return i;`.
///
/// Patterns served by a group get no DFA of their own: `set[i].match(...)` runs them on the NFA
/// (same answer, O(n * m)). Immutable after construction; safe to share between threads.
class regex_set {
 public:
  /// Compiles every pattern. @throws qtl::regex_error or qtl::regex_unsupported_error for the
  /// first that does not compile.
  template <class Range>
  explicit regex_set(Range const& patterns) {
    for (auto const& p : patterns) {
      regexes_.push_back(regex(std::string_view(p), regex_verbs::none));
    }
    build();
  }
  regex_set(std::initializer_list<std::string_view> patterns) {
    for (auto const p : patterns) {
      regexes_.push_back(regex(p, regex_verbs::none));
    }
    build();
  }

  /// Index of the first pattern that re.match()es `text`, or -1.
  int first_match(std::string_view text) const {
    int best = -1;
    if (!text.empty() && !(has_end_newline_ && text.back() == '\n')) {
      for (detail::re::set_dfa const& g : groups_) {
        int const r = g.run(text);
        if (r >= 0) {
          best = on_dfa_[g.first + static_cast<std::size_t>(r)];
          break;
        }
      }
    } else {
      for (int const r : on_dfa_) {  // the DFAs decide $ only at the very end: ask each pattern
        if (regexes_[static_cast<std::size_t>(r)].match(text)) {
          best = r;
          break;
        }
      }
    }
    for (int const r : on_own_) {
      if (best >= 0 && r > best) {
        break;
      }
      if (regexes_[static_cast<std::size_t>(r)].match(text)) {
        return r;
      }
    }
    return best;
  }
  /// Index of the first pattern that re.fullmatch()es `text`, or -1 (pattern by pattern).
  int first_fullmatch(std::string_view text) const {
    for (std::size_t r = 0; r != regexes_.size(); ++r) {
      if (regexes_[r].fullmatch(text)) {
        return static_cast<int>(r);
      }
    }
    return -1;
  }
  /// Index of the first pattern that re.search()es `text`, or -1 (pattern by pattern).
  int first_search(std::string_view text) const {
    for (std::size_t r = 0; r != regexes_.size(); ++r) {
      if (regexes_[r].search(text)) {
        return static_cast<int>(r);
      }
    }
    return -1;
  }

  std::size_t size() const noexcept { return regexes_.size(); }
  regex const& operator[](std::size_t i) const { return regexes_[i]; }
  /// Whether first_match runs some patterns on a combined DFA.
  bool uses_combined_dfa() const noexcept { return !groups_.empty(); }
  /// Number of patterns on the combined DFAs.
  std::size_t combined_patterns() const noexcept { return on_dfa_.size(); }
  /// Number of combined DFAs (groups of consecutive patterns).
  std::size_t combined_groups() const noexcept { return groups_.size(); }

 private:
  std::vector<regex> regexes_;
  std::vector<int> on_dfa_;  // patterns on the groups, ascending
  std::vector<int> on_own_;  // the others, ascending
  std::vector<detail::re::set_dfa> groups_;
  bool has_end_newline_ = false;

  void build() {
    using namespace detail::re;
    std::vector<int> candidates;  // lookaround- and \b-free
    for (std::size_t r = 0; r != regexes_.size(); ++r) {
      regex const& x = regexes_[r];
      (x.n_looks_ == 0 && !x.has_word_boundary_ ? candidates : on_own_).push_back(static_cast<int>(r));
    }
    std::size_t budget = regex_limits::set_build_states;
    std::vector<std::vector<int>> members;
    group(candidates, 0, candidates.size(), budget, members);
    for (std::size_t g = 0; g != groups_.size(); ++g) {
      groups_[g].first = on_dfa_.size();
      for (int const r : members[g]) {
        on_dfa_.push_back(r);
        has_end_newline_ = has_end_newline_ || regexes_[static_cast<std::size_t>(r)].has_end_newline_;
      }
    }
    std::sort(on_own_.begin(), on_own_.end());
    for (int const r : on_own_) {
      regex& x = regexes_[static_cast<std::size_t>(r)];
      if (x.n_looks_ == 0 && !x.has_word_boundary_) {
        x.build_dfas();  // not on a group: its own DFAs
      }
    }
  }

  // Groups candidates[lo, hi) into combined DFAs, halving a range whose DFA does not fit.
  void group(std::vector<int> const& candidates, std::size_t lo, std::size_t hi, std::size_t& budget,
             std::vector<std::vector<int>>& members) {
    using namespace detail::re;
    if (lo == hi) {
      return;
    }
    if (budget != 0) {
      std::vector<program_ref> progs;
      for (std::size_t i = lo; i != hi; ++i) {
        regex const& x = regexes_[static_cast<std::size_t>(candidates[i])];
        progs.push_back({&x.code_, &x.sets_});
      }
      set_dfa d = build_set_dfa(progs, 0, regex_limits::set_dfa_states, budget);
      if (d.ok) {
        groups_.push_back(std::move(d));
        members.emplace_back(candidates.begin() + static_cast<std::ptrdiff_t>(lo),
                             candidates.begin() + static_cast<std::ptrdiff_t>(hi));
        return;
      }
    }
    if (hi - lo == 1 || budget == 0) {
      on_own_.insert(on_own_.end(), candidates.begin() + static_cast<std::ptrdiff_t>(lo),
                     candidates.begin() + static_cast<std::ptrdiff_t>(hi));
      return;
    }
    std::size_t const mid = lo + (hi - lo) / 2;
    group(candidates, lo, mid, budget, members);
    group(candidates, mid, hi, budget, members);
  }
};

}  // namespace qtl
