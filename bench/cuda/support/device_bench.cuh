#pragma once
// The device side of docs/performance.md's contract, shared by every bench/cuda/*_bench.cu: device
// buffers, CUDA-event timing of one launch per iteration (Google Benchmark's manual time), and,
// in the same run, a device-to-device copy that moves the same bytes, so that every benchmark
// reports bytes_per_second and the counter `ratio_to_d2d_copy` (the figure that counts;
// scripts/gpu-check.sh prints it). Without a usable device every benchmark reports an error
// (SkipWithError) and the program exits 0.
//
//   bytes      what the operation reads once plus what it writes once, per launch
//   the copy   cudaMemcpyAsync D2D of bytes/2 (so it too reads and writes `bytes`), timed right
//              after each launch of the operation, outside the iteration's time
//   ratio      (total copy time) / (total operation time) over the run = op bytes/s / copy bytes/s
#include <cuda_runtime.h>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <qtl/numeric.hpp>

namespace qtl_bench::cuda {

/// The FP8 and FP4 benchmarks' input: `n` bf16 values cycling through -10.00, -9.99, ..., 10.00.
inline std::vector<qtl::bfloat16_t> ramp_bf16(std::size_t n) {
  std::vector<qtl::bfloat16_t> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    h[i] = qtl::from_float<qtl::bfloat16_t>(static_cast<float>(static_cast<int>(i % 2001) - 1000) * 0.01f);
  }
  return h;
}

/// True when a CUDA device is present and usable (asked once).
inline bool have_device() {
  static bool const ok = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return ok;
}

/// `n` elements of T in device memory, or nothing (`ok()` false) without a device or memory.
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t n) : n_(n) {
    if (!have_device() || cudaMalloc(reinterpret_cast<void**>(&p_), n_ == 0 ? 1 : bytes()) != cudaSuccess) {
      p_ = nullptr;
    }
  }
  /// A copy of `h` (nothing where the upload fails).
  explicit device_array(std::vector<T> const& h) : device_array(h.size()) {
    if (p_ != nullptr && cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(p_);
      p_ = nullptr;
    }
  }
  ~device_array() {
    if (p_ != nullptr) cudaFree(p_);
  }
  device_array(device_array const&) = delete;
  device_array& operator=(device_array const&) = delete;

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  bool ok() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

/// A start and a stop event; `time(f)` enqueues `f` between them and returns its status and
/// milliseconds.
class event_timer {
 public:
  event_timer() { ok_ = cudaEventCreate(&start_) == cudaSuccess && cudaEventCreate(&stop_) == cudaSuccess; }
  ~event_timer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  event_timer(event_timer const&) = delete;
  event_timer& operator=(event_timer const&) = delete;
  bool ok() const { return ok_; }

  template <class F>
  cudaError_t time(F const& f, double& seconds) {
    cudaEventRecord(start_);
    cudaError_t const e = f();
    cudaEventRecord(stop_);
    cudaError_t const s = cudaEventSynchronize(stop_);
    float ms = 0;
    cudaEventElapsedTime(&ms, start_, stop_);
    seconds = static_cast<double>(ms) / 1e3;
    return e != cudaSuccess ? e : s;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool ok_ = false;
};

/// The copy's buffers: two of at least `bytes`, kept for the program's run (the largest asked so far).
inline std::pair<void*, void*> copy_buffers(std::size_t bytes) {
  static std::size_t held = 0;
  static void* src = nullptr;
  static void* dst = nullptr;
  if (bytes > held) {
    cudaFree(src);
    cudaFree(dst);
    src = dst = nullptr;
    held = 0;
    if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) {
      cudaFree(src);
      src = dst = nullptr;
      return {nullptr, nullptr};
    }
    cudaMemset(src, 0x5A, bytes);
    held = bytes;
  }
  return {src, dst};
}

/// Times `op` (enqueues on the default stream, returns cudaError_t) once per iteration after one
/// warm-up launch, each followed by the D2D copy of the same `bytes`; sets bytes_per_second and
/// `ratio_to_d2d_copy`. `ready` false (buffers missing): the benchmark reports `why` instead.
template <class Op>
void time_against_copy(benchmark::State& state, std::int64_t bytes, bool ready, Op const& op,
                       char const* why = "no usable CUDA device (or its memory)") {
  if (!ready || !have_device()) {
    state.SkipWithError(why);
    return;
  }
  auto const half = static_cast<std::size_t>(bytes / 2 > 0 ? bytes / 2 : 1);
  auto const [src, dst] = copy_buffers(half);
  event_timer timer;
  if (src == nullptr || !timer.ok()) {
    state.SkipWithError("no device memory or events for the D2D copy baseline");
    return;
  }
  auto const copy = [&, src = src, dst = dst] { return cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice); };
  if (cudaError_t const e = op(); e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {  // warm-up
    state.SkipWithError(e != cudaSuccess ? cudaGetErrorString(e) : "the warm-up launch failed");
    return;
  }
  double op_total = 0;
  double copy_total = 0;
  for (auto _ : state) {
    double s = 0;
    if (cudaError_t const e = timer.time(op, s); e != cudaSuccess) {
      state.SkipWithError(cudaGetErrorString(e));
      return;
    }
    state.SetIterationTime(s);  // manual time: the copy below is not part of it
    op_total += s;
    double c = 0;
    if (cudaError_t const e = timer.time(copy, c); e != cudaSuccess) {
      state.SkipWithError(cudaGetErrorString(e));
      return;
    }
    copy_total += c;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
  state.counters["ratio_to_d2d_copy"] = op_total > 0 ? copy_total / op_total : 0.0;
}

/// The registration every device benchmark takes: manual (event) time, microseconds.
inline void device_benchmark(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace qtl_bench::cuda
