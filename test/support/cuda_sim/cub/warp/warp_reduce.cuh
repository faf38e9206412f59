#pragma once
#include <cub/block/block_reduce.cuh>  // cuda_sim: WarpReduce lives beside BlockReduce
