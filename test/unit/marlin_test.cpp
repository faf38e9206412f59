// <qtl/marlin.hpp>: the worked examples of docs/spec/marlin.md §11 (real int32 words), agreement
// with a direct transcription of the torch reference (`marlin_weights`: reshape, permute, gather
// by get_weight_perm, pack) on random shapes of every variant, round trips of every layout, bits
// and act-order setting, the fast path against the generic loop, MoE, and every error path.

#include <qtl/marlin.hpp>
#include <qtl/marlin_fp.hpp>
#include <qtl/pack.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using qtl::index_t;
using qtl::make_view;
using qtl::marlin::act_width;

std::vector<std::int32_t> codes(index_t K, index_t N, int bits, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> q(static_cast<std::size_t>(K * N));
  for (auto& v : q) v = static_cast<std::int32_t>(rng() & ((1u << bits) - 1u));
  return q;
}

std::vector<std::int32_t> words_of(std::initializer_list<std::uint32_t> w) {
  std::vector<std::int32_t> out;
  for (auto x : w) out.push_back(static_cast<std::int32_t>(x));
  return out;
}

std::vector<std::int32_t> prefix(qtl::host_tensor<std::int32_t, 2> const& t, index_t row, std::size_t n) {
  auto const* p = t.data() + row * t.extent(1);
  return {p, p + n};
}

// vLLM marlin_utils_test.marlin_weights, transcribed: the [K, N] codes cut into 16x16 (A8: 32x16)
// sub-tiles stored row-major one after another, gathered by get_weight_perm per 1024-chunk, then
// pf consecutive elements packed into a word, element i into slot i.
template <int Bits, act_width A>
std::vector<std::int32_t> torch_marlin_weights(std::vector<std::int32_t> const& q, index_t K, index_t N) {
  constexpr bool a8 = A == act_width::a8;
  index_t const sk = a8 ? 32 : 16;
  std::vector<std::int32_t> flat;
  flat.reserve(q.size());
  // reshape (K/sk, sk, N/16, 16).permute(0, 2, 1, 3)
  for (index_t a = 0; a < K / sk; ++a)
    for (index_t c = 0; c < N / 16; ++c)
      for (index_t b = 0; b < sk; ++b)
        for (index_t d = 0; d < 16; ++d) flat.push_back(q[static_cast<std::size_t>((a * sk + b) * N + c * 16 + d)]);
  auto const perm = qtl::marlin::layout<Bits, A>::weight_perm();
  std::vector<std::int32_t> gathered(flat.size());
  for (std::size_t chunk = 0; chunk < flat.size(); chunk += 1024)
    for (std::size_t j = 0; j < 1024; ++j) gathered[chunk + j] = flat[chunk + static_cast<std::size_t>(perm[j])];
  constexpr int pf = 32 / Bits;
  std::vector<std::int32_t> out(gathered.size() / pf);
  for (std::size_t w = 0; w < out.size(); ++w) {
    std::uint32_t word = 0;
    for (int i = 0; i < pf; ++i) word |= static_cast<std::uint32_t>(gathered[w * pf + static_cast<std::size_t>(i)]) << (Bits * i);
    out[w] = static_cast<std::int32_t>(word);
  }
  return out;
}

// awq_pack: columns interleaved by {0,2,4,6,1,3,5,7} (8-bit {0,2,1,3}) then pack_cols.
template <int Bits>
qtl::host_tensor<std::int32_t, 2> awq_pack(std::vector<std::int32_t> const& q, index_t K, index_t N) {
  constexpr int pf = 32 / Bits;
  qtl::host_tensor<std::int32_t, 2> out({K, N / pf});
  for (index_t k = 0; k < K; ++k)
    for (index_t c = 0; c < N / pf; ++c) {
      std::uint32_t w = 0;
      for (int i = 0; i < pf; ++i)
        w |= static_cast<std::uint32_t>(q[static_cast<std::size_t>(k * N + c * pf + qtl::marlin::awq_column<Bits>(i))]) << (Bits * i);
      out.view()(k, c) = static_cast<std::int32_t>(w);
    }
  return out;
}

template <int Bits>
qtl::host_tensor<std::int32_t, 2> gptq_pack(std::vector<std::int32_t> const& q, index_t K, index_t N) {
  return qtl::pack_rows<Bits>(make_view(q.data(), K, N));
}

}  // namespace

