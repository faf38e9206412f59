// qtl/cuda/fp8.cuh against the host reference of qtl/fp8.hpp, bit for bit: every quantization
// variant (with NaN, Inf, zero rows and padding in the input), requantization and the
// fp8_all_close counts. Skipped (77) without a GPU by test/cuda/main.cu.
#include <qtl/cuda/fp8.cuh>
#include <qtl/fp8.hpp>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <device_compare.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::half_t;
using qtl::index_t;

using qtl_test::device_buffer;

/// `n` E4M3 codes of qtl_test::random_bytes(n, seed); `finite`: NaN codes (0x7F, 0xFF) made 0.
std::vector<float8_e4m3fn_t> random_e4m3(std::size_t n, std::uint32_t seed, bool finite) {
  std::vector<float8_e4m3fn_t> v(n);
  auto const bytes = qtl_test::random_bytes(n, seed);
  for (std::size_t i = 0; i < n; ++i) {
    v[i].bits = finite && (bytes[i] & 0x7F) == 0x7F ? std::uint8_t{0} : bytes[i];
  }
  return v;
}

template <class T>
std::vector<T> random_input(index_t rows, index_t cols, std::uint32_t seed) {
  auto v = qtl_test::block_ranged_normal<T>(rows, cols, seed, 10);
  // a zero row, a NaN, a negative NaN and an Inf
  for (index_t j = 0; j < cols && rows > 2; ++j) {
    v[static_cast<std::size_t>(2 * cols + j)] = qtl::from_float<T>(0.0f);
  }
  if (v.size() > 10) {
    v[3] = qtl::from_float<T>(std::numeric_limits<float>::quiet_NaN());
    v[5] = qtl::from_float<T>(-std::numeric_limits<float>::quiet_NaN());
    v[v.size() - 1] = qtl::from_float<T>(std::numeric_limits<float>::infinity());
  }
  return v;
}

template <class Fp8>
std::vector<std::uint8_t> codes(std::vector<Fp8> const& v) {
  std::vector<std::uint8_t> c;
  for (auto q : v) {
    c.push_back(q.bits);
  }
  return c;
}
std::vector<std::uint32_t> bits(std::vector<float> const& v) {
  std::vector<std::uint32_t> b;
  for (float f : v) {
    b.push_back(qtl::float_to_bits(f));
  }
  return b;
}

template <class T, class Fp8 = float8_e4m3fn_t>
void per_tensor_and_token(index_t m, index_t n, index_t padded, qtl::fp8_nan nan) {
  auto const x = random_input<T>(m, n, static_cast<std::uint32_t>(m * 131 + n));
  auto const in = qtl::make_view<T const>(x.data(), m, n);
  device_buffer<T> dx(x);
  auto const din = qtl::make_view<T const>(dx.ptr, m, n);
  std::size_t const out_n = static_cast<std::size_t>(padded * n);

  // dynamic per tensor (then static with the same scale)
  std::vector<Fp8> hq(out_n);
  qtl::fp8_tensor_options to;
  to.nan = nan;
  float const hs = qtl::scaled_fp8_quant_dynamic(in, qtl::make_view(hq.data(), padded, n), to);
  device_buffer<Fp8> dq(out_n);
  device_buffer<float> ds(1);
  REQUIRE(qtl::cuda::scaled_fp8_quant_dynamic<Fp8>(din, qtl::make_view(dq.ptr, padded, n), ds.ptr, to) == cudaSuccess);
  CHECK(qtl_test::mismatches(bits(ds.get()), bits({hs})) == "");
  CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");

  // per token, sglang and vLLM recipes
  for (auto const& o : {qtl::fp8_token_options{}, qtl::vllm_per_token_options<Fp8>(3.0f)}) {
    qtl::fp8_token_options oo = o;
    oo.nan = nan;
    std::vector<float> hsc(static_cast<std::size_t>(padded));
    qtl::scaled_fp8_quant_per_token(in, qtl::make_view(hq.data(), padded, n), qtl::make_view(hsc.data(), padded), oo);
    device_buffer<float> dsc(static_cast<std::size_t>(padded));
    REQUIRE(qtl::cuda::scaled_fp8_quant_per_token<Fp8>(din, qtl::make_view(dq.ptr, padded, n), dsc.ptr, oo) ==
            cudaSuccess);
    CHECK(qtl_test::mismatches(bits(dsc.get()), bits(hsc)) == "");
    CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");
  }
}

