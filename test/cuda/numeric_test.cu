// qtl/numeric.hpp in device code: every encoder and mode run by a kernel equals the host result
// bit for bit (NaN codes included), and agrees with CUDA's own device conversions (NaNs compared
// as NaNs) on a sweep of every 2^8-th float pattern plus every rounding boundary. Skipped (77)
// without a GPU by test/cuda/main.cu. On the simulated device (QTL_CUDA_SIM) CUDA's conversions
// are not there (the unit tests compare the host encoders with their host versions).
#include <qtl/cuda/launch.cuh>
#include <qtl/exact.hpp>
#include <qtl/numeric.hpp>

#include <catch2/catch.hpp>
#include <numeric_oracle.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#if !defined(QTL_CUDA_SIM)
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_fp8.h>
#  define QTL_TEST_CUDA_CONVERSIONS 1
#else
#  define QTL_TEST_CUDA_CONVERSIONS 0
#endif  // ^^^ !QTL_CUDA_SIM ^^^

namespace {

constexpr int n_qtl = 19;   // QTL's encoders and modes
constexpr int n_cuda = 7;   // CUDA's device conversions compared with some of them
constexpr int n_out = n_qtl + n_cuda;

// The QTL codes of x, in a fixed order (shared by host and device).
QTL_HOST_DEVICE void qtl_codes(float x, std::uint32_t* c) {
  using qtl::saturation;
  using R = qtl::e8m0_rounding;
  c[0] = qtl::float_to_fp16(x);
  c[1] = qtl::float_to_fp16(x, saturation::finite);
  c[2] = qtl::float_to_bf16(x);
  c[3] = qtl::float_to_e4m3fn(x);
  c[4] = qtl::float_to_e4m3fn(x, saturation::finite);
  c[5] = qtl::float_to_e5m2(x);
  c[6] = qtl::float_to_e5m2(x, saturation::finite);
  c[7] = qtl::float_to_e3m2(x);
  c[8] = qtl::float_to_e3m2(x, qtl::round_mode::toward_zero);
  c[9] = qtl::float_to_e2m3(x);
  c[10] = qtl::float_to_e2m3(x, qtl::round_mode::toward_zero);
  c[11] = qtl::float_to_e2m1(x);
  c[12] = qtl::float_to_e2m1(x, qtl::round_mode::toward_zero);
  c[13] = qtl::float_to_e8m0(x, R::nearest);
  c[14] = qtl::float_to_e8m0(x, R::toward_zero);
  c[15] = qtl::float_to_e8m0(x, R::up);
  c[16] = qtl::float_to_e8m0(x, R::up, saturation::finite);
  c[17] = qtl::float_to_bits(qtl::round_half_even(x));
  // a float sum: on the device any NaN result is the canonical 0x7fffffff, on x86 an operand's
  // NaN, so the check below compares this one as NaN-or-bits
  c[18] = qtl::float_to_bits(qtl::detail::add_rn(qtl::e4m3fn_to_float(static_cast<std::uint8_t>(c[3])),
                                                 qtl::fp16_to_float(static_cast<std::uint16_t>(c[0]))));
}

__global__ void encode_kernel(std::uint32_t const* in, std::size_t n, std::uint32_t* out) {
  std::size_t const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) {
    return;
  }
  float const x = __uint_as_float(in[i]);
  std::uint32_t* c = out + i * n_out;
  qtl_codes(x, c);
#if QTL_TEST_CUDA_CONVERSIONS
  c[n_qtl + 0] = __half_as_ushort(__float2half_rn(x));
  c[n_qtl + 1] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  c[n_qtl + 2] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
  c[n_qtl + 3] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  c[n_qtl + 4] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  c[n_qtl + 5] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  c[n_qtl + 6] = __float_as_uint(rintf(x));
#endif  // ^^^ QTL_TEST_CUDA_CONVERSIONS ^^^
}

[[maybe_unused]] bool nan_in(qtl_test::format const& f, std::uint32_t c) { return qtl_test::decode(f, c).is_nan; }

}  // namespace