TEST_CASE("marlin EX1: 4-bit A16, K=16, N=64, q = (k+n) % 16", "[marlin]") {
  std::vector<std::int32_t> q(16 * 64);
  for (index_t k = 0; k < 16; ++k)
    for (index_t n = 0; n < 64; ++n) q[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>((k + n) % 16);
  auto const g = gptq_pack<4>(q, 16, 64);
  CHECK(prefix(g, 0, 8) == words_of({0x76543210, 0x87654321, 0x98765432, 0xa9876543, 0xba987654, 0xcba98765,
                                     0xdcba9876, 0xedcba987}));
  auto const m = qtl::marlin::repack_gptq<4>(g.view());
  REQUIRE(m.extent(0) == 1);
  REQUIRE(m.extent(1) == 128);
  CHECK(prefix(m, 0, 16) == words_of({0x19910880, 0x19910880, 0x19910880, 0x19910880, 0x3bb32aa2, 0x3bb32aa2,
                                      0x3bb32aa2, 0x3bb32aa2, 0x5dd54cc4, 0x5dd54cc4, 0x5dd54cc4, 0x5dd54cc4,
                                      0x7ff76ee6, 0x7ff76ee6, 0x7ff76ee6, 0x7ff76ee6}));
  CHECK(static_cast<std::uint32_t>(m.data()[127]) == 0xe66ed55du);
  CHECK(qtl::marlin::repack_codes<4>(make_view(q.data(), 16, 64)).storage() == m.storage());
  // EX6: AWQ packing of the same codes, and its repack gives the same words.
  auto const awq = awq_pack<4>(q, 16, 64);
  CHECK(prefix(awq, 0, 2) == words_of({0x75316420, 0xfdb9eca8}));
  CHECK(qtl::marlin::repack_awq<4>(awq.view()).storage() == m.storage());
}

TEST_CASE("marlin EX2: q = k and q = n % 16", "[marlin]") {
  std::vector<std::int32_t> qk(16 * 64), qn(16 * 64);
  for (index_t k = 0; k < 16; ++k)
    for (index_t n = 0; n < 64; ++n) {
      qk[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>(k);
      qn[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>(n % 16);
    }
  auto const mk = qtl::marlin::repack_gptq<4>(gptq_pack<4>(qk, 16, 64).view());
  CHECK(prefix(mk, 0, 8) == words_of({0x91918080, 0x91918080, 0x91918080, 0x91918080, 0xb3b3a2a2, 0xb3b3a2a2,
                                      0xb3b3a2a2, 0xb3b3a2a2}));
  auto const mn = qtl::marlin::repack_gptq<4>(gptq_pack<4>(qn, 16, 64).view());
  CHECK(prefix(mn, 0, 8) == std::vector<std::int32_t>(8, static_cast<std::int32_t>(0x88008800u)));
}

TEST_CASE("marlin EX3: 8-bit A16, q = (16k+n) % 256", "[marlin]") {
  std::vector<std::int32_t> q(16 * 64);
  for (index_t k = 0; k < 16; ++k)
    for (index_t n = 0; n < 64; ++n) q[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>((16 * k + n) % 256);
  auto const m = qtl::marlin::repack_gptq<8>(gptq_pack<8>(q, 16, 64).view());
  REQUIRE(m.extent(1) == 256);
  CHECK(prefix(m, 0, 4) == words_of({0x90108000, 0x98188808, 0xa0209010, 0xa8289818}));
  CHECK(static_cast<std::uint32_t>(m.data()[255]) == 0x2faf1f9fu);
}

TEST_CASE("marlin EX4: 4-bit A8, K=32, N=64, q = (k+n) % 16", "[marlin]") {
  std::vector<std::int32_t> q(32 * 64);
  for (index_t k = 0; k < 32; ++k)
    for (index_t n = 0; n < 64; ++n) q[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>((k + n) % 16);
  auto const m = qtl::marlin::repack_gptq<4, act_width::a8>(gptq_pack<4>(q, 32, 64).view());
  REQUIRE(m.extent(0) == 2);
  REQUIRE(m.extent(1) == 128);
  CHECK(prefix(m, 0, 8) == words_of({0x33221100, 0xbbaa9988, 0x33221100, 0xbbaa9988, 0x77665544, 0xffeeddcc,
                                     0x77665544, 0xffeeddcc}));
}

TEST_CASE("marlin EX5: act-order, stable sort of g_idx = [1,0]*16", "[marlin]") {
  std::vector<std::int32_t> q(32 * 64), g_idx(32);
  for (index_t k = 0; k < 32; ++k) {
    g_idx[static_cast<std::size_t>(k)] = k % 2 == 0 ? 1 : 0;
    for (index_t n = 0; n < 64; ++n) q[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::int32_t>((3 * k + n) % 16);
  }
  std::vector<std::int32_t> sorted(32), sort_indices(32);
  qtl::marlin::sort_g_idx(make_view(g_idx.data(), 32), make_view(sorted.data(), 32), make_view(sort_indices.data(), 32));
  std::vector<std::int32_t> want;
  for (int i = 1; i < 32; i += 2) want.push_back(i);
  for (int i = 0; i < 32; i += 2) want.push_back(i);
  CHECK(sort_indices == want);
  CHECK(sorted == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  auto const g = gptq_pack<4>(q, 32, 64);
  auto const m = qtl::marlin::repack_gptq<4>(g.view(), make_view<std::int32_t const>(sort_indices.data(), 32));
  CHECK(prefix(m, 0, 8) == words_of({0x1199bb33, 0x1199bb33, 0x1199bb33, 0x1199bb33, 0xdd5577ff, 0xdd5577ff,
                                     0xdd5577ff, 0xdd5577ff}));
  CHECK(prefix(m, 1, 8) == words_of({0xee668800, 0xee668800, 0xee668800, 0xee668800, 0xaa2244cc, 0xaa2244cc,
                                     0xaa2244cc, 0xaa2244cc}));
  auto const plain = qtl::marlin::repack_gptq<4>(g.view());
  CHECK(prefix(plain, 0, 8) == words_of({0x3bb30880, 0x3bb30880, 0x3bb30880, 0x3bb30880, 0x91196ee6, 0x91196ee6,
                                         0x91196ee6, 0x91196ee6}));
  auto const back = qtl::marlin::unrepack_gptq<4>(m.view(), make_view<std::int32_t const>(sort_indices.data(), 32));
  CHECK(back.storage() == g.storage());
}

TEST_CASE("marlin EX7: scale permutations of s[0][n] = n", "[marlin]") {
  std::vector<float> s(128), out(128), back(128);
  for (int n = 0; n < 128; ++n) s[static_cast<std::size_t>(n)] = static_cast<float>(n);
  using qtl::marlin::scale_perm_kind;
  qtl::marlin::permute_scales<float>(make_view<float const>(s.data(), 1, 128), scale_perm_kind::grouped,
                                     make_view(out.data(), 1, 128));
  CHECK(std::vector<float>(out.begin(), out.begin() + 11) ==
        std::vector<float>{0, 8, 16, 24, 32, 40, 48, 56, 1, 9, 17});
  qtl::marlin::unpermute_scales<float>(make_view<float const>(out.data(), 1, 128), scale_perm_kind::grouped,
                                       make_view(back.data(), 1, 128));
  CHECK(back == s);
  qtl::marlin::permute_scales<float>(make_view<float const>(s.data(), 1, 128), scale_perm_kind::single,
                                     make_view(out.data(), 1, 128));
  CHECK(std::vector<float>(out.begin(), out.begin() + 12) ==
        std::vector<float>{0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11});
  qtl::marlin::unpermute_scales<float>(make_view<float const>(out.data(), 1, 128), scale_perm_kind::single,
                                       make_view(back.data(), 1, 128));
  CHECK(back == s);
  std::vector<float> bias(64), pb(64);
  for (int n = 0; n < 64; ++n) bias[static_cast<std::size_t>(n)] = static_cast<float>(n);
  qtl::marlin::permute_bias<float>(make_view<float const>(bias.data(), 64), make_view(pb.data(), 64));
  CHECK(pb[2] == 8.0f);
  CHECK(pb[8] == 2.0f);
  // The peers' rule, by value: one group is channelwise.
  CHECK(qtl::marlin::scale_kind(4096, 4096, act_width::a16) == scale_perm_kind::single);
  CHECK(qtl::marlin::scale_kind(4096, 128, act_width::a16) == scale_perm_kind::grouped);
  CHECK_THROWS_AS(qtl::marlin::permute_scales<float>(make_view<float const>(s.data(), 1, 96), scale_perm_kind::grouped,
                                                     make_view(out.data(), 1, 96)),
                  qtl::shape_error);
}

TEST_CASE("marlin EX8: zero points zp[n] = n % 16, and AWQ's qzeros of them", "[marlin]") {
  std::vector<std::int32_t> zp(64);
  for (int n = 0; n < 64; ++n) zp[static_cast<std::size_t>(n)] = n % 16;
  auto const m = qtl::marlin::zero_points<4>(make_view<std::int32_t const>(zp.data(), 1, 64));
  auto const want = words_of({0x88880000, 0x99991111, 0xaaaa2222, 0xbbbb3333, 0xcccc4444, 0xdddd5555, 0xeeee6666,
                              0xffff7777});
  CHECK(prefix(m, 0, 8) == want);
  auto const qz = awq_pack<4>(zp, 1, 64);
  CHECK(prefix(qz, 0, 2) == words_of({0x75316420, 0xfdb9eca8}));
  CHECK(qtl::marlin::awq_zero_points<4>(qz.view()).storage() == m.storage());
  CHECK(qtl::marlin::unzero_points<4>(m.view()).storage() == zp);
}

TEMPLATE_TEST_CASE_SIG("marlin: every variant equals the torch reference and round-trips", "[marlin]",
                       ((int Bits, act_width A), Bits, A), (4, act_width::a16), (8, act_width::a16),
                       (4, act_width::a8), (8, act_width::a8)) {
  for (auto [K, N] : {std::pair<index_t, index_t>{32, 64}, {64, 128}, {128, 192}, {96, 320}}) {
    auto const q = codes(K, N, Bits, static_cast<std::uint32_t>(K * 7 + N));
    auto const want = torch_marlin_weights<Bits, A>(q, K, N);
    auto const g = gptq_pack<Bits>(q, K, N);
    auto const m = qtl::marlin::repack_gptq<Bits, A>(g.view());
    CHECK(m.storage() == want);
    CHECK(qtl::marlin::repack_codes<Bits, A>(make_view(q.data(), K, N)).storage() == want);
    auto const awq = awq_pack<Bits>(q, K, N);
    CHECK(qtl::marlin::repack_awq<Bits, A>(awq.view()).storage() == want);
    // unmarlin
    CHECK(qtl::marlin::unrepack_gptq<Bits, A>(m.view()).storage() == g.storage());
    CHECK(qtl::marlin::unrepack_awq<Bits, A>(m.view()).storage() == awq.storage());
    CHECK(qtl::marlin::unrepack_codes<Bits, A>(m.view()).storage() == q);
    // A strided view of the same qweight (the generic loop, not the fast path).
    std::vector<std::int32_t> wide(static_cast<std::size_t>(g.size() * 2), -1);
    for (index_t i = 0; i < g.size(); ++i) wide[static_cast<std::size_t>(2 * i)] = g.data()[i];
    auto strided = make_view<std::int32_t const>(wide.data(), g.extent(0), g.extent(1));
    strided.stride[0] = 2 * g.extent(1);
    strided.stride[1] = 2;
    CHECK(qtl::marlin::repack_gptq<Bits, A>(strided).storage() == want);
    // zero points: [G, N] codes round-trip, and AWQ's packing gives the same words.
    auto const zp = codes(3, N, Bits, static_cast<std::uint32_t>(N));
    auto const mz = qtl::marlin::zero_points<Bits, A>(make_view(zp.data(), 3, N));
    CHECK(qtl::marlin::unzero_points<Bits, A>(mz.view()).storage() == zp);
    CHECK(qtl::marlin::awq_zero_points<Bits, A>(awq_pack<Bits>(zp, 3, N).view()).storage() == mz.storage());
  }
}

TEMPLATE_TEST_CASE_SIG("marlin: act-order equals the repack of the sorted rows and round-trips", "[marlin]",
                       ((int Bits), Bits), 4, 8) {
  index_t const K = 256, N = 128;
  auto const q = codes(K, N, Bits, 5);
  std::mt19937 rng(11);
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (auto& v : g_idx) v = static_cast<std::int32_t>(rng() % 4);
  std::vector<std::int32_t> sorted(static_cast<std::size_t>(K)), s(static_cast<std::size_t>(K));
  qtl::marlin::sort_g_idx(make_view<std::int32_t const>(g_idx.data(), K), make_view(sorted.data(), K), make_view(s.data(), K));
  for (index_t i = 1; i < K; ++i) {
    REQUIRE(sorted[static_cast<std::size_t>(i - 1)] <= sorted[static_cast<std::size_t>(i)]);
    if (sorted[static_cast<std::size_t>(i - 1)] == sorted[static_cast<std::size_t>(i)]) {
      REQUIRE(s[static_cast<std::size_t>(i - 1)] < s[static_cast<std::size_t>(i)]);  // stable
    }
  }
  std::vector<std::int32_t> q_sorted(q.size());
  for (index_t k = 0; k < K; ++k)
    for (index_t n = 0; n < N; ++n)
      q_sorted[static_cast<std::size_t>(k * N + n)] = q[static_cast<std::size_t>(s[static_cast<std::size_t>(k)] * N + n)];
  auto const g = gptq_pack<Bits>(q, K, N);
  auto const sv = make_view<std::int32_t const>(s.data(), K);
  auto const m = qtl::marlin::repack_gptq<Bits>(g.view(), sv);
  CHECK(m.storage() == torch_marlin_weights<Bits, act_width::a16>(q_sorted, K, N));
  CHECK(qtl::marlin::unrepack_gptq<Bits>(m.view(), sv).storage() == g.storage());
}

TEST_CASE("marlin: MoE repacks expert by expert", "[marlin]") {
  index_t const E = 3, K = 64, N = 128;
  std::vector<std::int32_t> all, idx;
  std::vector<qtl::host_tensor<std::int32_t, 2>> per;
  for (index_t e = 0; e < E; ++e) {
    auto const g = gptq_pack<4>(codes(K, N, 4, static_cast<std::uint32_t>(e)), K, N);
    all.insert(all.end(), g.storage().begin(), g.storage().end());
    std::vector<std::int32_t> s(static_cast<std::size_t>(K));
    for (index_t k = 0; k < K; ++k) s[static_cast<std::size_t>(k)] = static_cast<std::int32_t>((k * 5 + e) % K);
    idx.insert(idx.end(), s.begin(), s.end());
    per.push_back(qtl::marlin::repack_gptq<4>(g.view(), make_view<std::int32_t const>(s.data(), K)));
  }
  auto const m = qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(all.data(), E, K / 8, N),
                                             make_view<std::int32_t const>(idx.data(), E, K));
  REQUIRE(m.extent(0) == E);
  for (index_t e = 0; e < E; ++e) {
    std::vector<std::int32_t> const got(m.data() + e * (K / 16) * (2 * N), m.data() + (e + 1) * (K / 16) * (2 * N));
    CHECK(got == per[static_cast<std::size_t>(e)].storage());
  }
}

TEST_CASE("marlin: shapes, sort_indices and codes the layout cannot take are refused", "[marlin]") {
  std::vector<std::int32_t> buf(64 * 256, 0);
  auto const msg = [](auto&& f) {
    try {
      f();
    } catch (qtl::error const& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // K % 16 (GPTQ [K/8, N]: 1 packed row is K = 8)
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 1, 64)); }),
             Catch::Contains("K = 8 is not a multiple of 16"));
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 2, 96)); }),
             Catch::Contains("N = 96 is not a multiple of 64"));
  // A8 needs K % 32 (the peers leave the last 16 rows unwritten instead).
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_gptq<4, act_width::a8>(make_view<std::int32_t const>(buf.data(), 2, 64)); }),
             Catch::Contains("K = 16 is not a multiple of 32"));
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_awq<8, act_width::a8>(make_view<std::int32_t const>(buf.data(), 48, 16)); }),
             Catch::Contains("K = 48 is not a multiple of 32"));
  std::vector<std::int32_t> s(32);
  for (int i = 0; i < 32; ++i) s[static_cast<std::size_t>(i)] = i;
  CHECK_THROWS_AS((qtl::marlin::repack_gptq<4, act_width::a8>(make_view<std::int32_t const>(buf.data(), 4, 64),
                                                              make_view<std::int32_t const>(s.data(), 32))),
                  qtl::unsupported_error);
  s[5] = 4;
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 4, 64),
                                                         make_view<std::int32_t const>(s.data(), 32)); }),
             Catch::Contains("sort_indices[5] = 4 repeats"));
  s[5] = 32;
  CHECK_THROWS_AS(qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 4, 64),
                                              make_view<std::int32_t const>(s.data(), 32)),
                  qtl::value_error);
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 4, 64),
                                                         make_view<std::int32_t const>(s.data(), 16)); }),
             Catch::Contains("sort_indices has 16 entries, K = 32"));
  buf[3] = 16;
  CHECK_THAT(msg([&] { (void)qtl::marlin::repack_codes<4>(make_view<std::int32_t const>(buf.data(), 16, 64)); }),
             Catch::Contains("q(0, 3) = 16 is outside [0, 15]"));
  CHECK_THROWS_AS(qtl::marlin::zero_points<4>(make_view<std::int32_t const>(buf.data(), 1, 64)), qtl::value_error);
  buf[3] = 0;
  CHECK_THROWS_AS(qtl::marlin::zero_points<4>(make_view<std::int32_t const>(buf.data(), 1, 32)), qtl::shape_error);
  // A caller-provided output of the wrong shape is refused, and nothing is written.
  std::vector<std::int32_t> out(128, 7);
  CHECK_THAT(msg([&] { qtl::marlin::repack_gptq<4>(make_view<std::int32_t const>(buf.data(), 2, 64), {}, make_view(out.data(), 2, 64)); }),
             Catch::Contains("out is [2, 64], it must be [1, 128]"));
  CHECK(out == std::vector<std::int32_t>(128, 7));
  // Marlin columns that are not N*16/pf for an integer N.
  CHECK_THROWS_AS(qtl::marlin::unrepack_gptq<8>(make_view<std::int32_t const>(buf.data(), 1, 130)), qtl::shape_error);
}

