#pragma once
/// \file
/// `qtl::compiled_dynamic_rules`: a config's `dynamic` rules compiled once, so that deciding N
/// modules against R rules costs a pass per module over each of `regex_set`'s few combined DFAs
/// (groups of consecutive rules) instead of R pattern compilations and matches (`find_dynamic_rule` with `re_match` recompiles past the
/// thread-local cache's 256 patterns).
///
/// Same answer as `find_dynamic_rule(rules, name)`, including its errors: the reference loops
///
///     for i, key in enumerate(rules):          rules  0 .. bad-1   valid  -> one regex_set
///         if re.match(pattern(key), name):     rule   bad          invalid -> its error
///             return i                         rules  bad+1 ..     never reached
///
/// so a name that some rule before the first invalid pattern matches gets that rule, and any
/// other name raises the invalid pattern's `re.error` (`qtl::regex_error`) — or, for a pattern
/// QTL's engine does not run (`qtl::regex_unsupported_error`), gets that: QTL cannot tell.

#include <cstddef>
#include <exception>
#include <optional>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>
#include <qtl/rules/dynamic.hpp>

namespace qtl {

/// The `dynamic` rules of one config, compiled. Immutable after construction; safe to share
/// between threads. `Rules` (constructor): a range of elements with `.key`, as for
/// `find_dynamic_rule`.
class compiled_dynamic_rules {
 public:
  template <class Rules>
  explicit compiled_dynamic_rules(Rules const& rules) {
    std::vector<std::string_view> patterns;
    for (auto const& rule : rules) {
      dynamic_key const k = parse_dynamic_key(std::string_view(rule.key));
      patterns.push_back(k.pattern);
      negative_.push_back(k.negative);
    }
    // The rules before the first pattern that does not compile (all of them when every one does).
    std::size_t valid = patterns.size();
    for (std::size_t i = 0; i != patterns.size() && !error_; ++i) {
      try {
        check_regex(patterns[i]);
      } catch (regex_error const&) {
        error_ = std::current_exception();
        valid = i;
      } catch (regex_unsupported_error const&) {
        error_ = std::current_exception();
        valid = i;
      }
    }
    set_.emplace(std::vector<std::string_view>(patterns.begin(), patterns.begin() + static_cast<std::ptrdiff_t>(valid)));
  }

  /// `find_dynamic_rule(rules, layer_name)`: the first rule whose pattern `re.match`es the
  /// name. @throws qtl::regex_error or qtl::regex_unsupported_error (the first invalid pattern's)
  /// when no rule before it matches.
  dynamic_match find(std::string_view layer_name) const {
    int const i = set_->first_match(layer_name);
    if (i >= 0) {
      auto const r = static_cast<std::size_t>(i);
      return {negative_[r] ? dynamic_match::kind::negative : dynamic_match::kind::positive, r};
    }
    if (error_) {
      std::rethrow_exception(error_);
    }
    return {};
  }

  /// The number of rules (valid or not).
  std::size_t size() const { return negative_.size(); }

 private:
  std::optional<regex_set> set_;
  std::vector<bool> negative_;
  std::exception_ptr error_;  // the first pattern's that does not compile
};

}  // namespace qtl
