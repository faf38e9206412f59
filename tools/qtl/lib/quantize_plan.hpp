#pragma once
// The plan of a `qtl quantize` run (internal to the commands library): the output shards, their
// tensors and headers, and one job per input tensor that produces its outputs.
//
//   shard_plan  name, tensors (name, dtype, shape, absolute offset), header size, file size
//   job         the input tensor, what to do with it (copy, or a format's writer), its outputs

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <qtl/io/safetensors.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/scalar_type.hpp>

#include "../staged_output.hpp"

namespace qtl::tool {

using qtl::io::dtype;
using qtl::io::tensor_info;

/// What a job does with its input tensor.
enum class job_kind { copy, gptq, fp8, ct_pack, nvfp4, mxfp4 };
/// How FP8 weights are scaled.
enum class fp8_scheme { tensor, channel, block };

/// A tensor of an output shard.
struct out_tensor {
  std::string name;
  dtype type;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  ///< absolute offset in the shard file (set by lay_out)
  std::uint64_t bytes = 0;
};

/// One input tensor and the output tensors it becomes.
struct job {
  job_kind kind = job_kind::copy;
  tensor_info const* in = nullptr;
  std::size_t shard = 0;          ///< output shard
  std::vector<std::size_t> outs;  ///< indices into the shard's tensors, in the writer's order
  std::string module;             ///< quantized layers: the module name
  // GPTQ
  int bits = 4;
  std::int64_t group_rows = 128;         ///< rows per group (K when channelwise)
  std::int64_t config_group_size = 128;  ///< as the config says it (-1 for channelwise)
  bool sym = true;
  scalar_type weight_type = uint4b8;     ///< the codes' type: integer_weight_type(bits, sym)
  bool allow_nonfinite = false;
  bool ct_rules = false;  ///< fp8 ct-block: compressed-tensors' zero-scale rule (tensor_writers.hpp)
  // NVFP4 and FP8 per-tensor: the fused layer whose one per-tensor scale the job's layer shares
  // (`scale_group_name`; empty: its own), and the amax that scale is computed from when other
  // shards of that layer are in the run: the max over them all (set by `share_group_amax`)
  std::string scale_group;
  std::optional<float> group_amax;
  // GPTQ results kept to the end: zero points (G x N, unpacked) and whether one is 0
  std::vector<std::int32_t> zeros;
  bool zero_has_zero = false;
};

/// An output shard.
struct shard_plan {
  std::string name;
  std::vector<out_tensor> tensors;
  std::uint64_t header_bytes = 0;  ///< 8 + N
  std::uint64_t total = 0;         ///< file size
  std::unique_ptr<output_file> file;
};

/// The fused layer an engine builds from `module` and gives ONE per-tensor weight scale (NVFP4's
/// `weight_global_scale`, FP8's per-tensor `weight_scale`), or empty when the module's scale is
/// its own. vLLM and sglang load the shards of a fused layer into one tensor and keep one scale:
/// NVFP4 linears take `weight_global_scale.max()`, NVFP4 MoE layers the gate's scale for both
/// halves of w13 (sglang's weight-only MoE refuses unequal ones), FP8 per-tensor linears and MoE
/// layers requantize every shard with the max scale. The groups:
///   - `fused_name` of the config's packed mapping, else the engines' qkv_proj and gate_up_proj
///     (so `...experts.E.gate_proj`/`up_proj` -> `...experts.E.gate_up_proj` as well);
///   - an MoE expert's gate/up whatever the mapping says: `...experts.E.{gate_proj,up_proj}`
///     -> `...experts.E.w13` (the engines' FusedMoE always fuses them), and every `w1`/`w3` pair
///     (Mixtral's expert names, InternLM2's MLP) -> `parent.w13`;
///   - DeepSeek MLA's `q_a_proj`/`kv_a_proj_with_mqa` -> `parent.fused_qkv_a_proj` (vLLM).
/// llm-compressor fuses the same groups (its FUSED_LAYER_NAMES: gate/up, q/k/v, q_a/kv_a, w1/w3);
/// docs/spec/checkpoint_formats.md §0.5.
std::string scale_group_name(compiled_config const& cc, std::string const& module);

/// Product of the extents.
std::uint64_t numel_of(std::vector<std::int64_t> const& shape);

/// Lays the shard out (offsets: 4-, 2-, then 1-byte tensors, stably, so that every tensor stays
/// aligned; a header padded with spaces to a multiple of 8), then creates its file in the staged
/// output, sized to `s.total`, with the header written: the workers write the data.
/// @throws data_error when the file cannot be created, sized or written
void open_shard(staged_output& out, shard_plan& s);

/// Refuses a checkpoint that is quantized already: its tensors (GPTQ/AWQ `qweight`, FP8
/// weights with scales, NVFP4/MXFP4 blocks, any F8 tensor) or its config.json's
/// `quantization_config`. @throws data_error naming the first tensors (and how many more).
void refuse_quantized_input(qtl::io::safetensors_checkpoint const& ckpt, nlohmann::ordered_json const& model_config,
                            std::filesystem::path const& config_path);

/// Lets the kernel drop the (clean, file-backed) pages of the range `t` covers.
void release(tensor_info const& t);

/// A small file of the staged output, written whole and flushed.
void small_file(staged_output& out, std::string const& name, std::string const& text);

/// Copies the regular file `from` into the staged output as `name`, reading it to its end.
/// @throws data_error naming `from` when it is not a regular file or cannot be read whole.
void copy_extra_file(std::filesystem::path const& from, staged_output& out, std::string const& name);

/// Writes `model.safetensors.index.json`: each tensor of `shards` to its shard's file name,
/// `total_size` the bytes of their data (headers not counted). A shard without tensors adds
/// nothing (`qtl convert` does not write those files).
void write_shard_index(staged_output& out, std::vector<shard_plan> const& shards);

/// Copies the input folder's other files (tokenizer, generation_config.json, ...) into the staged
/// output with `copy_extra_file`: not the checkpoint's own (the shards of `shards`, any
/// `*.safetensors` or index, config.json, quantize_config.json, hf_quant_config.json), hidden files
/// or folders. Nothing when `in_path` is a file.
void copy_input_extras(std::filesystem::path const& in_path, staged_output& out, std::vector<shard_plan> const& shards);

/// "1.5 MiB", "2.00 GiB", "12 B"
std::string human_bytes(std::uint64_t b);

}  // namespace qtl::tool