// Every x86 executor level the CPU runs (AVX2, SSE2, then the portable loop through the same
// dispatch), against the portable loop. With QTL_NO_SIMD only the portable level exists.
std::vector<qtl::x86::level> executor_levels() {
  std::vector<qtl::x86::level> ls = {qtl::x86::level::portable};
#if QTL_X86
  ls.push_back(qtl::x86::level::sse2);
  if (qtl::x86::cpu().avx2) ls.push_back(qtl::x86::level::avx2);
#endif  // ^^^ QTL_X86 ^^^
  return ls;
}

TEST_CASE("marlin: the tile kernel's executors equal its portable loop", "[marlin]") {
  for (auto const l : executor_levels()) {
    qtl::x86::scoped_level_cap const cap(l);
    for (index_t ncols : {64, 128, 448}) {
      auto const rows = codes(2, ncols, 16, static_cast<std::uint32_t>(ncols));  // any words: low 16 bits random
      std::vector<std::int32_t> r0(rows.begin(), rows.begin() + ncols), r1(rows.begin() + ncols, rows.end());
      for (auto& w : r0) w = static_cast<std::int32_t>(static_cast<std::uint32_t>(w) * 0x9E3779B1u);
      for (auto& w : r1) w = static_cast<std::int32_t>(static_cast<std::uint32_t>(w) * 0x85EBCA77u);
      std::vector<std::int32_t> want(static_cast<std::size_t>(2 * ncols)), got(want.size());
      qtl::marlin::detail::repack4_a16_tile_row_portable(r0.data(), r1.data(), ncols, want.data());
      qtl::marlin::detail::repack4_a16_tile_row(r0.data(), r1.data(), ncols, got.data());
      INFO("level " << static_cast<int>(l) << ", ncols " << ncols);
      CHECK(got == want);
    }
  }
}

