// Example 02: GPTQ-style group quantization of a layer. A random fp16 weight (K, N) is quantized
// to uint4b8 with one scale per 128 rows of a column (`quantize_weights`, bit for bit as sglang's
// reference), the codes are packed down K into int32 words (`pack_rows`, GPTQ's qweight), then
// unpacked and dequantized with the fp16 scales, and the error against the original weight is
// printed. The dequantized weight must equal the reference's `w_ref` exactly.

#include <qtl/pack.hpp>
#include <qtl/quantize.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  constexpr auto type = qtl::uint4b8;  // codes 0..15 hold values -8..7
  constexpr int group = 128;
  constexpr qtl::index_t k = 1024;  // input features (grouped and packed dimension)
  constexpr qtl::index_t n = 256;   // output features

  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<qtl::half_t> w(static_cast<std::size_t>(k * n));
  for (auto& x : w) {
    x = qtl::from_float<qtl::half_t>(normal(rng));
  }

  // w_ref (K, N) fp16, w_q (K, N) codes, w_s (K/128, N) fp16 scales.
  auto q = qtl::quantize_weights<type, group>(qtl::make_view(w.data(), k, n));

  // GPTQ qweight: (K/8, N) int32 words, row r*8 + j of the codes in bits [4j, 4j+4).
  qtl::host_tensor<std::int32_t, 2> qweight({k / qtl::pack_factor<type>, n});
  qtl::pack_rows<type>(q.w_q.view(), qweight.view());
  qtl::host_tensor<std::int32_t, 2> codes({k, n});
  qtl::unpack_rows<type>(qweight.view(), codes.view());

  // Dequantize as a kernel would: (code - 8) * scale, rounded to fp16 once.
  double sum_sq = 0;
  double max_abs = 0;
  double sum_sq_w = 0;
  long mismatches = 0;
  for (qtl::index_t i = 0; i < k; ++i) {
    for (qtl::index_t j = 0; j < n; ++j) {
      float const s = qtl::to_float(q.w_s.view()(i / group, j));
      float const deq = qtl::to_float(qtl::from_float<qtl::half_t>(static_cast<float>(codes.view()(i, j) - 8) * s));
      mismatches += qtl::from_float<qtl::half_t>(deq).bits != q.w_ref.view()(i, j).bits;
      double const x = qtl::to_float(w[static_cast<std::size_t>(i * n + j)]);
      double const e = deq - x;
      sum_sq += e * e;
      sum_sq_w += x * x;
      max_abs = std::fmax(max_abs, std::fabs(e));
    }
  }
  double const rmse = std::sqrt(sum_sq / static_cast<double>(k * n));
  std::printf("uint4b8, group %d, %lld x %lld fp16 weight -> qweight %lld x %lld int32, scales %lld x %lld fp16\n",
              group, static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(qweight.extent(0)),
              static_cast<long long>(qweight.extent(1)), static_cast<long long>(q.w_s.extent(0)),
              static_cast<long long>(q.w_s.extent(1)));
  std::printf("rmse %.3g, max |error| %.3g, relative rmse %.3g, dequantized != w_ref: %ld\n", rmse, max_abs,
              rmse / std::sqrt(sum_sq_w / static_cast<double>(k * n)), mismatches);
  return (mismatches == 0 && rmse / std::sqrt(sum_sq_w / static_cast<double>(k * n)) < 0.2) ? 0 : 1;
}
