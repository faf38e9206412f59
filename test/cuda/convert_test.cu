// qtl/cuda/convert.cuh against the host converters of qtl/convert.hpp, bit for bit: dequant (f32,
// bf16), both requant recipes and their fixed point (NaN codes and an Inf scale under sglang), the
// per-block cast with each rule (zero, Inf and NaN blocks), the DeepGEMM pack and its inverse,
// FP8 block -> MXFP4 and -> NVFP4 with the shared global scale; partial blocks, stacked experts,
// grid-stride loops past the cap (the `_capped` run), refused shapes; the index of the first
// scale or element the host op refuses on the data. Skipped (77) without a GPU by
// test/cuda/main.cu; runs on the simulated device (`--suite cuda-sim`).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/convert.hpp>
#include <qtl/cuda/convert.cuh>

namespace {

namespace cv = qtl::convert;
namespace dc = qtl::cuda::convert;
using qtl::bfloat16_t;

using qtl_test::device_buffer;
using qtl_test::raw;

/// Random FP8 block weight: codes (NaN codes only when `nan`), log-uniform scales, an all-zero
/// block and a power-of-two scale.
struct weight {
  cv::block_grid g;
  std::vector<std::uint8_t> q;
  std::vector<float> s;
};

weight random_weight(cv::block_grid g, std::uint32_t seed, bool nan = false) {
  std::mt19937 rng(seed);
  weight w{g, std::vector<std::uint8_t>(static_cast<std::size_t>(g.elements())),
           std::vector<float>(static_cast<std::size_t>(g.scales()))};
  for (auto& c : w.q) {
    c = static_cast<std::uint8_t>(rng() & 0xFF);
    if (!nan && (c & 0x7F) == 0x7F) c = 0x7E;
  }
  std::uniform_real_distribution<float> u(-14, -3);
  for (auto& x : w.s) x = std::exp2(u(rng));
  w.s[0] = 0x1p-9f;
  if (g.n >= g.block.n && g.k >= 2 * g.block.k) {  // block (0, 1) all zero
    for (std::int64_t r = 0; r < g.block.n; ++r)
      for (std::int64_t c = g.block.k; c < 2 * g.block.k; ++c) w.q[static_cast<std::size_t>(r * g.k + c)] = 0;
  }
  return w;
}

/// block_quant_dequant<T> of `w` on the device, equal to the host's byte for byte.
template <class T>
void compare_dequant_as(cv::block_grid g, weight const& w) {
  device_buffer<std::uint8_t> dq(w.q);
  device_buffer<float> ds(w.s);
  std::vector<T> h(w.q.size());
  cv::block_quant_dequant<T>(w.q, w.s, g, h);
  device_buffer<T> d(h.size());
  REQUIRE(dc::block_quant_dequant<T>(dq.ptr, ds.ptr, g, d.ptr) == cudaSuccess);
  CHECK(raw(d.get()) == raw(h));
}

void compare_dequant(cv::block_grid g, std::uint32_t seed) {
  compare_dequant_as<bfloat16_t>(g, random_weight(g, seed, true));
  // f32: NaN payloads are out of contract, so the codes are finite here
  compare_dequant_as<float>(g, random_weight(g, seed + 1));
}

template <class Recipe>
void compare_requant(weight const& w, bool canonical) {
  auto const& g = w.g;
  std::vector<std::uint8_t> hq(w.q.size());
  std::vector<float> hs(w.s.size());
  device_buffer<std::uint8_t> dq(w.q);
  device_buffer<float> ds(w.s);
  device_buffer<std::uint8_t> oq(w.q.size());
  device_buffer<float> os(w.s.size());
  if (canonical) {
    cv::requant_weight_ue8m0_canonical<Recipe>(w.q, w.s, g.groups, g.n, g.k, hq, hs);
    REQUIRE(dc::requant_weight_ue8m0_canonical<Recipe>(dq.ptr, ds.ptr, g.groups, g.n, g.k, oq.ptr, os.ptr) ==
            cudaSuccess);
  } else {
    cv::requant_weight_ue8m0<Recipe>(w.q, w.s, g.groups, g.n, g.k, hq, hs);
    REQUIRE(dc::requant_weight_ue8m0<Recipe>(dq.ptr, ds.ptr, g.groups, g.n, g.k, oq.ptr, os.ptr) == cudaSuccess);
  }
  CHECK(oq.get() == hq);
  CHECK(raw(os.get()) == raw(hs));
  // in place
  REQUIRE(dc::requant_weight_ue8m0<Recipe>(dq.ptr, ds.ptr, g.groups, g.n, g.k, dq.ptr, ds.ptr) == cudaSuccess);
  if (!canonical) {
    CHECK(dq.get() == hq);
    CHECK(raw(ds.get()) == raw(hs));
  }
}

template <cv::pow2_rule Rule>
void compare_cast(cv::block_grid g, std::uint32_t seed, bool nonfinite) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(g.elements()));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * std::exp2(static_cast<float>(i % 7) - 9.0f);
  if (g.k >= 2 * g.block.k) {
    for (std::int64_t r = 0; r < std::min<std::int64_t>(g.n, g.block.n); ++r)
      for (std::int64_t c = g.block.k; c < 2 * g.block.k; ++c) x[static_cast<std::size_t>(r * g.k + c)] = 0.0f;
  }
  if (nonfinite) {
    x[3] = std::numeric_limits<float>::infinity();
    x[x.size() - 1] = -std::numeric_limits<float>::infinity();
  }
  std::vector<std::uint8_t> hq(x.size());
  std::vector<float> hs(static_cast<std::size_t>(g.scales()));
  cv::per_block_cast_to_fp8<Rule>(x, g, hq, hs);
  device_buffer<float> dx(x);
  device_buffer<std::uint8_t> dq(hq.size());
  device_buffer<float> ds(hs.size());
  REQUIRE(dc::per_block_cast_to_fp8<Rule>(dx.ptr, g, dq.ptr, ds.ptr) == cudaSuccess);
  CHECK(dq.get() == hq);
  CHECK(raw(ds.get()) == raw(hs));
}