TEST_CASE("marlin: the AWQ tile executors equal their portable loop", "[marlin]") {
  std::mt19937 rng(3);
  for (auto const l : executor_levels()) {
    qtl::x86::scoped_level_cap const cap(l);
    for (index_t ncols : {64, 128, 448}) {
      std::vector<std::int32_t> data(static_cast<std::size_t>(16 * ncols / 8 + 3));
      for (auto& w : data) w = static_cast<std::int32_t>(rng());
      std::int32_t const* rows[16];
      for (int k = 0; k < 16; ++k) rows[k] = data.data() + 3 + ((k * 5) % 16) * (ncols / 8);  // any order, unaligned
      std::vector<std::int32_t> want(static_cast<std::size_t>(2 * ncols)), got(want.size());
      qtl::marlin::detail::awq4_tile_row_portable(rows, ncols, want.data());
      qtl::marlin::detail::awq4_tile_row(rows, ncols, got.data());
      INFO("level " << static_cast<int>(l) << ", ncols " << ncols);
      CHECK(got == want);
    }
  }
}

TEST_CASE("marlin: the AWQ unband executors equal their portable loop, and AWQ tiles of them are GPTQ tiles",
          "[marlin]") {
  std::mt19937 rng(4);
  for (auto const l : executor_levels()) {
    qtl::x86::scoped_level_cap const cap(l);
    for (index_t count : {1, 8, 12, 16, 64}) {
      std::vector<std::int32_t> band(static_cast<std::size_t>(8 * count));
      for (auto& w : band) w = static_cast<std::int32_t>(rng());
      std::vector<std::int32_t> want(band.size()), got(band.size(), -1);
      std::int32_t* wr[8];
      std::int32_t* gr[8];
      for (int j = 0; j < 8; ++j) {
        wr[j] = want.data() + j * count;
        gr[j] = got.data() + j * count;
      }
      qtl::marlin::detail::awq4_unband_portable(band.data(), count, wr);
      qtl::marlin::detail::awq4_unband(band.data(), count, gr);
      INFO("level " << static_cast<int>(l) << ", count " << count);
      CHECK(got == want);
    }
    // Two GPTQ-packed rows (k 0..7, 8..15) unbanded into 16 AWQ rows: awq4_tile_row of those is
    // the GPTQ tile kernel of the two rows.
    index_t const ncols = 192;
    std::vector<std::int32_t> g(static_cast<std::size_t>(2 * ncols)), a(g.size());
    for (auto& w : g) w = static_cast<std::int32_t>(rng());
    std::int32_t* lo[8];
    std::int32_t* hi[8];
    std::int32_t const* cr[16];
    for (int k = 0; k < 8; ++k) {
      cr[k] = lo[k] = a.data() + k * (ncols / 8);
      cr[k + 8] = hi[k] = a.data() + (k + 8) * (ncols / 8);
    }
    qtl::marlin::detail::awq4_unband(g.data(), ncols / 8, lo);
    qtl::marlin::detail::awq4_unband(g.data() + ncols, ncols / 8, hi);
    std::vector<std::int32_t> via_awq(g.size()), via_gptq(g.size());
    qtl::marlin::detail::awq4_tile_row(cr, ncols, via_awq.data());
    qtl::marlin::detail::repack4_a16_tile_row(g.data(), g.data() + ncols, ncols, via_gptq.data());
    CHECK(via_awq == via_gptq);
  }
}