template <int G, class T>
void per_group(index_t m, index_t n, qtl::fp8_group_options o) {
  auto const x = random_input<T>(m, n, static_cast<std::uint32_t>(m * 7 + n + G));
  index_t const rows = m + 3;
  index_t const groups = n / G;
  std::vector<float8_e4m3fn_t> hq(static_cast<std::size_t>(rows * n));
  std::vector<float> hs(static_cast<std::size_t>(qtl::group_scale_storage_size(o.layout, rows, groups, o.row_align)),
                        -1.0f);
  qtl::per_token_group_quant_fp8<G>(qtl::make_view<T const>(x.data(), m, n), qtl::make_view(hq.data(), rows, n), hs,
                                    o);
  device_buffer<T> dx(x);
  device_buffer<float8_e4m3fn_t> dq(hq.size());
  device_buffer<float> ds(std::vector<float>(hs.size(), -1.0f));
  REQUIRE(qtl::cuda::per_token_group_quant_fp8<G>(qtl::make_view<T const>(dx.ptr, m, n),
                                                  qtl::make_view(dq.ptr, rows, n), ds.ptr, o) == cudaSuccess);
  CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");
  CHECK(qtl_test::mismatches(bits(ds.get()), bits(hs)) == "");
}

// A view of rows x cols inside a buffer whose rows are `stride` elements apart (padded rows).
template <class T>
qtl::view2d<T> padded_view(T* p, index_t rows, index_t cols, index_t stride) {
  qtl::view2d<T> v = qtl::make_view(p, rows, cols);
  v.stride[0] = stride;
  return v;
}

// Per-tensor dynamic and per-token quantization of an input whose rows are padded (row stride
// n + 7) into an output whose rows are padded too (n + 5): the kernels index by the views'
// strides, and the padding of the output is never written (it keeps its 0x5A fill).
template <class T, class Fp8>
void padded_rows(index_t m, index_t n) {
  index_t const in_stride = n + 7, out_stride = n + 5;
  auto x = random_input<T>(m, in_stride, static_cast<std::uint32_t>(m + 3 * n));
  auto const in = padded_view<T const>(x.data(), m, n, in_stride);
  device_buffer<T> dx(x);
  auto const din = padded_view<T const>(dx.ptr, m, n, in_stride);
  std::vector<Fp8> const fill(static_cast<std::size_t>(m * out_stride), Fp8{0x5A});
  std::vector<Fp8> hq = fill;
  float const hs = qtl::scaled_fp8_quant_dynamic(in, padded_view(hq.data(), m, n, out_stride));
  device_buffer<Fp8> dq(fill);
  device_buffer<float> ds(1);
  REQUIRE(qtl::cuda::scaled_fp8_quant_dynamic<Fp8>(din, padded_view(dq.ptr, m, n, out_stride), ds.ptr) ==
          cudaSuccess);
  CHECK(qtl_test::mismatches(bits(ds.get()), bits({hs})) == "");
  CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");
  for (index_t r = 0; r < m; ++r) {
    CHECK(hq[static_cast<std::size_t>(r * out_stride + n)].bits == 0x5A);
  }
  std::vector<Fp8> hq2 = fill;
  std::vector<float> hsc(static_cast<std::size_t>(m));
  qtl::scaled_fp8_quant_per_token(in, padded_view(hq2.data(), m, n, out_stride), qtl::make_view(hsc.data(), m), {});
  device_buffer<Fp8> dq2(fill);
  device_buffer<float> dsc(static_cast<std::size_t>(m));
  REQUIRE(qtl::cuda::scaled_fp8_quant_per_token<Fp8>(din, padded_view(dq2.ptr, m, n, out_stride), dsc.ptr, {}) ==
          cudaSuccess);
  CHECK(qtl_test::mismatches(bits(dsc.get()), bits(hsc)) == "");
  CHECK(qtl_test::mismatches(codes(dq2.get()), codes(hq2)) == "");
}

}  // namespace

TEST_CASE("device per-tensor and per-token quantization equal the host", "[cuda][fp8]") {
  auto const nan = GENERATE(qtl::fp8_nan::to_max, qtl::fp8_nan::propagate);
  per_tensor_and_token<bfloat16_t>(37, 1000, 40, nan);
  per_tensor_and_token<float>(5, 4099, 5, nan);
  per_tensor_and_token<half_t>(300, 64, 301, nan);
  per_tensor_and_token<bfloat16_t>(2048, 520, 2048, nan);  // many blocks contend in the amax
}

TEST_CASE("device e5m2 per-tensor and per-token quantization equal the host", "[cuda][fp8]") {
  auto const nan = GENERATE(qtl::fp8_nan::to_max, qtl::fp8_nan::propagate);
  per_tensor_and_token<bfloat16_t, qtl::float8_e5m2_t>(37, 1000, 40, nan);
  per_tensor_and_token<float, qtl::float8_e5m2_t>(5, 4099, 5, nan);
  per_tensor_and_token<half_t, qtl::float8_e5m2_t>(300, 64, 301, nan);
}

