#pragma once
// The memcpy baseline of DESIGN's performance contract, for every host benchmark: a copy of a
// buffer as large as the operation's input, in the same binary and run, whose bytes_per_second
// counts each byte read and written (twice the buffer). The ratio of an operation's figure to
// this one is the figure that counts.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace qtl_bench {

/// Times `memcpy(dst, src, bytes)` per iteration; counts 2 * bytes per iteration.
inline void memcpy_baseline(benchmark::State& state, void const* src, void* dst, std::size_t bytes) {
  for (auto _ : state) {
    std::memcpy(dst, src, bytes);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(bytes));
}

/// As above, on buffers of its own (`bytes` of 1s copied over 0s).
inline void memcpy_baseline(benchmark::State& state, std::size_t bytes) {
  std::vector<char> const src(bytes, 1);
  std::vector<char> dst(bytes, 0);
  memcpy_baseline(state, src.data(), dst.data(), bytes);
}

}  // namespace qtl_bench
