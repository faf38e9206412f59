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
/// `decide_with`, asks either the reference loops or these indexes). The pattern dialects
/// (compressed-tensors' `ignore`, fnmatch and ModelOpt's globs, transformers' lists, AutoRound's
/// `extra_config`) are compiled by `qtl/rules/dialect_index.hpp` when a consumer first asks for
/// them (once, thread-safe), so a config decided for one consumer builds only that one's index;
/// so are a mixed-precision config's groups or `quantized_layers` (`qtl/rules/mixed.hpp`): then
/// `decide(cc, consumer::vllm_compressed_tensors, module)` is "which scheme does this module get".
/// Still a scan per layer: AutoRound's fused-module step over the packed-modules mapping.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/dialect_index.hpp>
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

  /// The skip list as compressed-tensors' `ignore` (`check_contains`: sglang's reading).
  ct_ignore_index const& ct(bool check_contains) const {
    return ct_[check_contains ? 1 : 0].get(
        [&] { return std::make_unique<ct_ignore_index const>(cfg_->skip_list, check_contains); });
  }
  /// The skip list for the compressed-tensors library's `match_name`.
  ct_library_index const& ct_library() const {
    return ct_library_.get(
        [&] { return std::make_unique<ct_library_index const>(cfg_->skip_list, cfg_->packed_modules_mapping); });
  }
  /// The skip list as fnmatch globs (`subtree`: also `glob + ".*"`).
  glob_index const& globs(bool subtree) const {
    return globs_[subtree ? 1 : 0].get([&] { return std::make_unique<glob_index const>(cfg_->skip_list, subtree); });
  }
  sglang_modelopt_index const& sglang_modelopt() const {
    return sglang_modelopt_.get([&] { return std::make_unique<sglang_modelopt_index const>(cfg_->skip_list); });
  }
  vllm_modelopt_index const& vllm_modelopt() const {
    return vllm_modelopt_.get([&] { return std::make_unique<vllm_modelopt_index const>(cfg_->skip_list); });
  }
  transformers_v4_bnb_index const& transformers_v4_bnb() const {
    return bnb_.get([&] { return std::make_unique<transformers_v4_bnb_index const>(cfg_->skip_list); });
  }
  transformers_v5_index const& transformers_v5() const {
    return v5_.get([&] { return std::make_unique<transformers_v5_index const>(cfg_->skip_list); });
  }
  /// The mixed-precision config groups or `quantized_layers` (qtl/rules/mixed.hpp).
  mixed_index const& mixed() const {
    return mixed_.get([&] { return std::make_unique<mixed_index const>(*cfg_); });
  }
  /// `extra_config` and `block_name_to_quantize`.
  auto_round_index const& auto_round() const {
    return auto_round_.get([&] { return std::make_unique<auto_round_index const>(*cfg_); });
  }

 private:
  quant_config const* cfg_;
  std::vector<std::string> fp8_list_;
  skip_list_index list_;
  skip_list_index fp8_;
  skip_list_index in_block_;
  fused_index fused_;
  std::unique_ptr<compiled_dynamic_rules const> dynamic_;
  detail::built_once<ct_ignore_index> ct_[2];
  detail::built_once<ct_library_index> ct_library_;
  detail::built_once<glob_index> globs_[2];
  detail::built_once<sglang_modelopt_index> sglang_modelopt_;
  detail::built_once<vllm_modelopt_index> vllm_modelopt_;
  detail::built_once<transformers_v4_bnb_index> bnb_;
  detail::built_once<transformers_v5_index> v5_;
  detail::built_once<auto_round_index> auto_round_;
  detail::built_once<mixed_index> mixed_;
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
  mixed_index const& mixed() const { return cc.mixed(); }
  std::size_t in_block(std::string_view name) const { return cc.in_block(name); }
  std::size_t ct_find(std::string_view name, bool check_contains) const { return cc.ct(check_contains).find(name); }
  std::size_t ct_library(std::string_view name) const { return cc.ct_library().find(name); }
  std::size_t sglang_modelopt(std::string_view prefix) const { return cc.sglang_modelopt().find(prefix); }
  std::size_t vllm_modelopt(std::string_view prefix) const { return cc.vllm_modelopt().find(prefix); }
  std::size_t fnmatch(std::string_view module, bool subtree) const { return cc.globs(subtree).find(module); }
  std::size_t transformers_v4_bnb(std::string_view module) const { return cc.transformers_v4_bnb().find(module); }
  std::size_t transformers_v5(std::string_view module) const { return cc.transformers_v5().find(module); }
  std::size_t auto_round_exact(std::string_view name) const { return cc.auto_round().exact(name); }
  std::size_t auto_round_regex(std::string_view name, bool search) const {
    return cc.auto_round().regex(name, search);
  }
  bool in_blocks(std::string_view module) const { return cc.auto_round().in_blocks(module); }
  std::vector<std::size_t> keys_starting_with(std::string_view module) const {
    return cc.auto_round().keys_starting_with(module);
  }
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
