// Host packing throughput beside memcpy (docs/performance.md's contract): pack and unpack, rows and
// cols, 4 and 8 bits, on (4096, 4096) and (8192, 28672) int32 code matrices, one core.
//
// bytes_per_second counts every input byte read once and every output byte written once. The
// memcpy benchmarks copy a buffer as large as an operation's input and count 2x its size:
//   pack   input = the (K, N) codes          -> compare with bm_memcpy/<K*N*4>
//   unpack input = the (K, N/pf) words etc.  -> compare with bm_memcpy/<K*N*4/pf>
// (bm_memcpy is also run at K*N*4 for the unpacks, whose output has that size.)
// Rates use CPU time (Google Benchmark's default), not wall time: on a shared machine the wall
// time of a single-threaded loop also counts the time it spends descheduled.

#include <qtl/pack.hpp>

#include "support/memcpy_baseline.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace {

// One set of buffers per shape, made once: random codes (all in range for 4 and 8 bits: the low
// 4 bits of random bytes, so 8-bit packing sees them as valid too) and room for the results.
struct buffers {
  std::vector<std::int32_t> codes;   // (K, N)
  std::vector<std::int32_t> words;   // (K, N/4), enough for any op with pf >= 4
  std::vector<std::int32_t> result;  // (K, N)
};

buffers& buffers_for(qtl::index_t k, qtl::index_t n) {
  static std::map<std::pair<qtl::index_t, qtl::index_t>, std::unique_ptr<buffers>> cache;
  auto& slot = cache[{k, n}];
  if (!slot) {
    slot = std::make_unique<buffers>();
    slot->codes.resize(static_cast<std::size_t>(k * n));
    std::mt19937 rng(42);
    for (auto& c : slot->codes) {
      c = static_cast<std::int32_t>(rng() & 0xF);
    }
    slot->words.assign(static_cast<std::size_t>(k * n / 4), 0);
    slot->result.assign(static_cast<std::size_t>(k * n), 0);
  }
  return *slot;
}

void bm_memcpy(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(state.range(0)));
}

enum class op { pack_rows, pack_cols, unpack_rows, unpack_cols };

template <op Op, int Bits>
void bm_pack(benchmark::State& state) {
  qtl::index_t const k = state.range(0);
  qtl::index_t const n = state.range(1);
  constexpr qtl::index_t pf = qtl::pack_factor<Bits>;
  buffers& b = buffers_for(k, n);
  auto const codes = qtl::make_view(b.codes.data(), k, n);
  auto const rows_words = qtl::make_view(b.words.data(), k / pf, n);
  auto const cols_words = qtl::make_view(b.words.data(), k, n / pf);
  auto const result = qtl::make_view(b.result.data(), k, n);
  // Words to unpack come from packing the codes first.
  if constexpr (Op == op::unpack_rows) {
    qtl::pack_rows<Bits>(codes, rows_words);
  } else if constexpr (Op == op::unpack_cols) {
    qtl::pack_cols<Bits>(codes, cols_words);
  }
  for (auto _ : state) {
    if constexpr (Op == op::pack_rows) {
      qtl::pack_rows<Bits>(codes, rows_words);
    } else if constexpr (Op == op::pack_cols) {
      qtl::pack_cols<Bits>(codes, cols_words);
    } else if constexpr (Op == op::unpack_rows) {
      qtl::unpack_rows<Bits>(rows_words, result);
    } else {
      qtl::unpack_cols<Bits>(cols_words, result);
    }
    benchmark::DoNotOptimize(b.words.data());
    benchmark::DoNotOptimize(b.result.data());
    benchmark::ClobberMemory();
  }
  std::int64_t const bytes = 4 * k * n + 4 * k * n / pf;  // codes + words, one read, one write
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
  if constexpr (Op == op::unpack_rows || Op == op::unpack_cols) {
    // The round trip must hold, or the figure means nothing.
    if (std::memcmp(b.result.data(), b.codes.data(), b.codes.size() * sizeof(std::int32_t)) != 0) {
      state.SkipWithError("unpack did not restore the codes");
    }
  }
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096})->Args({8192, 28672})->Unit(benchmark::kMillisecond);
}

void copy_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t const elems : {std::int64_t{4096} * 4096, std::int64_t{8192} * 28672}) {
    for (std::int64_t const pf : {1, 4, 8}) {
      b->Arg(elems * 4 / pf);
    }
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(bm_memcpy)->Apply(copy_sizes);
#define QTL_PACK_CASE(name, bits) BENCHMARK_TEMPLATE(bm_pack, op::name, bits)->Apply(shapes);
#include "support/cases.def"

}  // namespace

BENCHMARK_MAIN();