TEST_CASE("device quantization of padded rows equals the host", "[cuda][fp8]") {
  padded_rows<bfloat16_t, float8_e4m3fn_t>(33, 500);
  padded_rows<float, qtl::float8_e5m2_t>(7, 129);
  padded_rows<half_t, float8_e4m3fn_t>(130, 64);
}

#if !defined(__SANITIZE_ADDRESS__)
// Full size, so not under AddressSanitizer (a few seconds here, many times that there; the capped
// runs of every size keep the loop covered there).
TEST_CASE("device per-token quantization past 65535 rows (the grid-stride loop at full size)", "[cuda][fp8][full]") {
  // One block per row up to the grid cap of 65535: rows 65535.. are the loop's second pass.
  if (qtl_test::grid_caps_lowered()) {
    return;  // a capped run: the small cases already run the loop past the (lowered) cap
  }
  index_t const m = 65535 + 70, n = 8;
  auto const x = random_input<bfloat16_t>(m, n, 9);
  std::vector<float8_e4m3fn_t> hq(static_cast<std::size_t>(m * n));
  std::vector<float> hs(static_cast<std::size_t>(m));
  qtl::scaled_fp8_quant_per_token(qtl::make_view<bfloat16_t const>(x.data(), m, n), qtl::make_view(hq.data(), m, n),
                                  qtl::make_view(hs.data(), m), {});
  device_buffer<bfloat16_t> dx(x);
  device_buffer<float8_e4m3fn_t> dq(hq.size());
  device_buffer<float> ds(hs.size());
  REQUIRE(qtl::cuda::scaled_fp8_quant_per_token(qtl::make_view<bfloat16_t const>(dx.ptr, m, n),
                                                qtl::make_view(dq.ptr, m, n), ds.ptr, {}) == cudaSuccess);
  CHECK(qtl_test::mismatches(bits(ds.get()), bits(hs)) == "");
  CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");
}
#endif  // ^^^ not under AddressSanitizer ^^^

TEST_CASE("device static quantization equals the host, zero scale included", "[cuda][fp8]") {
  index_t const m = 9;
  index_t const n = 333;
  auto const x = random_input<float>(m, n, 1);
  for (float s : {0.01f, 0.0f, 3e-30f}) {
    std::vector<float8_e4m3fn_t> hq(static_cast<std::size_t>(m * n));
    qtl::scaled_fp8_quant_static(qtl::make_view<float const>(x.data(), m, n), s, qtl::make_view(hq.data(), m, n));
    device_buffer<float> dx(x);
    device_buffer<float> ds(std::vector<float>{s});
    device_buffer<float8_e4m3fn_t> dq(hq.size());
    REQUIRE(qtl::cuda::scaled_fp8_quant_static(qtl::make_view<float const>(dx.ptr, m, n), ds.ptr,
                                               qtl::make_view(dq.ptr, m, n)) == cudaSuccess);
    CHECK(qtl_test::mismatches(codes(dq.get()), codes(hq)) == "");
  }
}

TEST_CASE("device per-token-group quantization equals the host in every layout", "[cuda][fp8]") {
  qtl::fp8_group_options o;
  o.power_of_two_scale = GENERATE(false, true);
  o.layout = GENERATE(qtl::group_scale_layout::row_major, qtl::group_scale_layout::column_major);
  o.row_align = o.layout == qtl::group_scale_layout::column_major ? 4 : 1;
  per_group<128, bfloat16_t>(77, 1024, o);
  per_group<16, float>(13, 256, o);
  o.op = qtl::fp8_scale_op::multiply_reciprocal;
  o.nan = qtl::fp8_nan::propagate;
  per_group<64, half_t>(10, 192, o);
}

TEST_CASE("device requantize_with_max_scale equals the host", "[cuda][fp8]") {
  index_t const rows = 300;
  index_t const k = 257;
  auto const w = random_e4m3(static_cast<std::size_t>(rows * k), 4, true);
  std::vector<float> const scales = {0.02f, 0.5f, 0.0f, 0.125f};
  std::vector<index_t> const widths = {100, 0, 50, 120};
  device_buffer<float8_e4m3fn_t> dw(w);
  auto hw = w;
  float const mx =
      qtl::requantize_with_max_scale(qtl::make_view(hw.data(), rows, k), {scales, false}, widths);
  auto const plan = qtl::plan_requantize_with_max_scale(rows, {scales, false}, widths);
  CHECK(plan.max_scale == mx);
  REQUIRE(qtl::cuda::requantize_with_max_scale(qtl::make_view(dw.ptr, rows, k), plan, scales, widths) ==
          cudaSuccess);
  CHECK(qtl_test::mismatches(codes(dw.get()), codes(hw)) == "");
}

