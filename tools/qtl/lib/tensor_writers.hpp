#pragma once
// The writers of `qtl quantize`'s output tensors, one per format (internal to the commands
// library). Each takes a job of the plan (quantize_plan.hpp), reads its input tensor, computes
// the outputs with the library's ops and writes them at their offsets in the job's shard. They
// run on worker threads, one job each; the shards' files take concurrent pwrites.

#include <vector>

#include "quantize_plan.hpp"

namespace qtl::tool {

/// The first pass of the formats with a per-tensor weight scale (NVFP4's global scale, FP8
/// per-tensor), before any writer runs: the shards of a fused layer (jobs with the same
/// `scale_group`, two or more, in any shard files) get one scale, so each such job's
/// `group_amax` becomes the max |x| over all their weights (NaN ignored, as `fp8_amax`), read by
/// `threads` worker threads (0: one per core), input pages released behind. Jobs alone in their
/// group keep no `group_amax`: their writer takes their own amax in its single pass.
/// @throws data_error naming the tensor, for an infinite weight (unless allowed: it would make
/// its partners' scales infinite too, and their writers fail naming them instead)
void share_group_amax(std::vector<job>& jobs, unsigned threads);

/// The job by its kind's writer (below), its input read gathered first when it is a strided cut of
/// an expert stack (one expert's tensor in memory at a time). @throws data_error as the writer
void write_job(job& j, shard_plan const& s, fp8_scheme scheme);

/// The input tensor's bytes, unchanged, in 64 MiB slices (the input pages released behind).
void write_copy(job const& j, shard_plan const& s);

/// GPTQ: `qweight`, `scales`, `g_idx` now; the zero points are kept in the job for
/// `write_gptq_zero_points`. @throws data_error for a NaN/Inf weight unless allowed
void write_gptq(job& j, shard_plan const& s);

/// After every GPTQ job: packs and writes each job's `qzeros`, as v1 (z - 1) when `v1`.
void write_gptq_zero_points(std::vector<job>& jobs, std::vector<shard_plan>& shards, bool v1);

/// compressed-tensors pack-quantized (W4A16, W8A16): weight_packed, weight_scale, weight_shape,
/// and weight_zero_point when asymmetric. @throws data_error for a NaN/Inf weight unless allowed
void write_ct_pack(job& j, shard_plan const& s);

/// compressed-tensors NVFP4A16 / MXFP4 (by the job's kind): weight_packed, weight_scale and, for
/// NVFP4, weight_global_scale (from the job's `group_amax` when set, else its own amax); NVFP4 in
/// ModelOpt's names (`job::modelopt`) the same bytes as weight and weight_scale, and
/// weight_scale_2 = 1 / weight_global_scale.
/// @throws data_error for a NaN/Inf weight unless allowed
void write_fp4(job& j, shard_plan const& s);

/// (compressed-tensors MXFP8, job_kind::mxfp8, is written by `write_job`: weight F8_E4M3 and
/// weight_scale U8 E8M0 exponents, by qtl::ct_mxfp8_quantize.)

/// FP8 E4M3 `weight` and its scales by `scheme` (per tensor: from the job's `group_amax` when set,
/// else its own amax). @throws data_error for a NaN/Inf weight unless allowed
void write_fp8(job& j, shard_plan const& s, fp8_scheme scheme);

}  // namespace qtl::tool
