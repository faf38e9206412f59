#pragma once
/// \file
/// `qtl::containing_index`: an ordered list of texts that answers "which is the first (in list
/// order) to contain a query" — Python's `next(i for i, e in enumerate(texts) if query in e)` —
/// the reverse question of `qtl::substring_set`.
///
///   qtl::containing_index const x({"model.layers.0.mlp.experts.3.w1", "model.layers.1.mlp.experts.0.w1"});
///   x.first_containing("layers.1.mlp.experts");   // 1
///
/// An index of q-grams (the texts' substrings of 8 bytes): a query of at least 8 bytes is
/// checked only against the texts that hold its rarest 8-gram, in list order, up to the first
/// that contains it; a shorter query is checked against every text. Build O(total length);
/// a query O(its length + the rarest gram's texts x their length) — not a worst-case bound (a
/// list whose texts share every gram of the query is scanned as the plain loop would), but
/// texts that differ in a layer or expert number share few grams with a query naming one.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qtl {

/// Texts indexed by their 8-grams. Holds views of the texts: they must outlive it, unchanged.
/// Immutable after construction; safe to share between threads.
class containing_index {
 public:
  static constexpr std::size_t q = 8;

  containing_index() = default;

  /// Indexes `texts` (a range of things convertible to std::string_view), in order.
  template <class Range>
  explicit containing_index(Range const& texts) {
    for (auto const& t : texts) {
      texts_.emplace_back(t);
    }
    // Two passes (count, then fill) into one array of postings, each text once per gram.
    std::vector<std::uint64_t> grams;
    for (int pass = 0; pass != 2; ++pass) {
      for (std::size_t i = 0; i != texts_.size(); ++i) {
        grams_of(texts_[i], grams);
        for (std::uint64_t const g : grams) {
          if (pass == 0) {
            ++slots_[g].count;
          } else {
            slot& s = slots_[g];
            postings_[s.begin + s.filled++] = static_cast<std::uint32_t>(i);
          }
        }
      }
      if (pass == 0) {
        std::size_t offset = 0;
        for (auto& [g, s] : slots_) {
          s.begin = offset;
          offset += s.count;
        }
        postings_.resize(offset);
      }
    }
  }

  /// The index of the first text that contains `query`, or -1.
  long first_containing(std::string_view query) const {
    if (query.size() < q) {
      for (std::size_t i = 0; i != texts_.size(); ++i) {
        if (texts_[i].find(query) != std::string_view::npos) {
          return static_cast<long>(i);
        }
      }
      return -1;
    }
    slot const* rarest = nullptr;
    for (std::size_t k = 0; k + q <= query.size(); ++k) {
      auto const it = slots_.find(gram_at(query, k));
      if (it == slots_.end()) {
        return -1;  // no text holds this piece of the query
      }
      if (rarest == nullptr || it->second.count < rarest->count) {
        rarest = &it->second;
      }
    }
    for (std::size_t p = 0; p != rarest->count; ++p) {
      std::uint32_t const i = postings_[rarest->begin + p];
      if (texts_[i].find(query) != std::string_view::npos) {
        return static_cast<long>(i);
      }
    }
    return -1;
  }

  std::size_t size() const noexcept { return texts_.size(); }

 private:
  struct slot {
    std::size_t begin = 0;
    std::size_t count = 0;
    std::size_t filled = 0;
  };
  std::vector<std::string_view> texts_;
  std::unordered_map<std::uint64_t, slot> slots_;
  std::vector<std::uint32_t> postings_;  // per gram, ascending text indices

  static std::uint64_t gram_at(std::string_view t, std::size_t k) {
    std::uint64_t g = 0;
    for (std::size_t j = 0; j != q; ++j) {
      g = (g << 8) | static_cast<unsigned char>(t[k + j]);
    }
    return g;
  }

  static void grams_of(std::string_view t, std::vector<std::uint64_t>& out) {
    out.clear();
    for (std::size_t k = 0; k + q <= t.size(); ++k) {
      out.push_back(gram_at(t, k));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
};

}  // namespace qtl
