// GPU packing throughput beside a device-to-device copy (docs/performance.md's contract: at least
// 0.85 of cudaMemcpyAsync D2D): pack and unpack, rows and cols, 4 and 8 bits, on (4096, 4096) and
// (8192, 28672) int32 code matrices. Timed with cudaEvents around each launch (manual time).
//
// bytes_per_second counts every input byte read once and every output byte written once (the
// codes, K*N*4 bytes, and the words, K*N*4/pf); ratio_to_d2d_copy compares with a D2D copy of the
// same bytes in the same run (bench/cuda/support/device_bench.cuh).

#include <qtl/cuda/pack.cuh>
#include <qtl/pack.hpp>

#include <benchmark/benchmark.h>

#include "support/device_bench.cuh"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace {

using qtl::index_t;

struct device_buffers {
  explicit device_buffers(std::vector<std::int32_t> const& host)
      : codes(host), words(host.size() / 4), result(host.size()) {}
  qtl_bench::cuda::device_array<std::int32_t> codes;   // (K, N)
  qtl_bench::cuda::device_array<std::int32_t> words;   // room for (K, N/4)
  qtl_bench::cuda::device_array<std::int32_t> result;  // (K, N)
  bool ok() const { return codes.ok() && words.ok() && result.ok(); }
};

device_buffers& buffers_for(index_t k, index_t n) {
  static std::map<std::pair<index_t, index_t>, std::unique_ptr<device_buffers>> cache;
  auto& slot = cache[{k, n}];
  if (!slot) {
    std::vector<std::int32_t> host(static_cast<std::size_t>(k * n));
    std::mt19937 rng(42);
    for (auto& c : host) {
      c = static_cast<std::int32_t>(rng() & 0xF);  // valid 4- and 8-bit codes
    }
    slot = std::make_unique<device_buffers>(host);
  }
  return *slot;
}

enum class op { pack_rows, pack_cols, unpack_rows, unpack_cols };

template <op Op, int Bits>
void bm_pack(benchmark::State& state) {
  index_t const k = state.range(0);
  index_t const n = state.range(1);
  constexpr index_t pf = qtl::pack_factor<Bits>;
  device_buffers& b = buffers_for(k, n);
  auto const codes = qtl::make_view(b.codes.get(), k, n);
  auto const rows_words = qtl::make_view(b.words.get(), k / pf, n);
  auto const cols_words = qtl::make_view(b.words.get(), k, n / pf);
  auto const result = qtl::make_view(b.result.get(), k, n);
  bool ready = b.ok();
  if constexpr (Op == op::unpack_rows) {
    ready = ready && qtl::cuda::pack_rows<Bits>(codes, rows_words) == cudaSuccess;
  } else if constexpr (Op == op::unpack_cols) {
    ready = ready && qtl::cuda::pack_cols<Bits>(codes, cols_words) == cudaSuccess;
  }
  std::int64_t const bytes = 4 * k * n + 4 * k * n / pf;
  qtl_bench::cuda::time_against_copy(state, bytes, ready, [&] {
    if constexpr (Op == op::pack_rows) {
      return qtl::cuda::pack_rows<Bits>(codes, rows_words);
    } else if constexpr (Op == op::pack_cols) {
      return qtl::cuda::pack_cols<Bits>(codes, cols_words);
    } else if constexpr (Op == op::unpack_rows) {
      return qtl::cuda::unpack_rows<Bits>(rows_words, result);
    } else {
      return qtl::cuda::unpack_cols<Bits>(cols_words, result);
    }
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N"})->Args({4096, 4096})->Args({8192, 28672})->Apply(qtl_bench::cuda::device_benchmark);
}

#define QTL_PACK_CASE(name, bits) BENCHMARK_TEMPLATE(bm_pack, op::name, bits)->Apply(shapes);
#include "support/cases.def"

}  // namespace

BENCHMARK_MAIN();