void compare_pack(std::int64_t groups, std::int64_t mn, std::int64_t kb, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto const l = cv::deepgemm_layout(groups, mn, kb);
  std::vector<float> sf(static_cast<std::size_t>(groups * l.scale_rows() * kb));
  for (auto& v : sf) v = std::exp2(static_cast<float>(static_cast<int>(rng() % 60) - 40));
  std::vector<std::int32_t> hw(static_cast<std::size_t>(l.words()));
  cv::deepgemm_pack_ue8m0(sf, l, hw);
  device_buffer<float> dsf(sf);
  device_buffer<std::int32_t> dw(std::vector<std::int32_t>(hw.size(), 0x5A5A5A5A));  // pad rows must be written
  REQUIRE(dc::deepgemm_pack_ue8m0(dsf.ptr, l, dw.ptr) == cudaSuccess);
  CHECK(dw.get() == hw);
  std::int64_t const rows = (l.aligned_mn() + 127) / 128;
  std::vector<float> hu(static_cast<std::size_t>(groups * rows * kb));
  cv::deepgemm_unpack_ue8m0(hw, groups, l.packed_k(), l.aligned_mn(), kb, hu);
  device_buffer<float> du(hu.size());
  REQUIRE(dc::deepgemm_unpack_ue8m0(dw.ptr, groups, l.packed_k(), l.aligned_mn(), kb, du.ptr) == cudaSuccess);
  CHECK(raw(du.get()) == raw(hu));
}

