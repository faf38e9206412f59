// <qtl/cuda/marlin.cuh> against the host ops of <qtl/marlin.hpp>, bit for bit: every layout
// (4/8 bits, A16/A8), with and without act-order, AWQ, the inverse, MoE in one launch, the scale
// permutations, and the launcher's refusals. The shared main exits 77 (skipped) without a GPU.

#include <qtl/cuda/marlin.cuh>
#include <qtl/marlin.hpp>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using qtl::index_t;
using qtl::make_view;
using qtl::marlin::act_width;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

std::vector<std::int32_t> random_words(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = static_cast<std::int32_t>(rng());
  return v;
}

std::vector<std::int32_t> permutation(index_t k, std::uint32_t seed) {
  std::vector<std::int32_t> s(static_cast<std::size_t>(k));
  std::iota(s.begin(), s.end(), 0);
  std::shuffle(s.begin(), s.end(), std::mt19937(seed));
  return s;
}

template <int Bits, act_width A>
void check_layout(index_t K, index_t N, bool act_order) {
  using L = qtl::marlin::layout<Bits, A>;
  auto const q = random_words(static_cast<std::size_t>(K / L::pack * N), static_cast<std::uint32_t>(K + N));
  auto const s = act_order ? permutation(K, 3) : std::vector<std::int32_t>{};
  auto const sv = make_view<std::int32_t const>(s.data(), static_cast<index_t>(s.size()));
  auto const want = qtl::marlin::repack_gptq<Bits, A>(make_view<std::int32_t const>(q.data(), K / L::pack, N), sv);

  qtl_test::device_buffer<std::int32_t> dq(q);
  qtl_test::device_buffer<std::int32_t> ds(s.empty() ? std::vector<std::int32_t>{0} : s);
  qtl_test::device_buffer<std::int32_t> dout(static_cast<std::size_t>(want.size()));
  CUDA_REQUIRE((qtl::cuda::marlin::repack_gptq<Bits, A>(make_view<std::int32_t const>(dq.ptr, K / L::pack, N),
                                                        act_order ? ds.ptr : nullptr,
                                                        make_view(dout.ptr, L::marlin_rows(K), L::marlin_cols(N)))));
  auto const got = dout.get();
  CHECK(std::equal(got.begin(), got.end(), want.storage().begin()));

  // The inverse, with the inverse permutation.
  std::vector<std::int32_t> inv(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) inv[static_cast<std::size_t>(s[i])] = static_cast<std::int32_t>(i);
  qtl_test::device_buffer<std::int32_t> dinv(inv.empty() ? std::vector<std::int32_t>{0} : inv);
  qtl_test::device_buffer<std::int32_t> dback(q.size());
  CUDA_REQUIRE((qtl::cuda::marlin::unrepack_gptq<Bits, A>(make_view<std::int32_t const>(dout.ptr, L::marlin_rows(K), L::marlin_cols(N)),
                                                          act_order ? dinv.ptr : nullptr,
                                                          make_view(dback.ptr, K / L::pack, N))));
  CHECK(dback.get() == q);

  // AWQ on the same codes.
  if (!act_order) {
    auto const awq = random_words(static_cast<std::size_t>(K * N / L::pack), 9);
    auto const want_awq = qtl::marlin::repack_awq<Bits, A>(make_view<std::int32_t const>(awq.data(), K, N / L::pack));
    qtl_test::device_buffer<std::int32_t> da(awq);
    CUDA_REQUIRE((qtl::cuda::marlin::repack_awq<Bits, A>(make_view<std::int32_t const>(da.ptr, K, N / L::pack),
                                                         make_view(dout.ptr, L::marlin_rows(K), L::marlin_cols(N)))));
    auto const got_awq = dout.get();
    CHECK(std::equal(got_awq.begin(), got_awq.end(), want_awq.storage().begin()));
  }
}

}  // namespace

