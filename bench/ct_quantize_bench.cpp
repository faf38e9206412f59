// Host throughput of compressed-tensors pack-quantized (qtl/ct_quantize.hpp) beside memcpy
// (docs/performance.md's contract), one core, on a 4096 x 4096 bf16 weight (32 MiB) in slices of
// 256 rows as `qtl quantize --format w4a16|w8a16` runs it: int4 and int8, symmetric and
// asymmetric, groups of 128 and per channel; and the FP4 recipes of qtl/ct_fp4.hpp (NVFP4 given
// its global scale, MXFP4) and MXFP8 (qtl/ct_mxfp8.hpp) on the same weight.
//
// bytes_per_second counts the input read once and the outputs written once: 2 B/element in,
// bits/8 B/element of codes, the scales (and zero points) out. Times are CPU times of the one
// benchmark thread. BM_memcpy copies a buffer as large as the bf16 input and counts 2x its size.
//
// The figures measured and what was tried: docs/performance.md, "compressed-tensors pack-quantized".
//
// `BM_ct_pack_old/...` is the loop the tool ran before the op (kept here only for the A/B): a separate
// scalar NaN/Inf pass over the weight, then per group the max/min, ct_int_code one element at a
// time into int32 codes [256, K], and qtl::pack_cols of them.

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_mxfp8.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/fp8.hpp>
#include <qtl/pack.hpp>

#include "support/memcpy_baseline.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::index_t;

constexpr index_t rows = 4096;
constexpr index_t cols = 4096;
constexpr index_t slice = 256;

std::vector<bfloat16_t> const& weight() {
  static std::vector<bfloat16_t> const w = [] {
    std::vector<bfloat16_t> v(static_cast<std::size_t>(rows * cols));
    std::mt19937 gen(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (auto& x : v) {
      x = qtl::from_float<bfloat16_t>(normal(gen));
    }
    return v;
  }();
  return w;
}

std::int64_t bytes_of(int bits, index_t gs, bool sym) {
  index_t const groups = cols / gs;
  return rows * cols * 2 + rows * cols * bits / 8 + rows * groups * (2 + (sym ? 0 : 4));
}

void bm_memcpy(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(rows * cols * 2));
}

