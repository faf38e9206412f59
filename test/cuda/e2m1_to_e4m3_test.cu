// <qtl/cuda/e2m1_to_e4m3.cuh> against the host op of <qtl/e2m1_to_e4m3.hpp>, bit for bit: the
// golden cases 2200-2203 (recorded from sglang's cast_e2m1fn_to_e4m3fn) replayed on the device,
// random stacks with partial blocks and scale spreads up to 2^14 in one launch each, the index of
// the first block the host op refuses, and the launcher's errors; and
// <qtl/cuda/deepgemm_e8m0.cuh> (DeepGEMM's packing of the E8M0 block scales) on the golden
// deepgemm-post-process-e8m0 cases (recorded from vLLM's function), random layouts against the
// host op, and the index of the first code it refuses. The shared main exits 77 (skipped) without
// a GPU.

#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <e2m1_to_e4m3_cases.hpp>

#include <qtl/cuda/deepgemm_e8m0.cuh>
#include <qtl/cuda/e2m1_to_e4m3.cuh>
#include <qtl/e2m1_to_e4m3.hpp>

namespace {

namespace cv = qtl::convert;
using bytes = std::vector<std::uint8_t>;
using qtl_test::device_buffer;
using qtl_test::e2m1::random_mxfp4;

constexpr unsigned long long none = ~0ull;

struct cast_out {
  bytes q, s;
  unsigned long long first_inexact = none;
};

/// The device cast of the stack (x, sc) in one launch, and the first block it refuses.
cast_out device_cast(bytes const& x, bytes const& sc, cv::block_grid const& g) {
  device_buffer<std::uint8_t> const dx(x);
  device_buffer<std::uint8_t> const ds(sc);
  device_buffer<std::uint8_t> dq(static_cast<std::size_t>(g.elements()));
  device_buffer<std::uint8_t> dqs(static_cast<std::size_t>(g.scales()));
  device_buffer<unsigned long long> flag(std::vector<unsigned long long>{none});
  REQUIRE(qtl::cuda::convert::cast_e2m1fn_to_e4m3fn(dx.ptr, ds.ptr, g, dq.ptr, dqs.ptr, flag.ptr) == cudaSuccess);
  return {dq.get(), dqs.get(), flag.get()[0]};
}

cast_out host_cast(bytes const& x, bytes const& sc, cv::block_grid const& g) {
  cast_out o{bytes(static_cast<std::size_t>(g.elements())), bytes(static_cast<std::size_t>(g.scales()))};
  cv::cast_e2m1fn_to_e4m3fn(x, sc, g, o.q, o.s);
  return o;
}

}  // namespace

TEST_CASE("cuda cast_e2m1fn_to_e4m3fn reproduces every golden cast-e2m1fn-to-e4m3fn case", "[cuda][e2m1_to_e4m3]") {
  for (auto const& [name, c] : qtl_test::e2m1::golden_casts()) {
    INFO(name);
    cast_out const got = device_cast(c.x, c.scale, c.grid);
    CHECK(got.q == c.want_q);
    CHECK(got.s == c.want_s);
    CHECK(got.first_inexact == none);
  }
}

TEST_CASE("cuda cast_e2m1fn_to_e4m3fn equals the host op on random stacks with partial blocks",
          "[cuda][e2m1_to_e4m3]") {
  std::mt19937 rng(2204);
  for (auto const& g : {cv::block_grid{1, 256, 512, {128, 128}}, cv::block_grid{3, 200, 160, {128, 128}},
                        cv::block_grid{2, 130, 96, {32, 32}}, cv::block_grid{4, 5, 64, {1, 128}}}) {
    INFO(g.groups << " x " << g.n << " x " << g.k << " in " << g.block.n << " x " << g.block.k);
    for (int spread : {0, 7, 14, 20}) {
      INFO("spread " << spread);
      auto [x, sc] = random_mxfp4(g, spread, rng);
      if (spread == 20) {
        // past 2^14: exact with the codes of every group more than 2^14 below the largest
        // possible top zeroed (the zeros cast at any shift, below the table's too)
        for (std::size_t i = 0; i < sc.size(); ++i) {
          if (sc[i] < 100 + 20 - 14) {
            std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(i * 16), 16, std::uint8_t{0});
          }
        }
      }
      cast_out const want = host_cast(x, sc, g);
      cast_out const got = device_cast(x, sc, g);
      CHECK(got.q == want.q);
      CHECK(got.s == want.s);
      CHECK(got.first_inexact == none);
    }
  }
}