TEST_CASE("cuda marlin: repack, act-order, AWQ and the inverse equal the host", "[cuda][marlin]") {
  for (auto [K, N] : {std::pair<index_t, index_t>{32, 64}, {128, 320}, {4096, 512}}) {
    check_layout<4, act_width::a16>(K, N, false);
    check_layout<4, act_width::a16>(K, N, true);
    check_layout<8, act_width::a16>(K, N, false);
    check_layout<8, act_width::a16>(K, N, true);
    check_layout<4, act_width::a8>(K, N, false);
    check_layout<8, act_width::a8>(K, N, false);
  }
}

TEST_CASE("cuda marlin: a 64-expert MoE in one launch equals the host", "[cuda][marlin]") {
  index_t const E = 64, K = 256, N = 192;
  auto const q = random_words(static_cast<std::size_t>(E * K / 8 * N), 1);
  std::vector<std::int32_t> s;
  for (index_t e = 0; e < E; ++e) {
    auto const p = permutation(K, static_cast<std::uint32_t>(e));
    s.insert(s.end(), p.begin(), p.end());
  }
  auto const want = qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(q.data(), E, K / 8, N),
                                                make_view<std::int32_t const>(s.data(), E, K));
  qtl_test::device_buffer<std::int32_t> dq(q), ds(s);
  qtl_test::device_buffer<std::int32_t> dout(static_cast<std::size_t>(want.size()));
  CUDA_REQUIRE(qtl::cuda::marlin::repack_gptq<4>(make_view<std::int32_t const>(dq.ptr, E, K / 8, N), ds.ptr,
                                                 make_view(dout.ptr, E, K / 16, 2 * N)));
  auto const got = dout.get();
  CHECK(std::equal(got.begin(), got.end(), want.storage().begin()));
}

TEST_CASE("cuda marlin: scale permutations equal the host", "[cuda][marlin]") {
  index_t const G = 8, N = 256;
  std::vector<float> s(static_cast<std::size_t>(G * N));
  std::iota(s.begin(), s.end(), 0.0f);
  for (auto kind : {qtl::marlin::scale_perm_kind::grouped, qtl::marlin::scale_perm_kind::single}) {
    std::vector<float> want(s.size());
    qtl::marlin::permute_scales<float>(make_view<float const>(s.data(), G, N), kind, make_view(want.data(), G, N));
    qtl_test::device_buffer<float> ds(s);
    qtl_test::device_buffer<float> dout(s.size());
    CUDA_REQUIRE(qtl::cuda::marlin::permute_scales<float>(make_view<float const>(ds.ptr, G, N), kind,
                                                          make_view(dout.ptr, G, N)));
    CHECK(dout.get() == want);
  }
}

TEST_CASE("cuda marlin: the launchers refuse what the layout cannot take, before enqueueing", "[cuda][marlin]") {
  qtl_test::device_buffer<std::int32_t> buf(1 << 16);
  auto const in = [&](index_t r, index_t c) { return make_view<std::int32_t const>(buf.ptr, r, c); };
  auto const out = [&](index_t r, index_t c) { return make_view(buf.ptr, r, c); };
  // K = 8 (one packed row), N = 96, A8 with K = 16, act-order with A8, a wrong output shape.
  CHECK(qtl::cuda::marlin::repack_gptq<4>(in(1, 64), nullptr, out(1, 64)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::marlin::repack_gptq<4>(in(2, 96), nullptr, out(1, 192)) == cudaErrorInvalidValue);
  CHECK((qtl::cuda::marlin::repack_gptq<4, act_width::a8>(in(2, 64), nullptr, out(1, 128))) == cudaErrorInvalidValue);
  CHECK((qtl::cuda::marlin::repack_gptq<4, act_width::a8>(in(4, 64), buf.ptr, out(2, 128))) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::marlin::repack_gptq<4>(in(2, 64), nullptr, out(2, 64)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::marlin::repack_gptq<4>(make_view<std::int32_t const>(nullptr, 2, 64), nullptr, out(1, 128)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::marlin::permute_scales<float>(make_view<float const>(nullptr, 1, 96), qtl::marlin::scale_perm_kind::grouped,
                                                 make_view<float>(nullptr, 1, 96)) == cudaErrorInvalidValue);
}
