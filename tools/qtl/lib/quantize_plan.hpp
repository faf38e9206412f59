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
#include <array>
#include <string_view>
#include <span>
#include <string>
#include <vector>

#include <qtl/io/safetensors.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/scalar_type.hpp>

#include "../staged_output.hpp"
#include "expert_stacks.hpp"

namespace qtl::tool {

using qtl::io::dtype;
using qtl::io::tensor_info;

/// The formats `qtl quantize --format` writes (and a recipe group's `format` takes, gptq aside).
inline constexpr std::array<std::string_view, 7> quantize_formats = {"gptq",  "fp8",   "w4a16", "w8a16",
                                                                      "nvfp4", "mxfp4", "mxfp8"};

/// What a job does with its input tensor.
enum class job_kind { copy, gptq, fp8, ct_pack, nvfp4, mxfp4, mxfp8 };
/// How FP8 weights are scaled.
enum class fp8_scheme { tensor, channel, block };

/// A tensor of an output shard.
struct out_tensor {
  std::string name;
  dtype type;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  ///< absolute offset in the shard file (set by lay_out)
  std::uint64_t bytes = 0;
  std::string source{};  ///< the input tensor it is written for (named when two outputs share a name)
};

/// One input tensor and the output tensors it becomes.
struct job {
  job_kind kind = job_kind::copy;
  tensor_info const* in = nullptr;
  std::size_t shard = 0;          ///< output shard
  std::vector<std::size_t> outs;  ///< indices into the shard's tensors, in the writer's order
  std::string module;             ///< quantized layers: the module name
  // A tensor cut out of a 3-D expert stack (expert_stacks.hpp): `in` is `cut_in`, shaped as the
  // per-expert tensor ([N, K], a bias [N]), its bytes the expert's block of `stack` (released
  // after the job). When the cut is strided, `cut` says where its elements lie and the writers
  // read them gathered (`write_job`); a contiguous cut is read in place.
  std::shared_ptr<tensor_info const> cut_in;
  tensor_info const* stack = nullptr;
  std::optional<stack_part> cut;
  // GPTQ
  int bits = 4;
  std::int64_t group_rows = 128;         ///< rows per group (K when channelwise)
  std::int64_t config_group_size = 128;  ///< as the config says it (-1 for channelwise)
  bool sym = true;
  scalar_type weight_type = uint4b8;     ///< the codes' type: integer_weight_type(bits, sym)
  bool allow_nonfinite = false;
  bool ct_rules = false;  ///< fp8 ct-block: compressed-tensors' zero-scale rule (tensor_writers.hpp)
  fp8_scheme scheme = fp8_scheme::channel;  ///< fp8: how its weights are scaled
  std::size_t group = 0;  ///< the recipe group it was planned by (0 for a --format run)
  bool modelopt = false;  ///< NVFP4 in ModelOpt's names (--recipe's modelopt form): weight_scale_2
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

/// Whether the output is written as shards with an index: the input is an index, a folder holding
/// one, or more than one file.
bool sharded_output(qtl::io::safetensors_checkpoint const& ckpt, std::filesystem::path const& in_path);

/// The output shards, one per input shard, without tensors yet: named as the input's shards when
/// `sharded`, else `model.safetensors` (the name `from_pretrained` looks for, whatever the input
/// file's name).
std::vector<shard_plan> plan_shards(qtl::io::safetensors_checkpoint const& ckpt, bool sharded);

/// Creates the output files of the planned shards in the staged output, each sized to its total
/// with its header written (the workers write the data). A shard without tensors gets no file
/// (`file` stays null). Each shard is laid out first: offsets 4-, 2-, then 1-byte tensors, stably,
/// so that every tensor stays aligned; a header padded with spaces to a multiple of 8.
/// @throws data_error naming both input tensors when two outputs, in any shards, share a name (an
///         input tensor named as another's output: `L.weight_scale` beside an FP8 `L.weight`), and
///         when a file cannot be created, sized or written
void open_shards(staged_output& out, std::vector<shard_plan>& shards);

/// Refuses a checkpoint that is quantized already: its tensors (GPTQ/AWQ `qweight`, FP8
/// weights with scales, NVFP4/MXFP4 blocks, any F8 tensor) or its config.json's
/// `quantization_config`. @throws data_error naming the first tensors (and how many more).
void refuse_quantized_input(qtl::io::safetensors_checkpoint const& ckpt, nlohmann::ordered_json const& model_config,
                            std::filesystem::path const& config_path);

/// Lets the kernel drop the (clean, file-backed) pages of the input range `bytes` (the pages it
/// covers whole).
void release(std::span<std::byte const> bytes);

/// Writes the input bytes `bytes` unchanged at `offset` of `file`, in 64 MiB slices with the input
/// pages released behind, so that a large tensor is never resident whole.
void copy_released(std::span<std::byte const> bytes, output_file& file, std::uint64_t offset);

/// A small file of the staged output, written whole and flushed.
void small_file(staged_output& out, std::string const& name, std::string const& text);

/// Copies the regular file `from` into the staged output as `name`, reading it to its end.
/// @throws data_error naming `from` when it is not a regular file or cannot be read whole.
void copy_extra_file(std::filesystem::path const& from, staged_output& out, std::string const& name);

/// Writes `model.safetensors.index.json`: each tensor of `shards` to its shard's file name,
/// `total_size` the bytes of their data (headers not counted). A shard without tensors adds
/// nothing (`qtl convert` does not write those files).
void write_shard_index(staged_output& out, std::vector<shard_plan> const& shards);

/// Why the entry `path` of the input folder is not a side file the output needs, or "" when it is
/// one and is copied. The rule, in order (`path` is followed through symbolic links):
///   not copied, quietly: the checkpoint's own files, which the run writes itself (`*.safetensors`,
///     indexes, config.json, quantize_config.json, hf_quant_config.json), hidden entries, folders;
///   not copied, with a warning (the returned reason): what is not a regular file (a FIFO, a
///     socket, a device, a symbolic link to a missing file), weight files of other formats
///     (`other_weight_file`: unquantized weights never travel into a quantized output), and
///     files over `max_side_file_bytes` (no tokenizer or config is that large);
///   copied: every other regular file (tokenizer files, chat template, generation_config.json,
///     README, licence, custom modelling code).
/// `quiet` is set for the quiet cases.
std::string side_file_skip_reason(std::filesystem::path const& path, bool& quiet);

/// The largest side file copied: 256 MiB.
inline constexpr std::uint64_t max_side_file_bytes = std::uint64_t{256} << 20;

/// Whether `name` is a weight file of a format other than safetensors, by its extension (any
/// case): .bin (pytorch_model*.bin), .pt, .pth, .ckpt, .gguf, .ggml, .h5, .hdf5, .msgpack, .onnx,
/// .onnx_data, .tflite, .pb, .ot, .pkl, .npz, .nemo, .pdparams.
bool other_weight_file(std::string_view name);

/// Copies the side files of the input's folder (the folder itself, or the folder holding the input
/// file or index) into the staged output with `copy_extra_file`, by `side_file_skip_reason`.
/// Returns one warning line for each entry skipped with a reason, prefixed "qtl COMMAND: warning: ".
std::string copy_input_extras(std::filesystem::path const& in_path, staged_output& out, std::string_view command);

/// "1.5 MiB", "2.00 GiB", "12 B"
std::string human_bytes(std::uint64_t b);

}  // namespace qtl::tool
