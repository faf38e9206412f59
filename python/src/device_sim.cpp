// The test build's device table: device_kernels.cu compiled by g++ against the simulated device
// (QTL_CUDA_SIM, python/sim/meson.build).
#include "device_kernels.cu"
