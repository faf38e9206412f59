// Example 01: GPTQ's int32 weight layout. A (K, N) float weight is quantized per column to
// uint4b8 codes (4-bit, stored value = round(w / scale) + 8), packed down K into int32 words
// (`pack_rows`, GPTQ's `qweight`: 8 codes per word, row r*8 + j in bits [4j, 4j+4)), unpacked,
// and checked code for code and against the dequantized weight.

#include <qtl/pack.hpp>
#include <qtl/scalar_type.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr auto type = qtl::uint4b8;  // GPTQ 4-bit: codes 0..15 hold values -8..7
  constexpr qtl::index_t k = 256;      // input features (packed dimension)
  constexpr qtl::index_t n = 64;       // output features
  constexpr qtl::index_t pf = qtl::pack_factor<type>;

  // A random weight, and one symmetric scale per column: max |w| maps to the largest value, 7.
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(k * n));
  for (auto& x : w) {
    x = normal(rng);
  }
  std::vector<float> scale(static_cast<std::size_t>(n), 0.f);
  for (qtl::index_t i = 0; i < k; ++i) {
    for (qtl::index_t j = 0; j < n; ++j) {
      scale[j] = std::max(scale[j], std::fabs(w[i * n + j]) / static_cast<float>(type.max_int()));
    }
  }
  // Codes: clamp(round(w / s), min, max) + bias, as vLLM's quantize_weights stores them.
  std::vector<std::int32_t> codes(w.size());
  for (qtl::index_t i = 0; i < k; ++i) {
    for (qtl::index_t j = 0; j < n; ++j) {
      auto const v = static_cast<std::int64_t>(std::nearbyint(w[i * n + j] / scale[j]));
      codes[i * n + j] = static_cast<std::int32_t>(std::clamp(v, type.min_int(), type.max_int()) + type.bias);
    }
  }

  // Pack to GPTQ's qweight (K/8, N), and back.
  auto const qweight = qtl::pack_rows<type>(qtl::make_view(codes.data(), k, n));
  auto const unpacked = qtl::unpack_rows<type>(qweight.view());
  bool const same = unpacked.storage() == codes;

  // The dequantized weight from the unpacked codes: (code - bias) * scale.
  double max_err = 0;
  for (qtl::index_t i = 0; i < k; ++i) {
    for (qtl::index_t j = 0; j < n; ++j) {
      double const dq = (unpacked.storage()[i * n + j] - type.bias) * static_cast<double>(scale[j]);
      max_err = std::max(max_err, std::fabs(dq - w[i * n + j]) / scale[j]);
    }
  }

  auto const word0 = static_cast<std::uint32_t>(qweight.storage()[0]);
  std::printf("type %s: %d bits, %lld codes per int32 word\n", type.name().c_str(), type.size_bits(),
              static_cast<long long>(pf));
  std::printf("codes   (%lld, %lld) int32: %lld bytes\n", static_cast<long long>(k), static_cast<long long>(n),
              static_cast<long long>(k * n * 4));
  std::printf("qweight (%lld, %lld) int32: %lld bytes (%.0fx smaller)\n", static_cast<long long>(qweight.extent(0)),
              static_cast<long long>(qweight.extent(1)), static_cast<long long>(qweight.size() * 4),
              static_cast<double>(codes.size()) / static_cast<double>(qweight.size()));
  std::printf("qweight[0, 0] = 0x%08X holds column 0, rows 0..7 = [", word0);
  for (qtl::index_t j = 0; j < pf; ++j) {
    std::printf("%s%d", j ? ", " : "", codes[j * n]);
  }
  std::printf("] (row 0 in the low nibble)\n");
  std::printf("unpack_rows(pack_rows(codes)) == codes: %s\n", same ? "yes" : "NO");
  std::printf("max |dequantized - w| = %.3f scale steps (rounding: at most 0.5)\n", max_err);
  return same && max_err <= 0.5 + 1e-6 ? 0 : 1;
}
