#pragma once
/// \file
/// `qtl::compiled_config`: a `quant_config` compiled once for deciding many layers — its
/// `dynamic` rules on combined DFAs (`compiled_dynamic_rules`), its skip list, sglang's doubled
/// FP8 list and vLLM's `modules_in_block_to_quantize` in hash tables and automata
/// (`skip_list_index`), its packed-modules mapping in a hash table (`fused_index`). Deciding N
/// layers then costs O(N x name length) after O(config size) of compilation, where `decide(cfg,
/// ...)` scans every list for every layer (O(N x config size)).
///
///   qtl::compiled_config const cc(cfg);                 // cfg must outlive cc, unchanged
///   for (auto const& m : modules)
///     qtl::decision const d = qtl::decide(cc, qtl::consumer::sglang_gptq, m);
///
/// The decision is `decide(cfg, c, m, kind, opt)`'s, field for field (one body,
/// `decide_with`, asks either the reference loops or these indexes). Lists the indexes do not
/// cover are still scanned: compressed-tensors' `ignore` (regex and case-folded entries),
/// ModelOpt's wildcard patterns, fnmatch, transformers v5 regexes, AutoRound's `extra_config`.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/skip_index.hpp>

namespace qtl {

/// A config compiled for `decide`. Holds views of `cfg`: `cfg` must outlive it and stay
/// unchanged. Immutable after construction; safe to share between threads.
class compiled_config {
 public:
  explicit compiled_config(quant_config const& cfg)
      : cfg_(&cfg),
        fp8_list_(detail::sglang_fp8_list(cfg.skip_list)),
        list_(cfg.skip_list),
        fp8_(fp8_list_, false),
        in_block_(cfg.modules_in_block_to_quantize),
        fused_(cfg.packed_modules_mapping) {
    try {
      dynamic_ = std::make_unique<compiled_dynamic_rules const>(cfg.dynamic);
    } catch (regex_error const&) {
      // The rules together exceed a regex limit although each compiles alone: `decide` then
      // matches them one by one (decide_options::dynamic null), with the same result.
    }
  }

  compiled_config(compiled_config const&) = delete;  // holds views of its own members
  compiled_config& operator=(compiled_config const&) = delete;

  quant_config const& config() const { return *cfg_; }
  /// The compiled `dynamic` rules, or null when they are matched one by one.
  compiled_dynamic_rules const* dynamic() const { return dynamic_.get(); }
  /// The packed-modules mapping's index.
  fused_index const& fused() const { return fused_; }
  /// The skip list's index.
  skip_list_index const& list() const { return list_; }

  /// `f(index of sglang's doubled FP8 list)` (see `linear_config_index::with_fp8_list`).
  template <class F>
  auto with_fp8_list(F&& f) const {
    return f(fp8_);
  }
  /// The first `modules_in_block_to_quantize` entry that is a substring of `name`.
  std::size_t in_block(std::string_view name) const { return in_block_.substring(name); }

 private:
  quant_config const* cfg_;
  std::vector<std::string> fp8_list_;
  skip_list_index list_;
  skip_list_index fp8_;
  skip_list_index in_block_;
  fused_index fused_;
  std::unique_ptr<compiled_dynamic_rules const> dynamic_;
};

namespace detail {
/// `compiled_config` seen as `decide_with`'s index.
struct compiled_config_index {
  compiled_config const& cc;
  skip_list_index const& list() const { return cc.list(); }
  template <class F>
  auto with_fp8_list(F&& f) const {
    return cc.with_fp8_list(static_cast<F&&>(f));
  }
  fused_index const& fused() const { return cc.fused(); }
  std::size_t in_block(std::string_view name) const { return cc.in_block(name); }
};
}  // namespace detail

/// `decide(cc.config(), c, module, kind, opt)`, from the compiled indexes (and the compiled
/// `dynamic` rules unless `opt.dynamic` names others).
inline decision decide(compiled_config const& cc, consumer c, std::string_view module, layer_kind kind,
                       decide_options opt = {}) {
  if (opt.dynamic == nullptr) {
    opt.dynamic = cc.dynamic();
  }
  return decide_with(cc.config(), c, module, kind, opt, detail::compiled_config_index{cc});
}

/// `decide` with the layer kind inferred from the name (`infer_layer_kind`).
inline decision decide(compiled_config const& cc, consumer c, std::string_view module,
                       decide_options const& opt = {}) {
  return decide(cc, c, module, infer_layer_kind(module), opt);
}

/// The decisions of `consumers` for one layer.
inline std::vector<decision> decide_all(compiled_config const& cc, std::string_view module, layer_kind kind,
                                        std::span<consumer const> consumers = all_consumers,
                                        decide_options const& opt = {}) {
  std::vector<decision> out;
  out.reserve(consumers.size());
  for (consumer const c : consumers) {
    out.push_back(decide(cc, c, module, kind, opt));
  }
  return out;
}

}  // namespace qtl