TEST_CASE("device fp8_all_close counts equal the host report", "[cuda][fp8]") {
  index_t const m = 123;
  index_t const n = 456;
  auto const a = random_e4m3(static_cast<std::size_t>(m * n), 2, false);
  auto b = a;
  for (std::size_t i = 0; i < b.size(); i += 97) {
    b[i].bits = static_cast<std::uint8_t>(b[i].bits + (i % 3 == 0 ? 1 : i % 3 == 1 ? 2 : 0x80));
  }
  auto const host = qtl::fp8_all_close(qtl::make_view<float8_e4m3fn_t const>(a.data(), m, n),
                                       qtl::make_view<float8_e4m3fn_t const>(b.data(), m, n));
  device_buffer<float8_e4m3fn_t> da(a);
  device_buffer<float8_e4m3fn_t> db(b);
  device_buffer<unsigned long long> dc(3);
  REQUIRE(qtl::cuda::fp8_compare(qtl::make_view<float8_e4m3fn_t const>(da.ptr, m, n),
                                 qtl::make_view<float8_e4m3fn_t const>(db.ptr, m, n), dc.ptr) == cudaSuccess);
  auto const c = dc.get();
  unsigned long long const counts[3] = {c[0], c[1], c[2]};
  auto const dev = qtl::cuda::fp8_compare_report_of(m * n, counts);
  CHECK(dev.sign_flips == host.sign_flips);
  CHECK(dev.differ == host.differ);
  CHECK(dev.differ_large == host.differ_large);
  CHECK(dev.passed == host.passed);
  CHECK(host.differ > 0);
}

TEST_CASE("device launchers refuse bad shapes without launching", "[cuda][fp8]") {
  std::vector<float> const x(12, 1.0f);
  device_buffer<float> dx(x);
  device_buffer<float8_e4m3fn_t> dq(12);
  device_buffer<float> ds(4);
  auto const in = qtl::make_view<float const>(dx.ptr, 3, 4);
  CHECK(qtl::cuda::scaled_fp8_quant_dynamic(in, qtl::make_view(dq.ptr, 2, 4), ds.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::per_token_group_quant_fp8<32>(in, qtl::make_view(dq.ptr, 3, 4), ds.ptr) == cudaErrorInvalidValue);
}

#if defined(QTL_CUDA_SIM)
// -use_fast_math (nvcc -ftz=true) turns the _rn intrinsics into their .ftz forms: a subnormal
// input or scale flushes to zero. The kernels' bit-exactness is promised for IEEE builds only
// (qtl/cuda/fp8.cuh; the PTX check cuda_ptx_no_ftz keeps .ftz out of the project's own flags);
// this pins what the flag would change, on the simulated device's FTZ mode.
TEST_CASE("device fp8 codes differ from the host under flush-to-zero (-use_fast_math), as documented", "[cuda][fp8]") {
  std::vector<float> const x = {std::ldexp(1.0f, -128), std::ldexp(-3.0f, -130), 1e-3f};  // two subnormals
  float const s = std::ldexp(1.0f, -127);  // a subnormal scale: 1/s = 2^127
  std::vector<float8_e4m3fn_t> hq(x.size());
  qtl::scaled_fp8_quant_static(qtl::make_view<float const>(x.data(), 1, 3), s, qtl::make_view(hq.data(), 1, 3));
  CHECK(codes(hq)[0] == 0x30);  // 2^-128 * 2^127 = 0.5
  device_buffer<float> dx(x);
  device_buffer<float> ds(std::vector<float>{s});
  for (bool const ftz : {false, true}) {
    cuda_sim::set_flush_to_zero(ftz);
    device_buffer<float8_e4m3fn_t> dq(x.size());
    REQUIRE(qtl::cuda::scaled_fp8_quant_static(qtl::make_view<float const>(dx.ptr, 1, 3), ds.ptr,
                                               qtl::make_view(dq.ptr, 1, 3)) == cudaSuccess);
    cuda_sim::set_flush_to_zero(false);
    INFO("flush to zero: " << ftz);
    CHECK((qtl_test::mismatches(codes(dq.get()), codes(hq)) == "") == !ftz);
  }
}
#endif  // ^^^ QTL_CUDA_SIM ^^^
