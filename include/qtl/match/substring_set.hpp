#pragma once
/// \file
/// `qtl::substring_set`: an ordered list of literal strings that answers "which is the first (in
/// list order) to occur in a text" — Python's `next(i for i, e in enumerate(entries) if e in
/// text)` — in one pass over the text (Aho-Corasick), whatever the number of entries.
///
///   qtl::substring_set const s({"gate", "lm_head", "mlp.down"});
///   s.first_in("model.layers.0.mlp.gate_up_proj");   // 0
///   s.first_in("model.norm");                        // -1
///
/// Time: O(total entry length) to build, O(text length) per query (each text position meets the
/// automaton's failure links an amortised constant number of times). `fold_case`: entries and
/// texts compare with ASCII letters lowered (Python's `e.lower() in text.lower()`).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace qtl {

/// A list of literal strings compiled to one automaton. Immutable after construction; safe to
/// share between threads.
class substring_set {
 public:
  substring_set() = default;

  /// Compiles `entries` (a range of things convertible to std::string_view), in order.
  template <class Range>
  explicit substring_set(Range const& entries, bool fold_case = false) : fold_(fold_case) {
    nodes_.push_back(node{});
    int index = 0;
    for (auto const& e : entries) {
      add(std::string_view(e), index++);
    }
    link();
  }

  /// The index of the first entry (in list order) that is a substring of `text`, or -1. An
  /// empty entry is a substring of every text.
  int first_in(std::string_view text) const {
    int best = nodes_.empty() ? -1 : nodes_[0].best;
    std::int32_t s = 0;
    for (char const ch : text) {
      s = step(s, fold(static_cast<unsigned char>(ch)));
      int const b = nodes_[static_cast<std::size_t>(s)].best;
      if (b >= 0 && (best < 0 || b < best)) {
        best = b;
      }
    }
    return best;
  }

  /// The index of the first entry that is a substring of `text` other than `text` itself
  /// (Python's `next(i for i, e in enumerate(entries) if e != text and e in text)`), or -1. An
  /// entry of the text's length can only occur as the whole text, so at the last position the
  /// state of the whole text (when the trie has it) gives its failure chain's entries only.
  int first_proper_in(std::string_view text) const {
    if (nodes_.empty() || text.empty()) {
      return -1;  // only "" is in "", and it is the text itself
    }
    int best = nodes_[0].best;  // the empty entry, a proper substring of a non-empty text
    std::int32_t s = 0;
    for (std::size_t i = 0; i != text.size(); ++i) {
      s = step(s, fold(static_cast<unsigned char>(text[i])));
      node const& n = nodes_[static_cast<std::size_t>(s)];
      int const b =
          i + 1 == text.size() && n.depth == text.size() ? nodes_[static_cast<std::size_t>(n.fail)].best : n.best;
      if (b >= 0 && (best < 0 || b < best)) {
        best = b;
      }
    }
    return best;
  }

  /// Calls `f(index)` for every entry that occurs in `text`, once per occurrence (an entry
  /// repeated in the list is reported by its first index). Output-sensitive: O(text length +
  /// occurrences).
  template <class F>
  void each_in(std::string_view text, F&& f) const {
    if (nodes_.empty()) {
      return;
    }
    if (nodes_[0].own >= 0) {
      f(nodes_[0].own);  // the empty entry
    }
    std::int32_t s = 0;
    for (char const ch : text) {
      s = step(s, fold(static_cast<unsigned char>(ch)));
      node const& n = nodes_[static_cast<std::size_t>(s)];
      for (std::int32_t t = n.own >= 0 ? s : n.dict; t > 0; t = nodes_[static_cast<std::size_t>(t)].dict) {
        f(nodes_[static_cast<std::size_t>(t)].own);
      }
    }
  }

  /// Number of automaton states (the trie's nodes).
  std::size_t states() const noexcept { return nodes_.size(); }