TEST_CASE("device encoders equal the host bit for bit, and CUDA's device conversions", "[numeric][cuda]") {
  std::vector<double> points;
  for (auto const* f : {&qtl_test::fp16, &qtl_test::bf16, &qtl_test::e4m3fn, &qtl_test::e5m2, &qtl_test::e3m2,
                        &qtl_test::e2m3, &qtl_test::e2m1}) {
    qtl_test::table_encoder const t(*f);
    for (std::uint32_t c = 0; c < t.finite_codes(); ++c) {
      points.push_back(qtl_test::decode(*f, c).value);
    }
  }
  for (int e = -127; e <= 128; ++e) {
    points.push_back(std::ldexp(1.0, e));
    points.push_back(1.5 * std::ldexp(1.0, e));
  }
  std::vector<std::uint32_t> const in = qtl_test::sweep_patterns(std::uint64_t{1} << 8, points, 2);
  std::size_t const n = in.size();

  std::uint32_t* d_in = nullptr;
  std::uint32_t* d_out = nullptr;
  REQUIRE(cudaMalloc(&d_in, n * sizeof(std::uint32_t)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_out, n * n_out * sizeof(std::uint32_t)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_in, in.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(qtl::cuda::launch(encode_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, nullptr, d_in, n, d_out) ==
          cudaSuccess);
  std::vector<std::uint32_t> out(n * n_out);
  REQUIRE(cudaMemcpy(out.data(), d_out, out.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(d_in);
  cudaFree(d_out);

  std::size_t host_mismatch = 0;
  std::size_t cuda_mismatch = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t host[n_qtl];
    qtl_codes(qtl_test::float_of(in[i]), host);
    std::uint32_t const* dev = &out[i * n_out];
    for (int k = 0; k < n_qtl; ++k) {
      bool const nan_sum = k == 18 && std::isnan(qtl_test::float_of(dev[k])) && std::isnan(qtl_test::float_of(host[k]));
      if (dev[k] != host[k] && !nan_sum && host_mismatch++ < 5) {
        UNSCOPED_INFO("x = 0x" << std::hex << in[i] << " encoder #" << std::dec << k << ": device 0x" << std::hex
                               << dev[k] << ", host 0x" << host[k]);
      }
    }
    auto const agree = [&](std::uint32_t a, std::uint32_t b, bool a_nan, bool b_nan) {
      if (a != b && !(a_nan && b_nan) && cuda_mismatch++ < 5) {
        UNSCOPED_INFO("x = 0x" << std::hex << in[i] << ": qtl 0x" << a << ", CUDA device 0x" << b);
      }
    };
#if QTL_TEST_CUDA_CONVERSIONS
    std::uint32_t const* cu = dev + n_qtl;
    agree(host[0], cu[0], nan_in(qtl_test::fp16, host[0]), nan_in(qtl_test::fp16, cu[0]));
    agree(host[2], cu[1], nan_in(qtl_test::bf16, host[2]), nan_in(qtl_test::bf16, cu[1]));
    agree(host[3], cu[2], nan_in(qtl_test::e4m3fn, host[3]), nan_in(qtl_test::e4m3fn, cu[2]));
    agree(host[4], cu[3], nan_in(qtl_test::e4m3fn, host[4]), nan_in(qtl_test::e4m3fn, cu[3]));
    agree(host[5], cu[4], nan_in(qtl_test::e5m2, host[5]), nan_in(qtl_test::e5m2, cu[4]));
    agree(host[6], cu[5], nan_in(qtl_test::e5m2, host[6]), nan_in(qtl_test::e5m2, cu[5]));
    agree(host[17], cu[6], std::isnan(qtl_test::float_of(host[17])), std::isnan(qtl_test::float_of(cu[6])));
#else
    (void)agree;
#endif  // ^^^ QTL_TEST_CUDA_CONVERSIONS ^^^
  }
  INFO(n << " float patterns");
  CHECK(host_mismatch == 0);
  CHECK(cuda_mismatch == 0);
}
