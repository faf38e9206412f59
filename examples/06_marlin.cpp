// Example 06: a GPTQ layer as vLLM and sglang load it for the Marlin GEMM. A 4-bit act-order
// GPTQ layer (qweight [K/8, N], g_idx [K], scales [K/G, N]) is repacked into Marlin's tiles with
// the stable sort of g_idx as sort_indices, its scales permuted as the peers choose, and the
// result taken apart again: unrepack_gptq gives back the checkpoint's qweight word for word, and
// each Marlin code is found where layout::dst says it is.

#include <qtl/marlin.hpp>
#include <qtl/pack.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  using qtl::index_t;
  using qtl::make_view;
  namespace marlin = qtl::marlin;
  constexpr index_t K = 512, N = 256, G = 128;  // input features, output features, group size

  // A checkpoint: random uint4b8 codes, packed down K (GPTQ), and a desc_act g_idx (rows of the
  // four groups interleaved, as GPTQ's act-order writes them).
  std::mt19937 rng(2026);
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N));
  for (auto& c : codes) c = static_cast<std::int32_t>(rng() % 16);
  auto const qweight = qtl::pack_rows<4>(make_view<std::int32_t const>(codes.data(), K, N));
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (index_t k = 0; k < K; ++k) g_idx[static_cast<std::size_t>(k)] = static_cast<std::int32_t>((k * 7) % (K / G));
  std::vector<float> scales(static_cast<std::size_t>(K / G * N));
  for (auto& s : scales) s = 0.001f * static_cast<float>(1 + rng() % 100);

  // Load time: sort g_idx (stably), repack, permute the scales.
  std::vector<std::int32_t> sorted_g_idx(static_cast<std::size_t>(K)), sort_indices(static_cast<std::size_t>(K));
  marlin::sort_g_idx(make_view<std::int32_t const>(g_idx.data(), K), make_view(sorted_g_idx.data(), K),
                     make_view(sort_indices.data(), K));
  auto const s = make_view<std::int32_t const>(sort_indices.data(), K);
  auto const m = marlin::repack_gptq<4>(qweight.view(), s);
  std::vector<float> mscales(scales.size());
  auto const kind = marlin::scale_kind(K, G, marlin::act_width::a16);
  marlin::permute_scales<float>(make_view<float const>(scales.data(), K / G, N), kind, make_view(mscales.data(), K / G, N));
  std::printf("qweight [%lld, %lld] -> Marlin [%lld, %lld]; scales [%lld, %lld], %s permutation\n",
              static_cast<long long>(qweight.extent(0)), static_cast<long long>(qweight.extent(1)),
              static_cast<long long>(m.extent(0)), static_cast<long long>(m.extent(1)), static_cast<long long>(K / G),
              static_cast<long long>(N), kind == marlin::scale_perm_kind::grouped ? "grouped" : "single");

  // Marlin row k' is checkpoint row sort_indices[k']: code (k', n) sits in the slot layout::dst names.
  using L = marlin::layout<4>;
  long bad = 0;
  for (index_t kp = 0; kp < K; ++kp) {
    for (index_t n = 0; n < N; ++n) {
      int slot = 0;
      index_t const f = L::flat_word(N, kp, n, slot);
      auto const code = (static_cast<std::uint32_t>(m.data()[f]) >> (4 * slot)) & 15u;
      bad += code != static_cast<std::uint32_t>(codes[static_cast<std::size_t>(sort_indices[static_cast<std::size_t>(kp)] * N + n)]);
    }
  }

  // And back: the exact inverse gives the checkpoint's words; the scales come back too.
  auto const back = marlin::unrepack_gptq<4>(m.view(), s);
  std::vector<float> scales_back(scales.size());
  marlin::unpermute_scales<float>(make_view<float const>(mscales.data(), K / G, N), kind,
                                  make_view(scales_back.data(), K / G, N));
  bool const round_trip = back.storage() == qweight.storage() && scales_back == scales;
  std::printf("codes misplaced: %ld; unrepack_gptq(repack_gptq(qweight)) == qweight and scales: %s\n", bad,
              round_trip ? "yes" : "NO");
  return bad == 0 && round_trip ? 0 : 1;
}