TEST_CASE("marlin: the whole 4-bit repacks agree at every executor level", "[marlin]") {
  // GPTQ (with and without act-order) and AWQ at each level equal the generic word-by-word loop
  // (a strided view of the same qweight takes it), on a shape whose N is 64 mod 128 (the last
  // act-order block is half a band).
  index_t const K = 64, N = 192;
  auto const q = codes(K, N, 4, 11);
  auto const qw = qtl::pack_rows<4>(make_view<std::int32_t const>(q.data(), K, N));
  std::vector<std::int32_t> perm(static_cast<std::size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(13));
  auto const sv = make_view<std::int32_t const>(perm.data(), K);
  // The strided copies: every other column of a [rows, 2 * cols] buffer.
  auto const strided = [](qtl::view2d<std::int32_t const> v, std::vector<std::int32_t>& buf) {
    buf.assign(static_cast<std::size_t>(v.extent[0] * v.extent[1] * 2), -1);
    for (index_t i = 0; i < v.extent[0]; ++i)
      for (index_t j = 0; j < v.extent[1]; ++j) buf[static_cast<std::size_t>(i * 2 * v.extent[1] + 2 * j)] = v(i, j);
    qtl::view2d<std::int32_t const> s = make_view<std::int32_t const>(buf.data(), v.extent[0], v.extent[1]);
    s.stride[0] = 2 * v.extent[1];
    s.stride[1] = 2;
    return s;
  };
  std::vector<std::int32_t> gbuf, abuf;
  auto const gs = strided(qw.view(), gbuf);
  auto const gen_plain = qtl::marlin::repack_gptq<4>(gs);
  auto const gen_act = qtl::marlin::repack_gptq<4>(gs, sv);
  auto const awq = [&] {
    // AWQ qweight [K, N/8] of the same codes: slot awq_slot(j) of word c holds column 8c + j.
    std::vector<std::int32_t> a(static_cast<std::size_t>(K * N / 8), 0);
    for (index_t k = 0; k < K; ++k)
      for (index_t n = 0; n < N; ++n)
        a[static_cast<std::size_t>(k * (N / 8) + n / 8)] |= static_cast<std::int32_t>(
            static_cast<std::uint32_t>(q[static_cast<std::size_t>(k * N + n)])
            << (4 * qtl::marlin::awq_slot<4>(static_cast<int>(n % 8))));
    return a;
  }();
  auto const av = make_view<std::int32_t const>(awq.data(), K, N / 8);
  auto const gen_awq = qtl::marlin::repack_awq<4>(strided(av, abuf));
  auto const same = [](qtl::host_tensor<std::int32_t, 2> const& a, qtl::host_tensor<std::int32_t, 2> const& b) {
    return std::equal(a.data(), a.data() + a.size(), b.data(), b.data() + b.size());
  };
  for (auto const l : executor_levels()) {
    qtl::x86::scoped_level_cap const cap(l);
    INFO("level " << static_cast<int>(l));
    CHECK(same(qtl::marlin::repack_gptq<4>(qw.view()), gen_plain));
    CHECK(same(qtl::marlin::repack_gptq<4>(qw.view(), sv), gen_act));
    CHECK(same(qtl::marlin::repack_awq<4>(av), gen_awq));
  }
}