TEST_CASE("cuda cast_e2m1fn_to_e4m3fn names the first block the host op refuses", "[cuda][e2m1_to_e4m3]") {
  cv::block_grid const g{2, 256, 256, {128, 128}};
  std::mt19937 rng(2205);
  auto const [x0, sc0] = random_mxfp4(g, 6, rng);
  auto const flagged = [&](bytes const& x, bytes const& sc) {
    bytes q(static_cast<std::size_t>(g.elements())), s(static_cast<std::size_t>(g.scales()));
    CHECK_THROWS_AS(cv::cast_e2m1fn_to_e4m3fn(x, sc, g, q, s), qtl::value_error);
    return device_cast(x, sc, g).first_inexact;  // blocks (g, bi, bj): 2 x 2 per matrix
  };
  SECTION("a nonzero element 2^15 below its block's top") {
    bytes x = x0, sc = sc0;
    std::size_t const grp = static_cast<std::size_t>((256 + 130) * 8 + 5);  // matrix 1, row 130, group 5
    sc[grp] = static_cast<std::uint8_t>(106 - 15);
    sc[grp + 1] = 106;
    x[grp * 16] = 0x01;  // 0.5 at shift -9: half e4m3's least subnormal
    CHECK(flagged(x, sc) == 7);
    sc[256 * 8 + 4] = 0xFF;  // and a NaN scale in block (1, 0, 1): the first now
    CHECK_THROWS_WITH(host_cast(x, sc, g), Catch::Contains("block (0, 1) of matrix 1 (rows 0..127, columns 128..255)"));
    CHECK(flagged(x, sc) == 5);
  }
  SECTION("a NaN scale") {
    bytes sc = sc0;
    for (std::size_t r = 0; r < 128; ++r) {
      std::fill_n(sc.begin() + static_cast<std::ptrdiff_t>(r * 8), 4, std::uint8_t{0xFF});  // block (0, 0): all NaN
    }
    CHECK(flagged(x0, sc) == 0);
  }
  SECTION("a nonzero element under a top scale below 2^-121") {
    bytes x(x0.size(), 0), sc(sc0.size(), 3);
    x[4000] = 0x20;
    CHECK(flagged(x, sc) == 0);
  }
  SECTION("the exact input is not flagged") { CHECK(device_cast(x0, sc0, g).first_inexact == none); }
}

TEST_CASE("cuda cast_e2m1fn_to_e4m3fn launcher rejects what the host op rejects", "[cuda][e2m1_to_e4m3]") {
  device_buffer<std::uint8_t> x(64), sc(4), q(128), s(1);
  namespace cc = qtl::cuda::convert;
  CHECK(cc::cast_e2m1fn_to_e4m3fn(x.ptr, sc.ptr, {1, 1, 128, {128, 128}}, q.ptr, s.ptr) == cudaSuccess);
  CHECK(cc::cast_e2m1fn_to_e4m3fn(x.ptr, sc.ptr, {1, 1, 112, {128, 128}}, q.ptr, s.ptr) == cudaErrorInvalidValue);
  CHECK(cc::cast_e2m1fn_to_e4m3fn(x.ptr, sc.ptr, {1, 1, 128, {128, 48}}, q.ptr, s.ptr) == cudaErrorInvalidValue);
  CHECK(cc::cast_e2m1fn_to_e4m3fn(x.ptr, sc.ptr, {1, 1, 128, {0, 128}}, q.ptr, s.ptr) == cudaErrorInvalidValue);
  CHECK(cc::cast_e2m1fn_to_e4m3fn(nullptr, sc.ptr, {1, 1, 128, {128, 128}}, q.ptr, s.ptr) == cudaErrorInvalidValue);
  CHECK(cc::cast_e2m1fn_to_e4m3fn(nullptr, nullptr, {0, 1, 128, {128, 128}}, nullptr, nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

namespace {

std::vector<std::int32_t> device_dg_pack(bytes const& sc, cv::dg_packed_layout const& l,
                                         unsigned long long* first_unpackable = nullptr) {
  device_buffer<std::uint8_t> const ds(sc);
  device_buffer<std::int32_t> dout(std::vector<std::int32_t>(static_cast<std::size_t>(l.words()), 0x5A5A5A5A));
  device_buffer<unsigned long long> first(std::vector<unsigned long long>{none});
  REQUIRE(qtl::cuda::convert::deepgemm_post_process_e8m0(ds.ptr, l, dout.ptr, first.ptr) == cudaSuccess);
  if (first_unpackable != nullptr) {
    *first_unpackable = first.get()[0];
  }
  return dout.get();
}

}  // namespace

TEST_CASE("cuda deepgemm_post_process_e8m0 reproduces every golden case and the host op", "[cuda][deepgemm_e8m0]") {
  for (auto const& [name, c] : qtl_test::e2m1::golden_dg_packs()) {
    INFO(name);
    CHECK(device_dg_pack(c.scale, c.layout) == c.want);
  }
  std::mt19937 rng(2205);
  for (auto const& l :
       {cv::deepgemm_post_process_layout(3, 257, 1000), cv::deepgemm_post_process_layout(1, 2048, 1024, 4)}) {
    bytes sc(static_cast<std::size_t>(l.groups * l.scale_rows() * l.k_blocks));
    for (auto& b : sc) b = static_cast<std::uint8_t>(1 + rng() % 254);
    std::vector<std::int32_t> want(static_cast<std::size_t>(l.words()));
    cv::deepgemm_post_process_e8m0(sc, l, want);
    unsigned long long first = 0;
    CHECK(device_dg_pack(sc, l, &first) == want);
    CHECK(first == none);
    // the codes the host op refuses (0 and 255 upcast to 0.0 and Inf): the first one's index
    sc[sc.size() - 1] = 0;
    sc[sc.size() / 2] = 255;
    CHECK_THROWS_WITH(cv::deepgemm_post_process_e8m0(sc, l, want),
                      Catch::Contains("scale " + std::to_string(sc.size() / 2) + " (E8M0 code 255"));
    device_dg_pack(sc, l, &first);
    CHECK(first == sc.size() / 2);
  }
  CHECK(qtl::cuda::convert::deepgemm_post_process_e8m0(nullptr, cv::deepgemm_layout(1, 128, 1), nullptr) ==
        cudaErrorInvalidValue);
}
