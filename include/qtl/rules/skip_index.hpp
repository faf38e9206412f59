#pragma once
/// \file
/// `qtl::skip_list_index` and `qtl::fused_index`: a config's skip list and packed-modules
/// mapping compiled once, answering the questions of `linear_skip_finder` /
/// `linear_fused_finder` (`qtl/rules/skip.hpp`) with the same indices, in time independent of
/// the list's length:
///
///   question                      reference loop                 index
///   entry == name                 scan                           hash table (first index)
///   module_path_match(entry, n)   scan                           hash table of the entries
///                                                                (trailing dots stripped),
///                                                                asked for every run of whole
///                                                                components of n: k(k+1)/2
///                                                                look-ups for k components
///   entry in name                 scan                           Aho-Corasick (substring_set)
///   "experts" in entry, n in e    scan                           8-gram index of the entries
///                                                                holding "experts"
///                                                                (containing_index)
///   mapping[proj]                 scan                           hash table (first entry)

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <qtl/match/containing_index.hpp>
#include <qtl/match/module_path.hpp>
#include <qtl/match/substring_set.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/skip.hpp>

namespace qtl {

/// A skip list compiled for `sglang_skip_outcome_with` & co. Holds views of `list`'s strings:
/// `list` must outlive it and stay unchanged. Immutable after construction.
class skip_list_index {
 public:
  /// `with_substring`: also build the automaton for `substring` (AWQ-style lists).
  explicit skip_list_index(std::vector<std::string> const& list, bool with_substring = true) : list_(&list) {
    equal_.reserve(list.size());
    path_.reserve(list.size());
    for (std::size_t i = 0; i != list.size(); ++i) {
      std::string_view const e = list[i];
      equal_.emplace(e, i);  // a repeated entry keeps its first index
      path_.emplace(rstrip_dots(e), i);
      if (e.find("experts") != std::string_view::npos) {
        experts_.push_back(i);
      }
    }
    std::vector<std::string_view> experts;
    for (std::size_t const i : experts_) {
      experts.emplace_back(list[i]);
    }
    experts_index_ = containing_index(experts);
    if (with_substring) {
      substrings_ = substring_set(list);
      has_substrings_ = true;
    }
  }

  /// The first entry equal to `name`.
  std::size_t equal(std::string_view name) const {
    auto const it = equal_.find(name);
    return it == equal_.end() ? no_rule : it->second;
  }

  /// The first entry that `module_path_match`es `name`: an entry (trailing dots stripped) equal
  /// to a run of whole dotted components of `name` (trailing dots stripped).
  std::size_t path(std::string_view name) const {
    name = rstrip_dots(name);
    std::vector<std::size_t> starts{0};  // component k: [starts[k], ends[k])
    std::vector<std::size_t> ends;
    for (std::size_t i = 0; i != name.size(); ++i) {
      if (name[i] == '.') {
        ends.push_back(i);
        starts.push_back(i + 1);
      }
    }
    ends.push_back(name.size());
    std::size_t best = no_rule;
    for (std::size_t a = 0; a != starts.size(); ++a) {
      for (std::size_t b = a; b != ends.size(); ++b) {
        auto const it = path_.find(name.substr(starts[a], ends[b] - starts[a]));
        if (it != path_.end() && it->second < best) {
          best = it->second;
        }
      }
    }
    return best;
  }

  /// The first entry that is a plain substring of `name`.
  std::size_t substring(std::string_view name) const {
    if (!has_substrings_) {
      return linear_skip_finder{*list_}.substring(name);
    }
    int const r = substrings_.first_in(name);
    return r < 0 ? no_rule : static_cast<std::size_t>(r);
  }

  /// The first entry that holds "experts" and `name`.
  std::size_t experts_superstring(std::string_view name) const {
    long const r = experts_index_.first_containing(name);
    return r < 0 ? no_rule : experts_[static_cast<std::size_t>(r)];
  }

  std::vector<std::string> const& list() const { return *list_; }

 private:
  std::vector<std::string> const* list_;
  std::unordered_map<std::string_view, std::size_t> equal_;
  std::unordered_map<std::string_view, std::size_t> path_;
  std::vector<std::size_t> experts_;  // the entries holding "experts", ascending
  containing_index experts_index_;
  substring_set substrings_;
  bool has_substrings_ = false;
};

/// A packed-modules mapping compiled: the entry of a fused name, and the fused name of a shard,
/// each by one hash look-up (the first in mapping order, as the reference's scans find).
/// `mapping` must outlive it and stay unchanged.
class fused_index {
 public:
  using entry = packed_mapping::value_type;

  explicit fused_index(packed_mapping const& mapping) {
    by_fused_.reserve(mapping.size());
    for (entry const& e : mapping) {
      by_fused_.emplace(e.first, &e);
      for (std::string const& shard : e.second) {
        by_shard_.emplace(shard, &e);
      }
    }
  }

  /// The entry whose fused name is `proj`, or null (`linear_fused_finder`).
  entry const* operator()(std::string_view proj) const {
    auto const it = by_fused_.find(proj);
    return it == by_fused_.end() ? nullptr : it->second;
  }

  /// The first entry that lists `shard` among its shards, or null.
  entry const* of_shard(std::string_view shard) const {
    auto const it = by_shard_.find(shard);
    return it == by_shard_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::string_view, entry const*> by_fused_;
  std::unordered_map<std::string_view, entry const*> by_shard_;
};

}  // namespace qtl