 private:
  struct node {
    std::int32_t first_child = -1;
    std::int32_t next_sibling = -1;
    std::int32_t fail = 0;
    int best = -1;          // the first entry that ends here, over this node's failure chain too
    int own = -1;           // the first entry that ends exactly here
    std::int32_t dict = 0;  // the nearest node on the failure chain where an entry ends (0: none)
    std::size_t depth = 0;  // the length of the node's string
    unsigned char byte = 0;
  };
  std::vector<node> nodes_;
  bool fold_ = false;

  unsigned char fold(unsigned char c) const {
    return fold_ && c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c - 'A' + 'a') : c;
  }

  // The state after reading c in state s (failure links followed).
  std::int32_t step(std::int32_t s, unsigned char c) const {
    while (true) {
      std::int32_t const t = child(s, c);
      if (t >= 0) {
        return t;
      }
      if (s == 0) {
        return 0;
      }
      s = nodes_[static_cast<std::size_t>(s)].fail;
    }
  }

  std::int32_t child(std::int32_t s, unsigned char c) const {
    for (std::int32_t k = nodes_[static_cast<std::size_t>(s)].first_child; k >= 0;
         k = nodes_[static_cast<std::size_t>(k)].next_sibling) {
      if (nodes_[static_cast<std::size_t>(k)].byte == c) {
        return k;
      }
    }
    return -1;
  }

  void add(std::string_view e, int index) {
    std::int32_t s = 0;
    for (char const ch : e) {
      unsigned char const c = fold(static_cast<unsigned char>(ch));
      std::int32_t t = child(s, c);
      if (t < 0) {
        t = static_cast<std::int32_t>(nodes_.size());
        node n;
        n.byte = c;
        n.depth = nodes_[static_cast<std::size_t>(s)].depth + 1;
        n.next_sibling = nodes_[static_cast<std::size_t>(s)].first_child;
        nodes_.push_back(n);
        nodes_[static_cast<std::size_t>(s)].first_child = t;
      }
      s = t;
    }
    int& b = nodes_[static_cast<std::size_t>(s)].best;
    if (b < 0) {
      b = index;  // a repeated entry: the first index stands
      nodes_[static_cast<std::size_t>(s)].own = index;
    }
  }

  // Failure links breadth first; each node's best becomes the minimum over its failure chain
  // (the entries that end at this text position).
  void link() {
    std::vector<std::int32_t> queue;
    for (std::int32_t k = nodes_[0].first_child; k >= 0; k = nodes_[static_cast<std::size_t>(k)].next_sibling) {
      nodes_[static_cast<std::size_t>(k)].fail = 0;
      queue.push_back(k);
    }
    int const root_best = nodes_[0].best;  // the empty entry
    for (std::size_t q = 0; q != queue.size(); ++q) {
      std::int32_t const s = queue[q];
      node& n = nodes_[static_cast<std::size_t>(s)];
      node const& f = nodes_[static_cast<std::size_t>(n.fail)];
      n.dict = n.fail != 0 && f.own >= 0 ? n.fail : f.dict;
      int const inherited = nodes_[static_cast<std::size_t>(n.fail)].best;
      if (inherited >= 0 && (n.best < 0 || inherited < n.best)) {
        n.best = inherited;
      }
      if (root_best >= 0 && (n.best < 0 || root_best < n.best)) {
        n.best = root_best;
      }
      for (std::int32_t k = n.first_child; k >= 0; k = nodes_[static_cast<std::size_t>(k)].next_sibling) {
        unsigned char const c = nodes_[static_cast<std::size_t>(k)].byte;
        std::int32_t f = nodes_[static_cast<std::size_t>(s)].fail;
        std::int32_t t = -1;
        while (true) {
          t = child(f, c);
          if (t >= 0 || f == 0) {
            break;
          }
          f = nodes_[static_cast<std::size_t>(f)].fail;
        }
        nodes_[static_cast<std::size_t>(k)].fail = t >= 0 && t != k ? t : 0;
        queue.push_back(k);
      }
    }
  }
};

}  // namespace qtl