TEST_CASE("marlin FP8: the exponent-bias folds, and where they differ", "[marlin][fp8]") {
  using qtl::bfloat16_t;
  using qtl::half_t;
  using qtl::marlin::fp8_scale_fold;
  // EX9: fp16 [0.5, 1, 2, 3] -> [128, 256, 512, 768]; bf16 -> x 2^120.
  std::vector<half_t> h = {qtl::from_float<half_t>(0.5f), qtl::from_float<half_t>(1.0f),
                           qtl::from_float<half_t>(2.0f), qtl::from_float<half_t>(3.0f)};
  qtl::marlin::fold_fp8_exponent_bias<half_t>(make_view(h.data(), 1, 4), fp8_scale_fold::vllm);
  CHECK(qtl::to_float(h[0]) == 128.0f);
  CHECK(qtl::to_float(h[3]) == 768.0f);
  std::vector<bfloat16_t> b = {qtl::from_float<bfloat16_t>(0.5f), qtl::from_float<bfloat16_t>(300.0f),
                               qtl::from_float<bfloat16_t>(1e-7f)};
  auto vllm = b, sglang = b, none = b;
  qtl::marlin::fold_fp8_exponent_bias<bfloat16_t>(make_view(vllm.data(), 1, 3), fp8_scale_fold::vllm);
  qtl::marlin::fold_fp8_exponent_bias<bfloat16_t>(make_view(sglang.data(), 1, 3), fp8_scale_fold::sglang_fp16);
  qtl::marlin::fold_fp8_exponent_bias<bfloat16_t>(make_view(none.data(), 1, 3), fp8_scale_fold::none);
  CHECK(qtl::to_float(vllm[0]) == 0x1p119f);
  CHECK(std::isinf(qtl::to_float(vllm[1])));  // 300 * 2^120 overflows bf16 (and float32)
  CHECK(qtl::to_float(sglang[0]) == 128.0f);
  CHECK(std::isinf(qtl::to_float(sglang[1])));  // 300 -> fp16 300, x 256 = 76800 > 65504: Inf in fp16
  CHECK(none == b);
  // 1e-7 is below fp16's smallest subnormal (2^-24 ~ 6e-8 rounds it to 2^-24): lossy through fp16.
  CHECK(qtl::to_float(sglang[2]) != qtl::to_float(b[2]) * 256.0f);
}

