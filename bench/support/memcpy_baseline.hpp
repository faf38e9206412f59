#pragma once
// The memcpy baseline of docs/performance.md's contract, for every host benchmark: a copy of a
// buffer as large as the operation's input, in the same binary and run, whose bytes_per_second
// counts each byte read and written (twice the buffer). The ratio of an operation's figure to
// this one is the figure that counts.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
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

/// The same bytes copied in `parts` contiguous parts by `parts` threads (the calling one and
/// parts - 1 started per iteration, as the multithreaded host operations do); counts 2 * bytes.
/// Google Benchmark times the calling thread's CPU, which copies one part.
inline void memcpy_baseline_threads(benchmark::State& state, std::size_t bytes, std::size_t parts) {
  std::vector<char> const src(bytes, 1);
  std::vector<char> dst(bytes, 0);
  auto const part = [&](std::size_t p) {
    std::size_t const b = bytes * p / parts;
    std::memcpy(dst.data() + b, src.data() + b, bytes * (p + 1) / parts - b);
  };
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (std::size_t p = 1; p < parts; ++p) {
      pool.emplace_back(part, p);
    }
    part(0);
    for (auto& t : pool) {
      t.join();
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(bytes));
}

}  // namespace qtl_bench
