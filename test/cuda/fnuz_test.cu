// <qtl/cuda/fnuz.cuh> against the host ops of <qtl/fnuz.hpp> (which the unit tests hold to the
// golden cases of sglang's normalize_e4m3fn_to_e4m3fnuz), bit for bit: every weight byte, sizes
// past one block and past the grid cap (a 64-expert stack in one launch), in place, strided views,
// each scale type, and launcher errors. The shared main exits 77 (skipped) without a GPU.

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/cuda/fnuz.cuh>
#include <qtl/fnuz.hpp>

namespace {

using qtl::float8_e4m3fn_t;
using qtl::float8_e4m3fnuz_t;
using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

std::vector<float8_e4m3fn_t> weight_bytes(index_t n, std::mt19937& rng) {
  std::vector<float8_e4m3fn_t> w(static_cast<std::size_t>(n));
  std::uniform_int_distribution<int> byte(0, 255);
  for (index_t i = 0; i < n; ++i) {
    w[static_cast<std::size_t>(i)] = float8_e4m3fn_t{static_cast<std::uint8_t>(i < 256 ? i : byte(rng))};
  }
  return w;
}

template <class T>
std::vector<std::uint8_t> bytes_of(std::vector<T> const& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST_CASE("cuda normalize_e4m3fn_to_e4m3fnuz equals the host's, out of place and in place", "[cuda][fnuz]") {
  std::mt19937 rng(2100);
  for (index_t n : {index_t{1}, index_t{256}, index_t{3 * 5 * 7}, index_t{64 * 48}, index_t{64 * 96 * 40}}) {
    INFO("n = " << n);
    auto const w = weight_bytes(n, rng);
    auto const host = qtl::normalize_e4m3fn_to_e4m3fnuz(make_view(w.data(), n));
    std::vector<float8_e4m3fnuz_t> const want(host.storage().begin(), host.storage().end());
    device_buffer<float8_e4m3fn_t> dw(w);
    device_buffer<float8_e4m3fnuz_t> out(w.size());
    CUDA_REQUIRE(
        qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view<float8_e4m3fn_t const>(dw.ptr, n), make_view(out.ptr, n)));
    CHECK(bytes_of(out.get()) == bytes_of(want));
    // in place: the weight's device memory re-read as fnuz
    CUDA_REQUIRE(qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view<float8_e4m3fn_t const>(dw.ptr, n),
                                                         make_view(reinterpret_cast<float8_e4m3fnuz_t*>(dw.ptr), n)));
    CHECK(bytes_of(dw.get()) == bytes_of(want));
  }
}

TEST_CASE("cuda normalize_e4m3fn_to_e4m3fnuz takes strided views", "[cuda][fnuz]") {
  std::mt19937 rng(2101);
  auto const w = weight_bytes(512, rng);
  qtl::view1d<float8_e4m3fn_t const> every_other = make_view(w.data(), 256);
  every_other.stride[0] = 2;
  auto const host = qtl::normalize_e4m3fn_to_e4m3fnuz(every_other);
  device_buffer<float8_e4m3fn_t> dw(w);
  device_buffer<float8_e4m3fnuz_t> out(256);
  auto dv = every_other;
  dv.data = dw.ptr;
  CUDA_REQUIRE(qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(dv, make_view(out.ptr, 256)));
  std::vector<float8_e4m3fnuz_t> const want(host.storage().begin(), host.storage().end());
  CHECK(bytes_of(out.get()) == bytes_of(want));
}

template <class T>
void check_scales(std::vector<T> const& s) {
  auto const n = static_cast<index_t>(s.size());
  auto const host = qtl::double_scales(make_view(s.data(), n));
  std::vector<T> const want(host.storage().begin(), host.storage().end());
  device_buffer<T> ds(s);
  device_buffer<T> out(s.size());
  CUDA_REQUIRE(qtl::cuda::double_scales(make_view<T const>(ds.ptr, n), make_view(out.ptr, n)));
  CHECK(bytes_of(out.get()) == bytes_of(want));
  CUDA_REQUIRE(qtl::cuda::double_scales(make_view<T const>(ds.ptr, n), make_view(ds.ptr, n)));
  CHECK(bytes_of(ds.get()) == bytes_of(want));
}

TEST_CASE("cuda double_scales equals the host's for each scale type", "[cuda][fnuz]") {
  std::vector<float> f = {1.5f, 3.0e38f, -2.0e38f, 1e-45f, 0.0f, -0.0f};
  for (int i = 0; i < 600; ++i) {
    f.push_back(static_cast<float>(i) * 0.37f - 50.0f);
  }
  check_scales(f);
  std::vector<qtl::bfloat16_t> b;
  std::vector<qtl::half_t> h;
  for (int i = 0; i < 0x10000; i += 97) {
    b.push_back(qtl::bfloat16_t{static_cast<std::uint16_t>(i)});
    h.push_back(qtl::half_t{static_cast<std::uint16_t>(i)});
  }
  h.push_back(qtl::half_t{0x7BFF});
  b.push_back(qtl::bfloat16_t{0x7F7F});
  check_scales(b);
  check_scales(h);
}

TEST_CASE("cuda fnuz launchers reject what the host rejects", "[cuda][fnuz]") {
  device_buffer<float8_e4m3fn_t> a(8);
  device_buffer<float8_e4m3fnuz_t> b(8);
  CHECK(qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view<float8_e4m3fn_t const>(a.ptr, 8), make_view(b.ptr, 7)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view<float8_e4m3fn_t const>(nullptr, 8), make_view(b.ptr, 8)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::normalize_e4m3fn_to_e4m3fnuz(make_view<float8_e4m3fn_t const>(a.ptr, 0), make_view(b.ptr, 0)) ==
        cudaSuccess);
  device_buffer<float> s(4);
  CHECK(qtl::cuda::double_scales(make_view<float const>(s.ptr, 4), make_view(s.ptr, 3)) == cudaErrorInvalidValue);
}

}  // namespace
