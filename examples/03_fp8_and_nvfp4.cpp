// Example 03: one bf16 activation-like matrix, quantized three ways and dequantized again:
//   - FP8 e4m3fn per tensor (`scaled_fp8_quant_dynamic`: scale = amax / 448, as sglang's kernel),
//   - FP8 per token (one scale per row),
//   - NVFP4 (E2M1 values two per byte, one E4M3 scale per 16 elements written straight into the
//     128x4 swizzled layout of Blackwell's block-scaled MMA, and a float32 global scale).
// It prints the scales and the error of each against the input, and checks that every
// dequantized element lies within half a step of its format's grid (plus the scale rounding).

#include <qtl/fp4.hpp>
#include <qtl/fp8.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

struct error_stats {
  double sum_sq = 0;
  double ref_sq = 0;
  double max_abs = 0;
  void add(float ref, float got) {
    double const d = static_cast<double>(got) - static_cast<double>(ref);
    sum_sq += d * d;
    ref_sq += static_cast<double>(ref) * static_cast<double>(ref);
    max_abs = std::fmax(max_abs, std::fabs(d));
  }
  void print(char const* what) const {
    std::printf("%-26s relative RMS error %.5f, max |error| %.5f\n", what, std::sqrt(sum_sq / ref_sq), max_abs);
  }
};

}  // namespace

int main() {
  constexpr qtl::index_t m = 256;  // tokens
  constexpr qtl::index_t k = 512;  // hidden size (a multiple of NVFP4's 16)

  std::mt19937 rng(2026);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<qtl::bfloat16_t> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) {
    v = qtl::from_float<qtl::bfloat16_t>(normal(rng) * (1.0f + 0.01f * static_cast<float>(&v - x.data()) / k));
  }
  auto const in = qtl::make_view<qtl::bfloat16_t const>(x.data(), m, k);
  auto value = [&](qtl::index_t i) { return qtl::to_float(x[static_cast<std::size_t>(i)]); };
  int bad = 0;

  // FP8 per tensor: one scale; q * scale ~ x.
  qtl::host_tensor<qtl::float8_e4m3fn_t, 2> q8({m, k});
  float const scale = qtl::scaled_fp8_quant_dynamic(in, q8.view());
  std::printf("fp8 per-tensor scale      %.9g (amax %.6g / 448)\n", scale, qtl::fp8_amax(in));
  error_stats fp8_tensor;
  for (qtl::index_t i = 0; i < m * k; ++i) {
    float const v = qtl::to_float(q8.data()[i]);
    fp8_tensor.add(value(i), v * scale);
    // e4m3 has 3 mantissa bits: half a step is |v| / 16 for normals, 2^-10 below 2^-6
    float const half_step = std::fmax(std::fabs(v) / 16.0f, 0x1p-10f) * scale * 1.0001f;
    bad += std::fabs(v * scale - value(i)) > half_step + std::fabs(value(i)) * 0x1p-22f;
  }
  fp8_tensor.print("fp8 e4m3fn per tensor:");

  // FP8 per token: one scale per row.
  std::vector<float> token_scales(m);
  qtl::scaled_fp8_quant_per_token(in, q8.view(), qtl::make_view(token_scales.data(), m));
  std::printf("fp8 per-token scales      row 0 %.9g, row %d %.9g\n", token_scales[0], int(m - 1), token_scales[m - 1]);
  error_stats fp8_token;
  for (qtl::index_t i = 0; i < m * k; ++i) {
    fp8_token.add(value(i), qtl::to_float(q8.data()[i]) * token_scales[static_cast<std::size_t>(i / k)]);
  }
  fp8_token.print("fp8 e4m3fn per token:");

  // NVFP4: global scale 448*6/amax, E4M3 block scales in the 128x4 layout (padded to 256 rows x
  // 32 blocks: 128x4 tiles), two E2M1 codes per byte.
  float const gs = qtl::nvfp4_global_scale(in);
  qtl::host_tensor<qtl::float4_e2m1x2_t, 2> q4({m, k / 2});
  std::vector<qtl::float8_e4m3fn_t> sf(static_cast<std::size_t>(qtl::block_scale_bytes<qtl::nvfp4, qtl::layout_128x4>(m, k)));
  qtl::block_quantize<qtl::nvfp4, qtl::layout_128x4>(in, q4.view(), std::span(sf), gs);
  std::vector<float> dq(static_cast<std::size_t>(m * k));
  qtl::block_dequantize<qtl::nvfp4, qtl::layout_128x4>(q4.view(), std::span<qtl::float8_e4m3fn_t const>(sf), gs,
                                                      qtl::make_view(dq.data(), m, k));
  auto const s00 = sf[static_cast<std::size_t>(qtl::blockscale_offset<qtl::layout_128x4>(0, 0, k / 16))];
  std::printf("nvfp4 global scale        %.9g; block (0, 0) scale byte 0x%02X = %g, i.e. %.6g per unit\n", gs,
              unsigned(s00.bits), qtl::to_float(s00), qtl::to_float(s00) / gs);
  error_stats fp4;
  for (qtl::index_t i = 0; i < m * k; ++i) {
    fp4.add(value(i), dq[static_cast<std::size_t>(i)]);
    // E2M1 steps are 0.5 below 2, 1 below 4, 2 up to 6: half a step in input units
    qtl::index_t const row = i / k;
    qtl::index_t const block = (i % k) / 16;
    auto const b = sf[static_cast<std::size_t>(qtl::blockscale_offset<qtl::layout_128x4>(row, block, k / 16))];
    float const unit = qtl::to_float(b) / gs;
    float const e = std::fabs(dq[static_cast<std::size_t>(i)]) / unit;
    float const half_step = (e >= 4.0f ? 1.0f : e >= 2.0f ? 0.5f : 0.25f) * unit * 1.0001f;
    bad += std::fabs(dq[static_cast<std::size_t>(i)] - value(i)) > half_step;
  }
  fp4.print("nvfp4 (128x4 scales):");

  std::printf("%d elements outside half a step\n", bad);
  return bad == 0 ? 0 : 1;
}
