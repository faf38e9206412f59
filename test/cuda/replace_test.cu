// <qtl/cuda/replace.cuh>: a named device buffer is replaced in place (address kept) when dtype and
// byte size match and re-allocated otherwise. Skipped (77) without a GPU.
#include <qtl/cuda/replace.cuh>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

TEST_CASE("device replace_parameter: in place on same dtype and bytes, re-allocated otherwise", "[replace][cuda]") {
  std::vector<std::int32_t> host(32);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<std::int32_t>(i);
  }
  std::int32_t* a = nullptr;
  CUDA_REQUIRE(cudaMalloc(&a, 32 * sizeof(std::int32_t)));
  CUDA_REQUIRE(cudaMemcpy(a, host.data(), 32 * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  qtl::cuda::device_parameter_map params;
  CUDA_REQUIRE(params.register_parameter("qweight", qtl::make_view(a, 4, 8), nullptr));
  void* const before = params.find("qweight")->data;

  qtl::replace_result how{};
  CUDA_REQUIRE(qtl::cuda::replace_parameter(params, "qweight", qtl::make_view(a, 8, 4), nullptr, &how));
  CHECK(how == qtl::replace_result::in_place);
  CHECK(params.find("qweight")->data == before);
  CHECK(params.find("qweight")->shape == std::vector<qtl::index_t>{8, 4});

  float* f = nullptr;
  CUDA_REQUIRE(cudaMalloc(&f, 16 * sizeof(float)));
  CUDA_REQUIRE(cudaMemset(f, 0, 16 * sizeof(float)));
  CUDA_REQUIRE(qtl::cuda::replace_parameter(params, "qweight", qtl::make_view(f, 16), nullptr, &how));
  CHECK(how == qtl::replace_result::reallocated);
  CHECK(params.find("qweight")->dtype == "F32");
  CHECK(params.find("qweight")->nbytes == 64);
  std::vector<float> back(16, 1.0f);
  CUDA_REQUIRE(cudaMemcpy(back.data(), params.find("qweight")->data, 64, cudaMemcpyDeviceToHost));
  CHECK(back == std::vector<float>(16, 0.0f));
  CHECK(qtl::cuda::replace_parameter(params, "missing", qtl::make_view(f, 16), nullptr, &how) == cudaErrorInvalidValue);
  cudaFree(a);
  cudaFree(f);
}