void compare_mxfp4(cv::block_grid g, std::uint32_t seed, bool e3 = false) {
  auto w = random_weight(g, seed);
  if (e3) {  // docs/spec/converters.md E3's scale (non-power-of-two, bf16 double rounding) on every block
    for (auto& x : w.s) x = qtl::bits_to_float(0x3ca7cb92u);
  }
  std::vector<std::uint8_t> hp(w.q.size() / 2), hs(w.q.size() / 32);
  cv::fp8_block_to_mxfp4(w.q, w.s, g, hp, hs);
  device_buffer<std::uint8_t> dq(w.q);
  device_buffer<float> ds(w.s);
  device_buffer<std::uint8_t> dp(hp.size()), dsc(hs.size());
  REQUIRE(dc::fp8_block_to_mxfp4(dq.ptr, ds.ptr, g, dp.ptr, dsc.ptr) == cudaSuccess);
  CHECK(dp.get() == hp);
  CHECK(dsc.get() == hs);
}

void compare_nvfp4(cv::block_grid g, std::uint32_t seed) {
  auto const w = random_weight(g, seed);
  float const hgs = cv::nvfp4_shared_global_scale(cv::fp8_block_bf16_amax(w.q, w.s, g));
  std::vector<qtl::float4_e2m1x2_t> hp(w.q.size() / 2);
  std::vector<qtl::float8_e4m3fn_t> hs(w.q.size() / 16);
  cv::fp8_block_to_nvfp4(w.q, w.s, g, hgs, hp, hs);
  device_buffer<std::uint8_t> dq(w.q);
  device_buffer<float> ds(w.s);
  device_buffer<bfloat16_t> ws(w.q.size());
  device_buffer<float> dgs(1);
  device_buffer<qtl::float4_e2m1x2_t> dp(hp.size());
  device_buffer<qtl::float8_e4m3fn_t> dsc(hs.size());
  // the global scale from the device dequant, then the quantization with it
  REQUIRE(dc::block_quant_dequant<bfloat16_t>(dq.ptr, ds.ptr, g, ws.ptr) == cudaSuccess);
  REQUIRE(dc::nvfp4_shared_global_scale(qtl::make_view<bfloat16_t const>(ws.ptr, g.groups * g.n, g.k), dgs.ptr) ==
          cudaSuccess);
  CHECK(qtl::float_to_bits(dgs.get()[0]) == qtl::float_to_bits(hgs));
  REQUIRE(dc::fp8_block_to_nvfp4(dq.ptr, ds.ptr, g, dgs.ptr, dp.ptr, dsc.ptr, ws.ptr) == cudaSuccess);
  CHECK(raw(dp.get()) == raw(hp));
  CHECK(raw(dsc.get()) == raw(hs));
}

}  // namespace

TEST_CASE("device block_quant_dequant equals the host (bf16 with NaN codes, f32)", "[cuda][convert]") {
  compare_dequant({1, 300, 260, {128, 128}}, 1);
  compare_dequant({3, 130, 64, {64, 32}}, 2);
}

TEST_CASE("device requant equals the host, both recipes, one pass and the fixed point", "[cuda][convert]") {
  auto const w = random_weight({1, 300, 384, {128, 128}}, 3);
  auto const e = random_weight({2, 130, 200, {128, 128}}, 4);
  for (bool canonical : {false, true}) {
    compare_requant<cv::recipe::sglang>(w, canonical);
    compare_requant<cv::recipe::vllm>(w, canonical);
    compare_requant<cv::recipe::sglang_legacy>(e, canonical);
    compare_requant<cv::recipe::sglang>(e, canonical);
  }
  // NaN codes and an Inf scale (sglang: the block gets 2^127)
  auto n = random_weight({1, 256, 256, {128, 128}}, 5, true);
  n.s[3] = std::numeric_limits<float>::infinity();
  compare_requant<cv::recipe::sglang>(n, false);
}