void bm_op(benchmark::State& state, int bits, index_t gs, bool sym) {
  auto const& w = weight();
  index_t const g = gs == -1 ? 1 : cols / gs;
  std::vector<std::int32_t> packed(static_cast<std::size_t>(slice * cols * bits / 32));
  std::vector<bfloat16_t> scales(static_cast<std::size_t>(slice * g));
  std::vector<std::int32_t> zp(static_cast<std::size_t>(slice * g));
  qtl::ct_pack_options opt;
  opt.bits = bits;
  opt.group_size = gs;
  opt.symmetric = sym;
  for (auto _ : state) {
    for (index_t n0 = 0; n0 < rows; n0 += slice) {
      opt.first_row = n0;
      qtl::ct_pack_quantize(qtl::make_view(w.data() + n0 * cols, slice, cols),
                            qtl::ct_pack_outputs<bfloat16_t>{qtl::make_view(packed.data(), slice, cols * bits / 32),
                                                             qtl::make_view(scales.data(), slice, g),
                                                             qtl::make_view(zp.data(), slice, g)},
                            opt);
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes_of(bits, gs == -1 ? cols : gs, sym));
}

/// qtl::ct_nvfp4_quantize / ct_mxfp4_quantize of the weight in slices of 256 rows; bytes: the
/// bf16 input, the codes (K/2 a row) and the scale bytes.
template <class F>
void bm_fp4(benchmark::State& state) {
  auto const& w = weight();
  std::vector<qtl::float4_e2m1x2_t> values(static_cast<std::size_t>(slice * cols / 2));
  std::vector<typename F::scale> scales(static_cast<std::size_t>(slice * cols / F::block_size));
  float const gs = qtl::ct_nvfp4_global_scale(qtl::fp8_amax(qtl::make_view(w.data(), rows, cols)));
  for (auto _ : state) {
    for (index_t n0 = 0; n0 < rows; n0 += slice) {
      auto const in = qtl::make_view(w.data() + n0 * cols, slice, cols);
      auto const vv = qtl::make_view(values.data(), slice, cols / 2);
      auto const sv = qtl::make_view(scales.data(), slice, cols / F::block_size);
      if constexpr (F::has_global_scale) {
        qtl::ct_nvfp4_quantize(in, gs, vv, sv);
      } else {
        qtl::ct_mxfp4_quantize(in, vv, sv);
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * (rows * cols * 2 + rows * cols / 2 + rows * cols / F::block_size));
}

/// qtl::ct_mxfp8_quantize of the weight in slices of 256 rows; bytes: the bf16 input, the E4M3
/// codes and the scale bytes.
void bm_mxfp8(benchmark::State& state) {
  auto const& w = weight();
  std::vector<qtl::float8_e4m3fn_t> values(static_cast<std::size_t>(slice * cols));
  std::vector<qtl::float8_e8m0fnu_t> scales(static_cast<std::size_t>(slice * cols / qtl::ct_mxfp8_block));
  for (auto _ : state) {
    for (index_t n0 = 0; n0 < rows; n0 += slice) {
      qtl::ct_mxfp8_quantize(qtl::make_view(w.data() + n0 * cols, slice, cols),
                             qtl::make_view(values.data(), slice, cols),
                             qtl::make_view(scales.data(), slice, cols / qtl::ct_mxfp8_block));
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * (rows * cols * 3 + rows * cols / qtl::ct_mxfp8_block));
}

// ---- the tool's loop before the op, for the A/B only --------------------------------------------

void old_check_finite(bfloat16_t const* w) {
  for (index_t r = 0; r < rows; ++r) {
    for (index_t c = 0; c < cols; ++c) {
      if (!std::isfinite(qtl::to_float(w[r * cols + c]))) {
        throw std::runtime_error("non-finite");
      }
    }
  }
}

void bm_old(benchmark::State& state, int bits, index_t gs, bool sym) {
  auto const& w = weight();
  index_t const k = cols;
  gs = gs == -1 ? k : gs;
  index_t const groups = k / gs;
  int const pf = 32 / bits;
  std::int32_t const offset = 1 << (bits - 1);
  std::vector<std::int32_t> codes(static_cast<std::size_t>(slice * k));
  std::vector<std::int32_t> packed(static_cast<std::size_t>(slice * (k / pf)));
  std::vector<bfloat16_t> scales(static_cast<std::size_t>(slice * groups));
  std::vector<std::int32_t> zeros(static_cast<std::size_t>(slice * groups));
  for (auto _ : state) {
    old_check_finite(w.data());
    for (index_t n0 = 0; n0 < rows; n0 += slice) {
      for (index_t r = 0; r < slice; ++r) {
        bfloat16_t const* row = w.data() + (n0 + r) * k;
        for (index_t g = 0; g < groups; ++g) {
          bfloat16_t const* x = row + g * gs;
          auto const [mx, mn] = qtl::nan_max_min(x, gs);
          auto const p = qtl::ct_int_group_params<bfloat16_t>(mx, mn, bits, sym);
          scales[static_cast<std::size_t>(r * groups + g)] = qtl::from_float<bfloat16_t>(p.s);
          zeros[static_cast<std::size_t>(r * groups + g)] = static_cast<std::int32_t>(p.zp) + offset;
          std::int32_t* out = codes.data() + r * k + g * gs;
          for (index_t i = 0; i < gs; ++i) {
            out[i] = static_cast<std::int32_t>(qtl::ct_int_code<bfloat16_t>(qtl::to_float(x[i]), p, bits)) + offset;
          }
        }
      }
      auto const cv = qtl::make_view(static_cast<std::int32_t const*>(codes.data()), slice, k);
      auto const pv = qtl::make_view(packed.data(), slice, k / pf);
      if (bits == 4) {
        qtl::pack_cols<4>(cv, pv);
      } else {
        qtl::pack_cols<8>(cv, pv);
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes_of(bits, gs, sym));
}

struct config {
  char const* name;
  int bits;
  index_t gs;
  bool sym;
};
constexpr config configs[] = {
    {"int4_sym_g128", 4, 128, true},   {"int4_asym_g128", 4, 128, false}, {"int8_sym_g128", 8, 128, true},
    {"int8_asym_g128", 8, 128, false}, {"int4_sym_channel", 4, -1, true},
};

int const registered = [] {
  benchmark::RegisterBenchmark("BM_memcpy", bm_memcpy)->Unit(benchmark::kMillisecond);
  for (auto const& c : configs) {
    benchmark::RegisterBenchmark((std::string("BM_ct_pack/") + c.name).c_str(), [c](benchmark::State& s) {
      bm_op(s, c.bits, c.gs, c.sym);
    })->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("BM_ct_pack_old/") + c.name).c_str(), [c](benchmark::State& s) {
      bm_old(s, c.bits, c.gs, c.sym);
    })->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("BM_ct_fp4/nvfp4", bm_fp4<qtl::nvfp4>)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_ct_fp4/mxfp4", bm_fp4<qtl::mxfp4>)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_ct_mxfp8", bm_mxfp8)->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
