#pragma once
/// \file
/// The simulated device's `<cub/cub.cuh>` (test-only, `QTL_CUDA_SIM`): only the parts QTL's kernels
/// use, written for the shim (see README.md).
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
