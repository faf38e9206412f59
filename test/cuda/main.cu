// Main of every CUDA test executable: exits 77 (Meson's "skipped") when no GPU can be used, so the
// suite builds and passes everywhere, and runs the kernels against the host wherever a GPU exists.
// QTL_CUDA_REQUIRE_DEVICE=1 in the environment makes "no usable device" a failure (exit 1).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

int main(int argc, char* argv[]) {
  int n = 0;
  cudaError_t const status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess || n == 0) {
    std::printf("no usable CUDA device (%s): skipped\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    char const* const require = std::getenv("QTL_CUDA_REQUIRE_DEVICE");
    if (require != nullptr && std::strcmp(require, "1") == 0) {
      std::printf("QTL_CUDA_REQUIRE_DEVICE=1: no device is a failure\n");
      return 1;
    }
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
