// <qtl/cuda/pack_nd.cuh> against the host ops of <qtl/pack_nd.hpp> (which the unit tests hold to
// the golden cases of vLLM's functions), bit for bit: gptq_pack and awq_pack on the golden shapes
// and larger ones crossing block boundaries, the packings along the first, middle and last
// dimension of 3-D tensors of every pack type (one launch for all outer indices), strided views,
// and launcher errors. <qtl/cuda/w4a8.cuh> against <qtl/w4a8.hpp> likewise: the int4 reorder of
// many experts in one launch and its inverse, pack_scale_fp8 on every code, the scale split under
// both rules, the uint4b8 conversion in place, interleave_scales both ways, launcher errors. The
// shared main exits 77 (skipped) without a GPU.

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/cuda/pack_nd.cuh>
#include <qtl/cuda/w4a8.cuh>
#include <qtl/pack_nd.hpp>
#include <qtl/w4a8.hpp>

#include "test_data.hpp"

namespace {

using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;
using qtl_test::random_codes;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

template <auto Width>
std::vector<std::int32_t> codes_of(index_t n, std::mt19937& rng) {
  using traits = qtl::pack_traits<Width>;
  std::int64_t const lo = traits::is_signed ? -(std::int64_t{1} << (traits::bits - 1)) : 0;
  std::int64_t const hi =
      traits::is_signed ? (std::int64_t{1} << (traits::bits - 1)) - 1 : (std::int64_t{1} << traits::bits) - 1;
  return random_codes(n, lo, hi, rng);
}

template <int Bits>
void check_gptq_awq(index_t k, index_t n, std::mt19937& rng) {
  constexpr index_t pf = 32 / Bits;
  INFO("bits " << Bits << ", shape (" << k << ", " << n << ")");
  auto const q = codes_of<Bits>(k * n, rng);
  device_buffer<std::int32_t> const dq(q);
  if (k % pf == 0) {
    device_buffer<std::int32_t> dw(static_cast<std::size_t>(k / pf * n));
    CUDA_REQUIRE(qtl::cuda::gptq_pack<Bits>(make_view(dq.ptr, k, n), dw.view(k / pf, n)));
    CHECK(dw.get() == qtl::gptq_pack<Bits>(make_view(q.data(), k, n)).storage());
  }
  if constexpr (Bits == 4 || Bits == 8) {
    if (n % pf == 0) {
      device_buffer<std::int32_t> dw(static_cast<std::size_t>(k * n / pf));
      CUDA_REQUIRE(qtl::cuda::awq_pack<Bits>(make_view(dq.ptr, k, n), dw.view(k, n / pf)));
      CHECK(dw.get() == qtl::awq_pack<Bits>(make_view(q.data(), k, n)).storage());
    }
  }
}

TEST_CASE("cuda gptq_pack and awq_pack equal the host's", "[cuda][pack_nd]") {
  std::mt19937 rng(2000);
  // the golden shapes, then shapes past a 256-thread block of columns and several row blocks
  check_gptq_awq<4>(64, 12, rng);
  check_gptq_awq<8>(16, 7, rng);
  check_gptq_awq<2>(32, 5, rng);
  check_gptq_awq<4>(5, 32, rng);
  check_gptq_awq<8>(3, 12, rng);
  check_gptq_awq<4>(16, 64, rng);
  check_gptq_awq<4>(40, 2056, rng);
  check_gptq_awq<8>(12, 1028, rng);
}

template <qtl::scalar_type T>
void check_pack_dim(index_t outer, index_t p, index_t inner, std::mt19937& rng) {
  constexpr index_t pf = qtl::pack_factor<T>;
  INFO(T.name().view() << " (" << outer << ", " << p << ", " << inner << ")");
  auto const q = codes_of<T>(outer * p * inner, rng);
  auto const in = make_view(q.data(), outer, p, inner);
  auto const host = qtl::pack_quantized_values_into_int32<T>(in);
  auto const host_back = qtl::unpack_quantized_values_into_int32<T>(host.view());

  device_buffer<std::int32_t> const dq(q);
  device_buffer<std::int32_t> dw(static_cast<std::size_t>(outer * p / pf * inner));
  device_buffer<std::int32_t> db(q.size());
  CUDA_REQUIRE(qtl::cuda::pack_quantized_values_into_int32<T>(make_view(dq.ptr, outer, p, inner),
                                                              make_view(dw.ptr, outer, p / pf, inner)));
  CHECK(dw.get() == host.storage());
  CUDA_REQUIRE(qtl::cuda::unpack_quantized_values_into_int32<T>(make_view(dw.ptr, outer, p / pf, inner),
                                                                make_view(db.ptr, outer, p, inner)));
  CHECK(db.get() == host_back.storage());
}

TEST_CASE("cuda pack/unpack_quantized_values_into_int32 equal the host's along every dimension", "[cuda][pack_nd]") {
  std::mt19937 rng(2006);
  // the golden shapes, split at their packed dimension
  check_pack_dim<qtl::uint4b8>(1, 64, 6, rng);
  check_pack_dim<qtl::uint4>(6, 64, 1, rng);
  check_pack_dim<qtl::int4>(3, 16, 5, rng);
  check_pack_dim<qtl::uint8b128>(10, 8, 1, rng);
  check_pack_dim<qtl::uint2b2>(1, 32, 6, rng);
  // every pack type, and sizes of many blocks: 64 experts of (128, 24) packed along K
  check_pack_dim<qtl::int8>(7, 12, 3, rng);
  check_pack_dim<qtl::uint8>(2, 4, 300, rng);
  check_pack_dim<qtl::uint4b8>(64, 128, 24, rng);
  check_pack_dim<qtl::uint4>(300, 16, 1, rng);
}

TEST_CASE("cuda pack_quantized_values_into_int32 takes strided views", "[cuda][pack_nd]") {
  std::mt19937 rng(2007);
  index_t const o = 3, p = 16, n = 5;
  auto const q = random_codes(o * p * n, 0, 15, rng);
  // the transposed view: (n, p, o) with strides (1, n, p*n)
  auto const t = qtl_test::reversed_axes_view(q, n, p, o);
  auto const host = qtl::pack_quantized_values_into_int32<4>(t);
  device_buffer<std::int32_t> const dq(q);
  device_buffer<std::int32_t> dw(static_cast<std::size_t>(n * p / 8 * o));
  auto dt = t;
  dt.data = dq.ptr;
  CUDA_REQUIRE(qtl::cuda::pack_quantized_values_into_int32<4>(dt, make_view(dw.ptr, n, p / 8, o)));
  CHECK(dw.get() == host.storage());
}

TEST_CASE("cuda pack_nd launchers reject shapes the host rejects", "[cuda][pack_nd]") {
  device_buffer<std::int32_t> a(64);
  device_buffer<std::int32_t> b(64);
  CHECK(qtl::cuda::awq_pack<4>(make_view(a.ptr, 2, 12), make_view(b.ptr, 2, 1)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::pack_quantized_values_into_int32<4>(make_view(a.ptr, 2, 12, 1), make_view(b.ptr, 2, 1, 1)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::unpack_quantized_values_into_int32<4>(make_view(a.ptr, 2, 1, 2), make_view(b.ptr, 2, 8, 1)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::pack_quantized_values_into_int32<4>(make_view<std::int32_t const>(nullptr, 1, 8, 1),
                                                       make_view(b.ptr, 1, 1, 1)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::pack_quantized_values_into_int32<4>(make_view(a.ptr, 0, 8, 1), make_view(b.ptr, 0, 1, 1)) ==
        cudaSuccess);
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> b(n);
  for (auto& v : b) {
    v = static_cast<std::uint8_t>(rng());
  }
  return b;
}

TEST_CASE("cuda encode_and_reorder_int4b equals the host's, all experts in one launch", "[cuda][w4a8]") {
  std::mt19937 rng(2500);
  // (experts, n, k): the plain op's K = 96, the grouped op's, and more bytes than one grid pass
  for (auto const [e, n, k] : {std::array<index_t, 3>{1, 48, 96}, {3, 32, 256}, {5, 64, 512}}) {
    INFO("experts " << e << ", n " << n << ", k " << k);
    auto const in = random_bytes(static_cast<std::size_t>(e * n * k / 2), rng);
    std::vector<std::uint8_t> host(in.size());
    device_buffer<std::uint8_t> const din(in);
    device_buffer<std::uint8_t> dout(in.size());
    if (k % 256 == 0) {
      qtl::encode_and_reorder_int4b_grouped(in, e, n, k, host);
      CUDA_REQUIRE(qtl::cuda::encode_and_reorder_int4b_grouped(din.ptr, e, n, k, dout.ptr));
    } else {
      qtl::encode_and_reorder_int4b(in, n, k, host);
      CUDA_REQUIRE(qtl::cuda::encode_and_reorder_int4b(din.ptr, n, k, dout.ptr));
    }
    CHECK(dout.get() == host);
    device_buffer<std::uint8_t> dback(in.size());
    CUDA_REQUIRE(qtl::cuda::decode_and_unreorder_int4b(dout.ptr, e, n, k, dback.ptr));
    CHECK(dback.get() == in);
  }
  device_buffer<std::uint8_t> a(4096), b(4096);
  CHECK(qtl::cuda::encode_and_reorder_int4b(a.ptr, 20, 64, b.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::encode_and_reorder_int4b_grouped(a.ptr, 1, 16, 128, b.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::encode_and_reorder_int4b(a.ptr, 16, 64, a.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::encode_and_reorder_int4b(nullptr, 16, 64, b.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::encode_and_reorder_int4b_grouped(a.ptr, 0, 16, 256, b.ptr) == cudaSuccess);
}

TEST_CASE("cuda pack_scale_fp8 and the uint4b8 conversion equal the host's", "[cuda][w4a8]") {
  std::vector<qtl::float8_e4m3fn_t> s(256);
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i].bits = static_cast<std::uint8_t>(i);
  }
  std::vector<qtl::float8_e4m3fn_t> host(8 * s.size());
  qtl::pack_scale_fp8(s, host);
  device_buffer<qtl::float8_e4m3fn_t> const ds(s);
  device_buffer<qtl::float8_e4m3fn_t> dp(host.size());
  CUDA_REQUIRE(qtl::cuda::pack_scale_fp8(ds.ptr, 256, dp.ptr));
  CHECK(dp.get() == host);
  CHECK(qtl::cuda::pack_scale_fp8(nullptr, 1, dp.ptr) == cudaErrorInvalidValue);

  std::mt19937 rng(2501);
  auto const w = random_codes(1000, -(std::int64_t{1} << 31), (std::int64_t{1} << 31) - 1, rng);
  std::vector<std::int32_t> want(w.size());
  qtl::convert_packed_uint4b8_to_signed_int4(w, want);
  device_buffer<std::int32_t> dw(w);
  CUDA_REQUIRE(qtl::cuda::convert_packed_uint4b8_to_signed_int4(dw.ptr, 1000, dw.ptr));  // in place
  CHECK(dw.get() == want);
}

TEST_CASE("cuda convert_bf16_scales_to_fp8 equals the host's under both rules", "[cuda][w4a8]") {
  std::mt19937 rng(2502);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  index_t const rows = 300, cols = 56;
  std::vector<qtl::bfloat16_t> s(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i] = qtl::from_float<qtl::bfloat16_t>(u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 14)));
  }
  for (std::size_t j = 0; j < static_cast<std::size_t>(cols); ++j) {
    s[j] = qtl::bfloat16_t{};  // a row of zeros: the scale floor
  }
  device_buffer<qtl::bfloat16_t> const ds(s);
  for (auto const op : {qtl::fp8_scale_op::divide, qtl::fp8_scale_op::multiply_reciprocal}) {
    std::vector<qtl::float8_e4m3fn_t> q(s.size());
    std::vector<float> ch(static_cast<std::size_t>(rows));
    qtl::convert_bf16_scales_to_fp8<qtl::bfloat16_t>(
        make_view(static_cast<qtl::bfloat16_t const*>(s.data()), rows, cols), op, make_view(q.data(), rows, cols),
        make_view(ch.data(), rows));
    device_buffer<qtl::float8_e4m3fn_t> dq(q.size());
    device_buffer<float> dch(ch.size());
    CUDA_REQUIRE(qtl::cuda::convert_bf16_scales_to_fp8<qtl::bfloat16_t>(
        make_view(ds.ptr, rows, cols), op, make_view(dq.ptr, rows, cols), make_view(dch.ptr, rows)));
    CHECK(dq.get() == q);
    CHECK(dch.get() == ch);
    CHECK(qtl::cuda::convert_bf16_scales_to_fp8<qtl::bfloat16_t>(make_view(ds.ptr, rows, cols), op,
                                                                 make_view(dq.ptr, rows, cols - 1),
                                                                 make_view(dch.ptr, rows)) == cudaErrorInvalidValue);
  }
}

TEST_CASE("cuda interleave_scales and its inverse equal the host's", "[cuda][w4a8]") {
  std::mt19937 rng(2503);
  index_t const e = 3, n = 100, g = 56, p = 4;
  auto const v = random_codes(e * n * g, 0, 0xFFFF, rng);
  std::vector<qtl::bfloat16_t> s(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    s[i].bits = static_cast<std::uint16_t>(v[i]);
  }
  std::vector<qtl::bfloat16_t> host(s.size());
  qtl::interleave_scales<qtl::bfloat16_t>(make_view(static_cast<qtl::bfloat16_t const*>(s.data()), e, n, g), p,
                                          make_view(host.data(), e, g / p, n * p));
  device_buffer<qtl::bfloat16_t> const ds(s);
  device_buffer<qtl::bfloat16_t> di(s.size()), db(s.size());
  CUDA_REQUIRE(
      qtl::cuda::interleave_scales<qtl::bfloat16_t>(make_view(ds.ptr, e, n, g), p, make_view(di.ptr, e, g / p, n * p)));
  CHECK(di.get() == host);
  CUDA_REQUIRE(qtl::cuda::deinterleave_scales<qtl::bfloat16_t>(
      make_view(static_cast<qtl::bfloat16_t const*>(di.ptr), e, g / p, n * p), p, make_view(db.ptr, e, n, g)));
  CHECK(db.get() == s);
  CHECK(qtl::cuda::interleave_scales<qtl::bfloat16_t>(make_view(ds.ptr, e, n, g), 3, make_view(di.ptr, e, 18, 300)) ==
        cudaErrorInvalidValue);
}

}  // namespace
