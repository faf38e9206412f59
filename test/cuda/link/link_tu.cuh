// The body of both translation units of the two-TU link test, link_1.cu and link_2.cu, which differ
// only by the name of the function below (QTL_LINK_TU). It includes every qtl/cuda/*.cuh (the list
// is generated from the folder when Meson configures: a new header is in it without an edit) and
// instantiates a launcher of each kernel family, so that a kernel defined in a header that is
// neither a template nor inline makes the link fail with "multiple definition".
#include "cuda_link_headers.cuh"  // generated: every qtl/cuda/*.cuh

#include <cstdint>

int QTL_LINK_TU() {
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
  qtl::convert::block_grid const grid{1, 0, 0, qtl::convert::block_size{128, 128}};
  failures += qtl::cuda::convert::block_quant_dequant<float>(nullptr, nullptr, grid, nullptr) != cudaSuccess;
  qtl::convert::dg_packed_layout const layout{};
  failures += qtl::cuda::convert::deepgemm_pack_ue8m0(nullptr, layout, nullptr) != cudaSuccess;
  failures += qtl::cuda::convert::deepgemm_post_process_e8m0(nullptr, layout, nullptr) != cudaSuccess;
  failures += qtl::cuda::convert::fp8_block_to_mxfp4(nullptr, nullptr, grid, nullptr, nullptr) != cudaSuccess;
  std::int32_t* words = nullptr;
  failures += qtl::cuda::marlin::repack_gptq<4>(qtl::make_view(codes, index_t{0}, index_t{0}), nullptr,
                                                qtl::make_view(words, index_t{0}, index_t{0})) != cudaSuccess;
  return failures;
}
