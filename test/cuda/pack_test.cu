// <qtl/cuda/pack.cuh> against the host ops of <qtl/pack.hpp>, bit for bit: every width, random
// shapes (crossing block and vector boundaries), strided and misaligned views (the scalar
// paths), signed scalar types, out-of-range codes (masked on the device), and launcher errors.
// The shared main exits 77 (skipped) without a GPU.

#include <qtl/cuda/pack.cuh>
#include <qtl/pack.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl_test::random_codes;

using qtl::index_t;
using qtl::make_view;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

// A device buffer of n int32 (plus `pad` elements in front, to misalign views on purpose).
struct device_buffer {
  std::int32_t* base = nullptr;
  index_t n = 0;
  explicit device_buffer(index_t count) : n(count) {
    CUDA_REQUIRE(cudaMalloc(&base, static_cast<std::size_t>(count + 8) * sizeof(std::int32_t)));
    CUDA_REQUIRE(cudaMemset(base, 0xAB, static_cast<std::size_t>(count + 8) * sizeof(std::int32_t)));
  }
  ~device_buffer() { cudaFree(base); }
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
};

template <class A>
void upload(std::int32_t* dst, std::vector<std::int32_t, A> const& src) {
  CUDA_REQUIRE(cudaMemcpy(dst, src.data(), src.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
}
std::vector<std::int32_t> download(std::int32_t const* src, index_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  REQUIRE(cudaMemcpy(v.data(), src, v.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

// All four ops on a (k, n) matrix of `Width` codes; `offset` elements of misalignment.
template <auto Width>
void check_all_ops(index_t k, index_t n, index_t offset, std::mt19937& rng) {
  using traits = qtl::pack_traits<Width>;
  constexpr index_t pf = traits::factor;
  std::int64_t const lo = traits::bits == 32 ? INT32_MIN : traits::is_signed ? -(std::int64_t{1} << (traits::bits - 1)) : 0;
  std::int64_t const hi = traits::bits == 32 ? INT32_MAX
                          : traits::is_signed ? (std::int64_t{1} << (traits::bits - 1)) - 1
                                              : (std::int64_t{1} << traits::bits) - 1;
  INFO("bits " << traits::bits << (traits::is_signed ? " signed" : "") << ", shape (" << k << ", " << n
                << "), offset " << offset);
  auto const q = random_codes(k * n, lo, hi, rng);
  auto const host_rows = qtl::pack_rows<Width>(make_view(q.data(), k, n)).storage();
  auto const host_cols = qtl::pack_cols<Width>(make_view(q.data(), k, n)).storage();

  device_buffer codes(k * n);
  device_buffer words(k * n / pf);
  device_buffer back(k * n);
  std::int32_t* const dq = codes.base + offset;
  std::int32_t* const dw = words.base + offset;
  std::int32_t* const db = back.base + offset;
  upload(dq, q);

  CUDA_REQUIRE(qtl::cuda::pack_rows<Width>(make_view(dq, k, n), make_view(dw, k / pf, n)));
  CHECK(download(dw, k * n / pf) == host_rows);
  CUDA_REQUIRE(qtl::cuda::unpack_rows<Width>(make_view(dw, k / pf, n), make_view(db, k, n)));
  CHECK(download(db, k * n) == q);

  CUDA_REQUIRE(cudaMemset(db, 0, static_cast<std::size_t>(k * n) * sizeof(std::int32_t)));
  CUDA_REQUIRE(qtl::cuda::pack_cols<Width>(make_view(dq, k, n), make_view(dw, k, n / pf)));
  CHECK(download(dw, k * n / pf) == host_cols);
  CUDA_REQUIRE(qtl::cuda::unpack_cols<Width>(make_view(dw, k, n / pf), make_view(db, k, n)));
  CHECK(download(db, k * n) == q);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

template <auto Width>
void check_width(std::mt19937& rng) {
  constexpr index_t pf = qtl::pack_factor<Width>;
  // Small, odd, and larger than one 256-thread block in x; aligned (0) and misaligned (1) views.
  std::pair<index_t, index_t> const blocks[] = {{1, 1}, {3, 5}, {2, 300}, {37, 9}, {16, 1030}};
  for (auto const& [kb, nb] : blocks) {
    for (index_t const offset : {0, 1}) {
      check_all_ops<Width>(kb * pf, nb * pf, offset, rng);
    }
  }
}

}  // namespace

TEST_CASE("the pack kernels equal the host ops bit for bit for every width", "[cuda][pack]") {
  std::mt19937 rng(20261202);
  check_width<1>(rng);
  check_width<2>(rng);
  check_width<4>(rng);
  check_width<8>(rng);
  check_width<16>(rng);
  check_width<32>(rng);
  check_width<qtl::uint4b8>(rng);
  check_width<qtl::int4>(rng);
  check_width<qtl::int8>(rng);
}

TEST_CASE("the pack kernels take strided views", "[cuda][pack]") {
  std::mt19937 rng(5);
  index_t const k = 64;
  index_t const n = 48;
  auto const q = random_codes(k * n, 0, 15, rng);
  auto const host_rows = qtl::pack_rows<4>(make_view(q.data(), k, n)).storage();
  auto const host_cols = qtl::pack_cols<4>(make_view(q.data(), k, n)).storage();
  // The transpose of q, in device memory, seen through a transposed view: (k, n) with strides (1, k).
  std::vector<std::int32_t> qt(static_cast<std::size_t>(k * n));
  for (index_t i = 0; i < k; ++i) {
    for (index_t j = 0; j < n; ++j) {
      qt[static_cast<std::size_t>(j * k + i)] = q[static_cast<std::size_t>(i * n + j)];
    }
  }
  device_buffer codes(k * n);
  device_buffer words(k * n / 8);
  device_buffer back(k * n);
  upload(codes.base, qt);
  qtl::view2d<std::int32_t> tv;
  tv.data = codes.base;
  tv.extent[0] = k;
  tv.extent[1] = n;
  tv.stride[0] = 1;
  tv.stride[1] = k;
  CUDA_REQUIRE(qtl::cuda::pack_rows<4>(tv, make_view(words.base, k / 8, n)));
  CHECK(download(words.base, k * n / 8) == host_rows);
  CUDA_REQUIRE(qtl::cuda::pack_cols<4>(tv, make_view(words.base, k, n / 8)));
  CHECK(download(words.base, k * n / 8) == host_cols);
  // Unpack into a transposed view as well: the device buffer then holds qt again.
  tv.data = back.base;
  CUDA_REQUIRE(qtl::cuda::unpack_cols<4>(make_view(words.base, k, n / 8), tv));
  CHECK(download(back.base, k * n) == qt);
  CUDA_REQUIRE(cudaMemset(back.base, 0, static_cast<std::size_t>(k * n) * sizeof(std::int32_t)));
  upload(words.base, host_rows);
  CUDA_REQUIRE(qtl::cuda::unpack_rows<4>(make_view(words.base, k / 8, n), tv));
  CHECK(download(back.base, k * n) == qt);
}

TEST_CASE("the kernels mask out-of-range codes to their own field", "[cuda][pack]") {
  std::mt19937 rng(9);
  index_t const k = 16;
  index_t const n = 64;
  auto q = random_codes(k * n, -1000, 1000, rng);
  std::vector<std::int32_t> masked(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    masked[i] = q[i] & 0xF;
  }
  device_buffer codes(k * n);
  device_buffer words(k * n / 8);
  upload(codes.base, q);
  CUDA_REQUIRE(qtl::cuda::pack_rows<4>(make_view(codes.base, k, n), make_view(words.base, k / 8, n)));
  CHECK(download(words.base, k * n / 8) == qtl::pack_rows<4>(make_view(masked.data(), k, n)).storage());
  CUDA_REQUIRE(qtl::cuda::pack_cols<4>(make_view(codes.base, k, n), make_view(words.base, k, n / 8)));
  CHECK(download(words.base, k * n / 8) == qtl::pack_cols<4>(make_view(masked.data(), k, n)).storage());
}

TEST_CASE("the launchers reject shapes the pack factor does not fit", "[cuda][pack]") {
  device_buffer a(1024);
  device_buffer b(1024);
  CHECK(qtl::cuda::pack_rows<4>(make_view(a.base, 12, 8), make_view(b.base, 1, 8)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::pack_cols<4>(make_view(a.base, 8, 8), make_view(b.base, 8, 2)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::unpack_rows<8>(make_view(a.base, 2, 8), make_view(b.base, 9, 8)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::unpack_cols<8>(make_view(a.base, 2, 2), make_view(b.base, 2, 7)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::pack_rows<4>(make_view(static_cast<std::int32_t*>(nullptr), 8, 8), make_view(b.base, 1, 8)) ==
        cudaErrorInvalidValue);
  // Empty views launch nothing and succeed.
  CHECK(qtl::cuda::pack_rows<4>(make_view(a.base, 0, 8), make_view(b.base, 0, 8)) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}