TEST_CASE("device per-block cast equals the host, each rule, zero and Inf blocks", "[cuda][convert]") {
  compare_cast<cv::pow2_rule::bits>({1, 200, 300, {128, 128}}, 6, false);
  compare_cast<cv::pow2_rule::log2>({1, 200, 300, {128, 128}}, 7, false);
  compare_cast<cv::pow2_rule::none>({2, 64, 96, {32, 32}}, 8, false);
  compare_cast<cv::pow2_rule::bits>({1, 130, 256, {128, 128}}, 9, true);
}

TEST_CASE("device DeepGEMM pack and unpack equal the host (E4's shape, pad rows, experts)", "[cuda][convert]") {
  compare_pack(1, 130, 5, 10);
  compare_pack(3, 256, 8, 11);
  compare_pack(2, 7, 1, 12);
}

TEST_CASE("device FP8 block -> MXFP4 and -> NVFP4 equal the host", "[cuda][convert]") {
  compare_mxfp4({1, 130, 256, {128, 128}}, 13);
  compare_mxfp4({2, 64, 96, {128, 128}}, 14);
  compare_mxfp4({1, 64, 256, {128, 128}}, 17, true);
  compare_nvfp4({1, 130, 256, {128, 128}}, 15);
  compare_nvfp4({2, 40, 48, {128, 128}}, 16);  // w1 and w3 stacked: one global scale
}

namespace {

constexpr unsigned long long none = ~0ull;

/// The device words a launcher reports refusals in, set to ~0.
device_buffer<unsigned long long> first_words(std::size_t n) {
  return device_buffer<unsigned long long>(std::vector<unsigned long long>(n, none));
}

}  // namespace

TEST_CASE("device converters report the first scale or element the host op refuses", "[cuda][convert]") {
  SECTION("DeepGEMM pack: scales that are not positive normal powers of two") {
    auto const l = cv::deepgemm_layout(2, 300, 6);  // 2 x 3 x 6 scales
    std::vector<float> sf(36, 0.5f);
    std::vector<std::int32_t> hw(static_cast<std::size_t>(l.words()));
    device_buffer<std::int32_t> dw(hw.size());
    auto first = first_words(1);
    device_buffer<float> good(sf);
    REQUIRE(dc::deepgemm_pack_ue8m0(good.ptr, l, dw.ptr, first.ptr) == cudaSuccess);
    CHECK(first.get()[0] == none);
    sf[30] = 0.0f;
    sf[21] = 0.75f;
    sf[35] = -1.0f;
    CHECK_THROWS_WITH(cv::deepgemm_pack_ue8m0(sf, l, hw), Catch::Contains("scale 21 (bits 0x3f400000)"));
    device_buffer<float> bad(sf);
    REQUIRE(dc::deepgemm_pack_ue8m0(bad.ptr, l, dw.ptr, first.ptr) == cudaSuccess);
    CHECK(first.get()[0] == 21);
  }
  cv::block_grid const g{2, 130, 256, {128, 128}};
  auto w = random_weight(g, 18);
  auto const element = [&](std::int64_t gi, std::int64_t n, std::int64_t k) {
    return static_cast<std::size_t>((gi * g.n + n) * g.k + k);
  };
  SECTION("FP8 block -> MXFP4: the first element whose dequant is not finite") {
    std::vector<std::uint8_t> hp(w.q.size() / 2), hs(w.q.size() / 32);
    device_buffer<std::uint8_t> dp(hp.size()), dsc(hs.size());
    auto first = first_words(1);
    device_buffer<std::uint8_t> dq(w.q);
    device_buffer<float> ds(w.s);
    REQUIRE(dc::fp8_block_to_mxfp4(dq.ptr, ds.ptr, g, dp.ptr, dsc.ptr, first.ptr) == cudaSuccess);
    CHECK(first.get()[0] == none);
    w.q[element(1, 129, 3)] = 0x7F;  // NaN
    w.q[element(1, 2, 200)] = 0xFF;
    w.s[g.scales() - 1] = std::numeric_limits<float>::infinity();  // block (1, 1, 1) dequantizes to Inf/NaN
    CHECK_THROWS_WITH(cv::fp8_block_to_mxfp4(w.q, w.s, g, hp, hs), Catch::Contains("element (1, 2, 200)"));
    device_buffer<std::uint8_t> bq(w.q);
    device_buffer<float> bs(w.s);
    REQUIRE(dc::fp8_block_to_mxfp4(bq.ptr, bs.ptr, g, dp.ptr, dsc.ptr, first.ptr) == cudaSuccess);
    CHECK(first.get()[0] == element(1, 2, 200));
  }
  SECTION("FP8 block -> NVFP4: the first element, and the first block, whose dequant is not finite") {
    std::vector<qtl::float4_e2m1x2_t> hp(w.q.size() / 2);
    std::vector<qtl::float8_e4m3fn_t> hs(w.q.size() / 16);
    device_buffer<bfloat16_t> ws(w.q.size());
    device_buffer<float> dgs(std::vector<float>{1.0f});
    device_buffer<qtl::float4_e2m1x2_t> dp(hp.size());
    device_buffer<qtl::float8_e4m3fn_t> dsc(hs.size());
    auto const device_first = [&] {
      device_buffer<std::uint8_t> dq(w.q);
      device_buffer<float> ds(w.s);
      auto first = first_words(2);
      REQUIRE(dc::fp8_block_to_nvfp4(dq.ptr, ds.ptr, g, dgs.ptr, dp.ptr, dsc.ptr, ws.ptr, first.ptr) == cudaSuccess);
      return first.get();
    };
    CHECK(device_first() == std::vector<unsigned long long>{none, none});
    w.q[element(0, 5, 200)] = 0x7F;  // block (0, 0, 1)
    w.q[element(0, 100, 3)] = 0xFF;  // block (0, 0, 0): the first block, a later element
    w.q[element(1, 0, 0)] = 0x7F;
    CHECK_THROWS_WITH(cv::fp8_block_to_nvfp4(w.q, w.s, g, 1.0f, hp, hs), Catch::Contains("element (0, 5, 200)"));
    CHECK_THROWS_WITH(cv::fp8_block_bf16_amax(w.q, w.s, g), Catch::Contains("block (0, 0, 0)"));
    CHECK(device_first() == std::vector<unsigned long long>{element(0, 5, 200), 0});
  }
}

