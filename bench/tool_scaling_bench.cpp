// How the qtl tool's front end scales with the size of its input:
//
//   BM_header_parse/N      qtl::io::safetensors_file::view of a file with N tensors (a MoE-sized
//                          header: N = 200k is 20 MB of JSON), i.e. JSON parse + validation +
//                          the name index; bytes_per_second of the whole file
//   BM_memcpy_header/N     a copy of the same bytes (the contract's reference figure)
//   BM_config_parse/R      qtl::io::parse_quant_config of a GPTQ config with R `dynamic` rules
//   BM_decide_dynamic/M/R  qtl::decide (sglang's GPTQ loader) for M module names against a config
//                          of R `dynamic` rules; items_per_second = names. Linear in M; the
//                          per-name cost grows with R (each name is matched rule by rule)
//   BM_decide_dynamic_compiled/M/R  the same with the config compiled once
//                          (qtl::compiled_config, as `qtl explain` and `qtl lint` do); the
//                          compilation is inside the timed loop
//   BM_decide_skip_list/M/L/F        both engines' decisions (lint's pair: sglang_fp8 + vllm_fp8
//                          for F = 0, sglang_awq + vllm_awq for F = 1) for M names against an
//                          L-entry modules_to_not_convert, every list scanned per name
//   BM_decide_skip_list_compiled/M/L/F  the same through qtl::compiled_config (compiled in the loop)
//   BM_decide_packed/M/P             sglang's is_layer_skipped for M fused names under a P-entry
//                          packed_modules_mapping (the mapping scanned per name)
//   BM_decide_packed_compiled/M/P    the same through qtl::compiled_config (compiled in the loop)
//   BM_decide_dialect/M/R/D          the pattern dialects, every consumer of dialect D, for M names
//                          against R rules, the lists scanned per name (main's loops, kept as the
//                          reference): D = 0 compressed-tensors `ignore` (half exact names, half
//                          `re:`; vllm_ and sglang_compressed_tensors, compressed_tensors),
//                          1 ModelOpt / fnmatch globs (sglang_ and vllm_modelopt, fnmatch),
//                          2 transformers' modules_to_not_convert (v4, v4 bnb, v5), 3 AutoRound
//                          `extra_config` (half layer names, half regex keys; sglang_ and
//                          vllm_auto_round). Only the last rule matches the names
//   BM_decide_dialect_compiled/M/R/D the same through qtl::compiled_config (compiled in the loop)
// Linear scaling shows as a constant bytes_per_second (items_per_second) across N (M).

#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <qtl/io/quant_config.hpp>
#include <qtl/io/safetensors.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/consumers.hpp>

