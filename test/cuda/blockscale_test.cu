// <qtl/cuda/blockscale.cuh> against the host <qtl/blockscale.hpp>, byte for byte: swizzle and
// unswizzle for every layout, 2-D and 3-D, shapes that need padding (1x1 included), strided
// inputs, a misaligned output (the byte kernel), and launcher errors. The shared main exits 77
// (skipped) without a GPU.

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <cstdint>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/blockscale.cuh>
#include <random>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl_test::random_bytes;

using qtl::index_t;
using qtl::make_view;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

using qtl_test::device_bytes;

std::vector<std::uint8_t> download(std::uint8_t const* p, index_t n) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
  REQUIRE(cudaMemcpy(v.data(), p, v.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

template <class Layout>
void check_round_trip(index_t batch, index_t m, index_t k, index_t out_offset) {
  CAPTURE(batch, m, k, out_offset);
  index_t const mp = Layout::pad_rows(m);
  index_t const kp = Layout::pad_cols(k);
  auto const host_in = random_bytes(static_cast<std::size_t>(batch * m * k), static_cast<std::uint32_t>(m * 31 + k));
  std::vector<std::uint8_t> host_out(static_cast<std::size_t>(batch * mp * kp));
  qtl::swizzle_blockscale<Layout>(make_view(host_in.data(), batch, m, k), make_view(host_out.data(), batch, mp, kp));

  device_bytes in(batch * m * k);
  device_bytes out(batch * mp * kp + out_offset);
  device_bytes back(batch * m * k);
  CUDA_REQUIRE(cudaMemcpy(in.p, host_in.data(), host_in.size(), cudaMemcpyHostToDevice));
  CUDA_REQUIRE(qtl::cuda::swizzle_blockscale<Layout>(make_view(static_cast<std::uint8_t const*>(in.p), batch, m, k),
                                                     make_view(out.p + out_offset, batch, mp, kp)));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  REQUIRE(download(out.p + out_offset, batch * mp * kp) == host_out);
  CUDA_REQUIRE(qtl::cuda::unswizzle_blockscale<Layout>(
      make_view(static_cast<std::uint8_t const*>(out.p + out_offset), batch, mp, kp), make_view(back.p, batch, m, k)));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  REQUIRE(download(back.p, batch * m * k) == host_in);
}

}  // namespace

TEMPLATE_TEST_CASE("device swizzle/unswizzle equal the host, byte for byte", "[cuda][blockscale]", qtl::layout_128x4,
                   qtl::layout_8x4, qtl::layout_8x16, qtl::layout_linear) {
  for (index_t const m : {1, 3, 33, 128, 130, 300}) {
    for (index_t const k : {1, 4, 5, 7, 33, 64}) {
      check_round_trip<TestType>(1, m, k, 0);
      check_round_trip<TestType>(3, m, k, 0);
    }
  }
  check_round_trip<TestType>(2, 130, 7, 1);  // misaligned output: the byte kernel
  check_round_trip<TestType>(4, 1024, 512, 0);
}

TEST_CASE("device swizzle reads strided scales (a column slice)", "[cuda][blockscale]") {
  index_t const m = 200;
  index_t const k = 9;
  auto const wide = random_bytes(static_cast<std::size_t>(m * 16), 5);
  qtl::view2d<std::uint8_t const> host_slice = make_view(wide.data() + 2, m, index_t{16});
  host_slice.extent[1] = k;
  auto const want = qtl::swizzle_blockscale(host_slice);
  device_bytes in(m * 16);
  device_bytes out(want.size());
  CUDA_REQUIRE(cudaMemcpy(in.p, wide.data(), wide.size(), cudaMemcpyHostToDevice));
  qtl::view2d<std::uint8_t const> dev_slice = make_view(static_cast<std::uint8_t const*>(in.p) + 2, m, index_t{16});
  dev_slice.extent[1] = k;
  CUDA_REQUIRE(qtl::cuda::swizzle_blockscale(dev_slice, make_view(out.p, want.extent(0), want.extent(1))));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CHECK(download(out.p, want.size()) == want.storage());
}

TEST_CASE("device launchers reject the shapes the host rejects", "[cuda][blockscale]") {
  device_bytes buf(4096);
  auto const in = make_view(static_cast<std::uint8_t const*>(buf.p), 3, 5);
  CHECK(qtl::cuda::swizzle_blockscale(in, make_view(buf.p + 1024, 128, 5)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::unswizzle_blockscale(make_view(static_cast<std::uint8_t const*>(buf.p), 64, 8),
                                        make_view(buf.p + 2048, 3, 5)) == cudaErrorInvalidValue);
}
