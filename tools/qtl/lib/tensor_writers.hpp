#pragma once
// The writers of `qtl quantize`'s output tensors, one per format (internal to the commands
// library). Each takes a job of the plan (quantize_plan.hpp), reads its input tensor, computes
// the outputs with the library's ops and writes them at their offsets in the job's shard. They
// run on worker threads, one job each; the shards' files take concurrent pwrites.

#include <vector>

#include "quantize_plan.hpp"

namespace qtl::tool {

/// The input tensor's bytes, unchanged, in 64 MiB slices (the input pages released behind).
void write_copy(job const& j, shard_plan const& s);

/// GPTQ: `qweight`, `scales`, `g_idx` now; the zero points are kept in the job for
/// `write_gptq_zero_points`. @throws data_error for a NaN/Inf weight unless allowed
void write_gptq(job& j, shard_plan const& s);

/// After every GPTQ job: packs and writes each job's `qzeros`, as v1 (z - 1) when `v1`.
void write_gptq_zero_points(std::vector<job>& jobs, std::vector<shard_plan>& shards, bool v1);

/// FP8 E4M3 `weight` and its scales by `scheme`. @throws data_error for a NaN/Inf weight unless allowed
void write_fp8(job& j, shard_plan const& s, fp8_scheme scheme);

}  // namespace qtl::tool
