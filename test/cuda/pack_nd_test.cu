// <qtl/cuda/pack_nd.cuh> against the host ops of <qtl/pack_nd.hpp> (which the unit tests hold to
// the golden cases of vLLM's functions), bit for bit: gptq_pack and awq_pack on the golden shapes
// and larger ones crossing block boundaries, the packings along the first, middle and last
// dimension of 3-D tensors of every pack type (one launch for all outer indices), strided views,
// and launcher errors. The shared main exits 77 (skipped) without a GPU.

#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/cuda/pack_nd.cuh>
#include <qtl/pack_nd.hpp>

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

}  // namespace