namespace {

/// A safetensors file of `n` F16 [2] tensors named like a MoE checkpoint's experts.
std::vector<std::byte> const& header_file(std::size_t n) {
  static std::map<std::size_t, std::vector<std::byte>> cache;
  auto& f = cache[n];
  if (!f.empty()) {
    return f;
  }
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (std::size_t i = 0; i < n; ++i) {
    h += ",\"model.layers." + std::to_string(i / 3000) + ".mlp.experts." + std::to_string(i % 3000) + ".w" +
         std::to_string(i % 3) + ".weight\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[" +
         std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
  }
  h += "}";
  h.append((8 - (8 + h.size()) % 8) % 8, ' ');
  f.resize(8 + h.size() + 4 * n);
  std::uint64_t const len = h.size();
  for (int i = 0; i < 8; ++i) {
    f[static_cast<std::size_t>(i)] = static_cast<std::byte>(len >> (8 * i));
  }
  std::memcpy(f.data() + 8, h.data(), h.size());
  return f;
}

void BM_header_parse(benchmark::State& state) {
  auto const& f = header_file(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    auto const file = qtl::io::safetensors_file::view(std::span<std::byte const>(f), "bench.safetensors");
    benchmark::DoNotOptimize(file.tensors().data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(f.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

void BM_memcpy_header(benchmark::State& state) {
  auto const& f = header_file(static_cast<std::size_t>(state.range(0)));
  std::vector<std::byte> dst(f.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), f.data(), f.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(f.size()));
}

/// A GPTQ config whose `dynamic` holds `r` rules, one per (layer, expert), none matching the
/// benchmark's names but the last (so every name is tried against every rule).
std::string dynamic_config(std::size_t r) {
  std::string s = "{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128,\"desc_act\":false,\"sym\":true,\"dynamic\":{";
  for (std::size_t i = 0; i + 1 < r; ++i) {
    s += "\"-:model\\\\.layers\\\\." + std::to_string(1000 + i / 100) + "\\\\.mlp\\\\.experts\\\\." +
         std::to_string(i % 100) + "\\\\..*\":{},";
  }
  s += "\"+:.*\":{\"bits\":8}}}";
  return s;
}

std::vector<std::string> module_names(std::size_t m) {
  std::vector<std::string> out;
  out.reserve(m);
  for (std::size_t i = 0; i < m; ++i) {
    out.push_back("model.layers." + std::to_string(i / 300) + ".mlp.experts." + std::to_string(i % 300) + ".up_proj");
  }
  return out;
}

void BM_config_parse(benchmark::State& state) {
  std::string const text = dynamic_config(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    auto const cfg = qtl::io::parse_quant_config(text);
    benchmark::DoNotOptimize(cfg.dynamic.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
}

void BM_decide_dynamic(benchmark::State& state) {
  auto const names = module_names(static_cast<std::size_t>(state.range(0)));
  auto const cfg = qtl::io::parse_quant_config(dynamic_config(static_cast<std::size_t>(state.range(1))));
  for (auto _ : state) {
    std::size_t quantized = 0;
    for (auto const& n : names) {
      quantized += qtl::decide(cfg, qtl::consumer::sglang_gptq, n).skipped ? 0 : 1;
    }
    if (quantized != names.size()) {
      state.SkipWithError("a name the last rule should quantize was skipped");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

void BM_decide_dynamic_compiled(benchmark::State& state) {
  auto const names = module_names(static_cast<std::size_t>(state.range(0)));
  auto const cfg = qtl::io::parse_quant_config(dynamic_config(static_cast<std::size_t>(state.range(1))));
  for (auto _ : state) {
    qtl::compiled_config const cc(cfg);
    std::size_t quantized = 0;
    for (auto const& n : names) {
      quantized += qtl::decide(cc, qtl::consumer::sglang_gptq, n).skipped ? 0 : 1;
    }
    if (quantized != names.size()) {
      state.SkipWithError("a name the last rule should quantize was skipped");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}

/// An FP8 (F = 0) or AWQ (F = 1) config whose modules_to_not_convert lists `l` modules of
/// layers the benchmark's names do not have, and the last layer's `lm_head`-like entry that none
/// of them is either: every name is compared with the whole list.
qtl::quant_config skip_list_config(std::size_t l, std::int64_t family) {
  qtl::quant_config cfg;
  cfg.family = family == 0 ? qtl::quant_family::fp8 : qtl::quant_family::awq;
  cfg.skip_list.reserve(l);
  for (std::size_t i = 0; i < l; ++i) {
    cfg.skip_list.push_back("model.layers." + std::to_string(1000 + i / 300) + ".mlp.experts." +
                            std::to_string(i % 300) + ".down_proj");
  }
  return cfg;
}

template <bool Compiled>
void decide_skip_list(benchmark::State& state) {
  auto const names = module_names(static_cast<std::size_t>(state.range(0)));
  qtl::quant_config const cfg = skip_list_config(static_cast<std::size_t>(state.range(1)), state.range(2));
  std::array<qtl::consumer, 2> const engines =
      state.range(2) == 0 ? std::array{qtl::consumer::sglang_fp8, qtl::consumer::vllm_fp8}
                          : std::array{qtl::consumer::sglang_awq, qtl::consumer::vllm_awq};
  for (auto _ : state) {
    std::size_t skipped = 0;
    auto run = [&](auto const& config) {
      for (auto const& n : names) {
        for (qtl::consumer const c : engines) {
          skipped += qtl::decide(config, c, n).skipped ? 1 : 0;
        }
      }
    };
    if constexpr (Compiled) {
      qtl::compiled_config const cc(cfg);
      run(cc);
    } else {
      run(cfg);
    }
    if (skipped != 0) {
      state.SkipWithError("a name no entry names was skipped");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
void BM_decide_skip_list(benchmark::State& state) { decide_skip_list<false>(state); }
void BM_decide_skip_list_compiled(benchmark::State& state) { decide_skip_list<true>(state); }

/// A mapping of `p` fused names (`fusedK` -> `shardK_a`, `shardK_b`), a skip list naming the
/// shards of every other fused module of layer 0, and names `model.layers.L.mlp.fusedK`.
template <bool Compiled>
void decide_packed(benchmark::State& state) {
  auto const m = static_cast<std::size_t>(state.range(0));
  auto const p = static_cast<std::size_t>(state.range(1));
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::fp8;
  for (std::size_t k = 0; k < p; ++k) {
    std::string const f = "fused" + std::to_string(k);
    cfg.packed_modules_mapping.push_back({f, {"shard" + std::to_string(k) + "_a", "shard" + std::to_string(k) + "_b"}});
  }
  std::vector<std::string> names;
  std::size_t expect = 0;
  for (std::size_t i = 0; i < m; ++i) {
    std::size_t const k = (i * 7919) % p;
    names.push_back("model.layers." + std::to_string(i % 3) + ".mlp.fused" + std::to_string(k));
    if (i % 3 == 0 && k % 2 == 0) {
      ++expect;
    }
  }
  for (std::size_t k = 0; k < p; k += 2) {
    cfg.skip_list.push_back("model.layers.0.mlp.shard" + std::to_string(k) + "_a");
    cfg.skip_list.push_back("model.layers.0.mlp.shard" + std::to_string(k) + "_b");
  }
  for (auto _ : state) {
    std::size_t skipped = 0;
    auto run = [&](auto const& config) {
      for (auto const& n : names) {
        skipped += qtl::decide(config, qtl::consumer::vllm_fp8, n).skipped ? 1 : 0;
      }
    };
    if constexpr (Compiled) {
      qtl::compiled_config const cc(cfg);
      run(cc);
    } else {
      run(cfg);
    }
    if (skipped != expect) {
      state.SkipWithError("the skipped shards do not match the list");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
void BM_decide_packed(benchmark::State& state) { decide_packed<false>(state); }
void BM_decide_packed_compiled(benchmark::State& state) { decide_packed<true>(state); }

/// A config of dialect `d` (see the file comment) with `r` rules, the last of which (and only
/// it) matches `module_names`' names; and the consumers that read it.
std::pair<qtl::quant_config, std::vector<qtl::consumer>> dialect_config(std::size_t r, std::int64_t d) {
  qtl::quant_config cfg;
  using qtl::consumer;
  auto const layer = [](std::size_t i) { return std::to_string(1000 + i / 300); };
  auto const expert = [](std::size_t i) { return std::to_string(i % 300); };
  switch (d) {
    case 0:
      cfg.family = qtl::quant_family::compressed_tensors;
      for (std::size_t i = 0; i + 1 < r; ++i) {
        cfg.skip_list.push_back(i % 2 == 0 ? "model.layers." + layer(i) + ".mlp.experts." + expert(i) + ".down_proj"
                                           : "re:model\\.layers\\." + layer(i) + "\\.mlp\\.experts\\." +
                                                 expert(i) + "\\..*");
      }
      cfg.skip_list.push_back("re:.*\\.up_proj$");
      return {cfg, {consumer::vllm_compressed_tensors, consumer::sglang_compressed_tensors, consumer::compressed_tensors}};
    case 1:
      cfg.family = qtl::quant_family::modelopt;
      cfg.quant_algo = "NVFP4";
      for (std::size_t i = 0; i + 1 < r; ++i) {
        cfg.skip_list.push_back("model.layers." + layer(i) + ".mlp.experts." + expert(i) + (i % 2 ? ".*" : "*"));
      }
      cfg.skip_list.push_back("*.up_proj");
      return {cfg, {consumer::sglang_modelopt, consumer::vllm_modelopt, consumer::fnmatch}};
    case 2:
      cfg.family = qtl::quant_family::fp8;
      for (std::size_t i = 0; i + 1 < r; ++i) {
        cfg.skip_list.push_back("model.layers." + layer(i) + ".mlp.experts." + expert(i) + ".down_proj");
      }
      cfg.skip_list.push_back("up_proj");
      return {cfg, {consumer::transformers_v4, consumer::transformers_v4_bnb, consumer::transformers_v5}};
    default:
      cfg.family = qtl::quant_family::auto_round;
      for (std::size_t i = 0; i + 1 < r; ++i) {
        qtl::extra_config_entry e;
        e.key = i % 2 == 0 ? "model.layers." + layer(i) + ".mlp.experts." + expert(i) + ".down_proj"
                           : ".*layers\\." + layer(i) + "\\.mlp\\.experts\\." + expert(i) + "\\..*";
        e.bits = qtl::py_value::of_int(8);
        cfg.extra_config.push_back(e);
      }
      qtl::extra_config_entry last;
      last.key = ".*\\.up_proj";
      last.bits = qtl::py_value::of_int(16);
      cfg.extra_config.push_back(last);
      return {cfg, {consumer::sglang_auto_round, consumer::vllm_auto_round}};
  }
}

template <bool Compiled>
void decide_dialect(benchmark::State& state) {
  auto const names = module_names(static_cast<std::size_t>(state.range(0)));
  auto const [cfg, engines] = dialect_config(static_cast<std::size_t>(state.range(1)), state.range(2));
  for (auto _ : state) {
    std::size_t skipped = 0;
    auto run = [&](auto const& config) {
      for (auto const& n : names) {
        for (qtl::consumer const c : engines) {
          qtl::decision const d = qtl::decide(config, c, n);
          skipped += d.skipped && !d.error ? 1 : 0;
        }
      }
    };
    if constexpr (Compiled) {
      qtl::compiled_config const cc(cfg);
      run(cc);
    } else {
      run(cfg);
    }
    if (skipped != names.size() * engines.size()) {
      state.SkipWithError("the last rule should skip every name, and no other rule any");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
void BM_decide_dialect(benchmark::State& state) { decide_dialect<false>(state); }
void BM_decide_dialect_compiled(benchmark::State& state) { decide_dialect<true>(state); }

}  // namespace

BENCHMARK(BM_header_parse)->Arg(10'000)->Arg(50'000)->Arg(200'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_memcpy_header)->Arg(10'000)->Arg(50'000)->Arg(200'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_config_parse)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_dynamic)->Args({1'000, 100})->Args({10'000, 100})->Args({1'000, 1'000})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_dynamic_compiled)
    ->Args({1'000, 100})
    ->Args({10'000, 100})
    ->Args({1'000, 1'000})
    ->Args({10'000, 1'000})
    ->Args({100'000, 10'000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_skip_list)->Args({1'000, 1'000, 0})->Args({1'000, 10'000, 0})->Args({1'000, 10'000, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_skip_list_compiled)
    ->Args({1'000, 1'000, 0})
    ->Args({1'000, 10'000, 0})
    ->Args({100'000, 100'000, 0})
    ->Args({1'000, 10'000, 1})
    ->Args({100'000, 100'000, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_packed)->Args({1'000, 1'000})->Args({1'000, 100'000})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_packed_compiled)
    ->Args({1'000, 1'000})
    ->Args({1'000, 100'000})
    ->Args({100'000, 100'000})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_decide_dialect)
    ->Args({100, 10'000, 0})
    ->Args({100, 10'000, 1})
    ->Args({100, 10'000, 2})
    ->Args({100, 10'000, 3})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decide_dialect_compiled)
    ->Args({100'000, 10'000, 0})
    ->Args({100'000, 10'000, 1})
    ->Args({100'000, 10'000, 2})
    ->Args({100'000, 10'000, 3})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
