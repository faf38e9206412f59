// Translation unit 2 of the two-TU link test: includes every qtl/cuda/*.cuh and instantiates
// launchers of each (the GPTQ and sort paths launch the index kernels), so a kernel defined in a
// header that is not a template or inline makes the link fail with "multiple definition".
#include <qtl/cuda/blockscale.cuh>
#include <qtl/cuda/fp4.cuh>
#include <qtl/cuda/fp8.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/cuda/moe.cuh>
#include <qtl/cuda/pack.cuh>
#include <qtl/cuda/quantize.cuh>
#include <qtl/cuda/replace.cuh>

#include <cstdint>

int use_tu_2() {
  using qtl::index_t;
  float const* w = nullptr;
  auto const in = qtl::make_view(w, index_t{0}, index_t{0});
  int failures = 0;
  qtl::gptq_outputs<float> g{};
  failures += qtl::cuda::gptq_quantize_weights<qtl::uint4b8>(in, 32, g, nullptr, nullptr, nullptr) != cudaSuccess;
  std::size_t bytes = 0;
  qtl::sort_weights_outputs so{};
  std::int32_t const* codes = nullptr;
  failures += qtl::cuda::sort_weights(nullptr, bytes, qtl::make_view(codes, index_t{0}, index_t{0}), nullptr, so,
                                      nullptr) != cudaSuccess;
  qtl::float8_e4m3fn_t* q = nullptr;
  failures += qtl::cuda::scaled_fp8_quant_static(in, nullptr, qtl::make_view(q, index_t{0}, index_t{0})) != cudaSuccess;
  return failures;
}

int use_tu_1();

int main(int argc, char**) {
  // Linking is the test; the launchers are referenced, not run (no GPU is needed).
  return argc > 1000 ? use_tu_1() + use_tu_2() : 0;
}