TEST_CASE("marlin FP4: NVFP4 and MXFP4 scale processing, and what is refused", "[marlin][fp4]") {
  using qtl::marlin::act_dtype;
  std::vector<std::uint8_t> e4 = {0x38, 0x40, 0x30, 0x7e, 0x01, 0x08, 0x39, 0x00};  // EX9
  auto const v = make_view<std::uint8_t const>(e4.data(), 1, 8);
  CHECK(qtl::marlin::nvfp4_scale_factor(v, act_dtype::f16) == 1.0f);
  CHECK(qtl::marlin::nvfp4_scale_factor(v, act_dtype::bf16) == 8.0f);
  std::vector<std::uint8_t> ones(8, 0x38), zeros(8, 0);
  CHECK(qtl::marlin::nvfp4_scale_factor(make_view<std::uint8_t const>(ones.data(), 1, 8), act_dtype::bf16) == 1.0f);
  CHECK(qtl::marlin::nvfp4_scale_factor(make_view<std::uint8_t const>(zeros.data(), 1, 8), act_dtype::bf16) == 1.0f);
  std::vector<std::uint8_t> out(8);
  qtl::marlin::nvfp4_process_scales(v, 1.0f, make_view(out.data(), 1, 8));
  CHECK(out == std::vector<std::uint8_t>{0xb0, 0xa8, 0xb8, 0xf6, 0x68, 0xb1, 0x80, 0x00});
  qtl::marlin::nvfp4_process_scales(v, 8.0f, make_view(out.data(), 1, 8));
  CHECK(out == std::vector<std::uint8_t>{0xc8, 0xc0, 0xd0, 0xf8, 0x80, 0xc9, 0x98, 0x00});
  // A negative scale loses its sign (vLLM warns); NaN scales are refused.
  std::vector<std::uint8_t> neg = {0xb8, 0x38, 0x38, 0x38};
  qtl::marlin::nvfp4_process_scales(make_view<std::uint8_t const>(neg.data(), 1, 4), 1.0f, make_view(out.data(), 1, 4));
  CHECK(out[0] == 0xb0);
  neg[2] = 0x7f;
  CHECK_THROWS_AS(qtl::marlin::nvfp4_process_scales(make_view<std::uint8_t const>(neg.data(), 1, 4), 1.0f,
                                                    make_view(out.data(), 1, 4)),
                  qtl::value_error);
  CHECK(qtl::marlin::nvfp4_process_global_scale(1.0f, act_dtype::f16, 1.0f) == 128.0f);
  CHECK(qtl::marlin::nvfp4_process_global_scale(1.0f, act_dtype::bf16, 8.0f) == 0x1p116f);
  // MXFP4: a byte permutation ({0,2,1,3}), + 6 for FP8 activations; fp16 parameters refuse bytes
  // whose 2^(b-127) fp16 cannot hold.
  std::vector<std::uint8_t> e8 = {0, 120, 127, 254};
  qtl::marlin::mxfp4_process_scales(make_view<std::uint8_t const>(e8.data(), 1, 4), act_dtype::bf16, false,
                                    make_view(out.data(), 1, 4));
  CHECK(std::vector<std::uint8_t>(out.begin(), out.begin() + 4) == std::vector<std::uint8_t>{0, 127, 120, 254});
  CHECK_THROWS_AS(qtl::marlin::mxfp4_process_scales(make_view<std::uint8_t const>(e8.data(), 1, 4), act_dtype::f16,
                                                    false, make_view(out.data(), 1, 4)),
                  qtl::value_error);
  CHECK_THROWS_AS(qtl::marlin::mxfp4_process_scales(make_view<std::uint8_t const>(e8.data(), 1, 4), act_dtype::bf16,
                                                    true, make_view(out.data(), 1, 4)),
                  qtl::value_error);  // 254 + 6 > 255
  std::vector<std::uint8_t> ok = {103, 120, 127, 142};
  qtl::marlin::mxfp4_process_scales(make_view<std::uint8_t const>(ok.data(), 1, 4), act_dtype::f16, true,
                                    make_view(out.data(), 1, 4));
  CHECK(std::vector<std::uint8_t>(out.begin(), out.begin() + 4) == std::vector<std::uint8_t>{109, 126, 133, 148});
  // The FP8 weight bytes as a GPTQ 8-bit qweight: [N, K] and [K, N] inputs agree.
  std::vector<std::uint8_t> nk(64 * 16), kn(16 * 64);
  for (int n = 0; n < 64; ++n)
    for (int k = 0; k < 16; ++k) {
      nk[static_cast<std::size_t>(n * 16 + k)] = static_cast<std::uint8_t>((16 * k + n) % 256);
      kn[static_cast<std::size_t>(k * 64 + n)] = static_cast<std::uint8_t>((16 * k + n) % 256);
    }
  auto const a = qtl::marlin::pack_fp8_k(make_view<std::uint8_t const>(nk.data(), 64, 16), false);
  auto const c = qtl::marlin::pack_fp8_k(make_view<std::uint8_t const>(kn.data(), 16, 64), true);
  CHECK(a.storage() == c.storage());
  CHECK(prefix(a, 0, 4) == words_of({0x30201000, 0x31211101, 0x32221202, 0x33231303}));  // EX9
  CHECK(prefix(qtl::marlin::repack_gptq<8>(a.view()), 0, 4) == words_of({0x90108000, 0x98188808, 0xa0209010, 0xa8289818}));
}