TEST_CASE("device converters refuse bad shapes before enqueueing", "[cuda][convert]") {
  device_buffer<std::uint8_t> q(64);
  device_buffer<float> s(1);
  device_buffer<std::uint8_t> p(32), sc(2);
  CHECK(dc::fp8_block_to_mxfp4(q.ptr, s.ptr, {1, 2, 30, {128, 128}}, p.ptr, sc.ptr) == cudaErrorInvalidValue);
  CHECK(dc::block_quant_dequant<float>(q.ptr, s.ptr, {1, 2, 2, {0, 128}}, nullptr) == cudaErrorInvalidValue);
  CHECK(dc::requant_weight_ue8m0<cv::recipe::sglang>(nullptr, s.ptr, 1, 8, 8, q.ptr, s.ptr) == cudaErrorInvalidValue);
  device_buffer<std::int32_t> w(4);
  device_buffer<float> f(8);
  CHECK(dc::deepgemm_unpack_ue8m0(w.ptr, 1, 1, 4, 5, f.ptr) == cudaErrorInvalidValue);
  CHECK(dc::deepgemm_pack_ue8m0(f.ptr, cv::deepgemm_layout(1, 0, 1), w.ptr) == cudaErrorInvalidValue);
  device_buffer<bfloat16_t> ws(64);
  CHECK(dc::fp8_block_to_nvfp4(q.ptr, s.ptr, {1, 2, 32, {128, 128}}, nullptr, nullptr, nullptr, ws.ptr) ==
        cudaErrorInvalidValue);
}
