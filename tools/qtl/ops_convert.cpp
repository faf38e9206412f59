// qtl op for the load-time converters (qtl/convert.hpp). Weights are [N,K] or [E,N,K] (E experts,
// converted one matrix at a time); block scales [ceil(N/BN),ceil(K/BK)] or [E,...].
//
//   block-quant-dequant   --dtype bf16|f32 [--block-size BN,BK]
//                         weight F8_E4M3, weight_scale_inv F32 -> weight BF16|F32
//   requant-weight-ue8m0  --recipe sglang|sglang-legacy|vllm [--canonical]
//                         weight F8_E4M3, weight_scale_inv F32 (128x128 blocks)
//                         -> weight F8_E4M3, weight_scale_inv F32 powers of two
//   deepgemm-pack-ue8m0   --mn N      weight_scale_inv F32 [ceil(N/128),kb] ([E,..]) -> I32 [P,A] ([E,P,A])
//   deepgemm-unpack-ue8m0 --k-blocks kb   weight_scale_inv I32 [P,A] ([E,P,A]) -> F32 [ceil(A/128),kb]
//   fp8-block-to-mxfp4    [--block-size BN,BK]   weight F8_E4M3, weight_scale_inv F32
//                         -> weight U8 [..,K/2], weight_scale U8 [..,K/32] (E8M0)
//   fp8-block-to-nvfp4    [--block-size BN,BK]   weight F8_E4M3, weight_scale_inv F32 [, global_scale F32 0-dim]
//                         -> weight U8 [..,K/2], weight_scale F8_E4M3 [..,K/16], global_scale F32 0-dim
//                         (one global scale for the whole tensor: [2,N,K] is w1 and w3 sharing it)
//   per-block-cast-to-fp8 [--block-size BN,BK] [--ue8m0 bits|log2]   weight F32|F16|BF16
//                         -> weight F8_E4M3, weight_scale_inv F32
//   cast-e2m1fn-to-e4m3fn weight I8|U8 [..,N,K/2] (MXFP4 codes), scale F8_E8M0|U8 [..,N,K/32]
//                         -> weight F8_E4M3 [..,N,K], scale F8_E8M0 [..,ceil(N/128),ceil(K/128)]
//                         (DeepSeek-V4's lossless cast; a block it cannot cast exactly is refused)
//   deepgemm-post-process-e8m0 [--bmm-batch B]   weight F8_E4M3 [N,K] ([E,N,K]), scale F8_E8M0|U8
//                         [ceil(N/128),ceil(K/128)] ([E,..]) -> weight unchanged ([B,N/B,K] with B),
//                         scale I32 [P,A] ([E,P,A], [B,P,A]): vLLM's DeepGEMM packing of E8M0 scales
//
// The contract is test/data/golden/README.md; sizes the operation cannot take are the library's
// shape_error (exit 2).

#include <algorithm>

#include <qtl/convert.hpp>
#include <qtl/deepgemm_e8m0.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/e2m1_to_e4m3.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

namespace cv = qtl::convert;

constexpr char const* scale_name = "weight_scale_inv";

/// Adds --block-size (default 128,128) and returns where the parsed value will be.
std::shared_ptr<std::string> add_block_flag(CLI::App& cmd) {
  auto block = std::make_shared<std::string>("128,128");
  cmd.add_option("--block-size", *block, "BN,BK: the rows and columns one scale covers (default 128,128)");
  return block;
}

cv::block_size parse_block(std::string const& text) {
  auto const [bn, bk] = parse_block_size(text);
  return {static_cast<int>(bn), static_cast<int>(bk)};
}

/// The G x N x K grid of a weight [N,K] or [E,N,K].
cv::block_grid grid_of(tensor_info const& w, cv::block_size b) {
  bool const experts = w.shape.size() == 3;
  return {experts ? w.shape[0] : 1, w.shape[experts ? 1 : 0], w.shape[experts ? 2 : 1], b};
}

/// The shape of the block scales of `g`, with the weight's rank.
std::vector<std::int64_t> scale_shape(cv::block_grid const& g, bool experts) {
  return experts ? shape_of(g.groups, g.n_blocks(), g.k_blocks()) : shape_of(g.n_blocks(), g.k_blocks());
}

/// The weight and its block scales, checked against each other.
struct fp8_block_input {
  tensor_info const* weight;
  tensor_info const* scale;
  cv::block_grid grid;
};

fp8_block_input read_fp8_block(op_io& io, cv::block_size b) {
  auto const& w = io.tensor("weight", {dtype::F8_E4M3}, {2, 3});
  auto const& s = io.tensor(scale_name, {dtype::F32}, {2, 3});
  cv::block_grid const g = grid_of(w, b);
  auto const want = scale_shape(g, w.shape.size() == 3);
  if (s.shape != want) {
    throw data_error(io.where(scale_name) + " has shape " + qtl::io::shape_string(s.shape) + "; weight " +
                     qtl::io::shape_string(w.shape) + " in " + std::to_string(b.n) + "x" + std::to_string(b.k) +
                     " blocks needs " + qtl::io::shape_string(want));
  }
  return {&w, &s, g};
}

/// A negative block scale is requantized as the engines do (their dequant keeps its sign: the codes
/// change sign and the new scale is positive); a checkpoint's scales are positive, so say so.
void warn_negative_scales(op_io const& io, std::span<float const> scales) {
  auto const first = std::find_if(scales.begin(), scales.end(), [](float v) { return v < 0; });
  if (first != scales.end()) {
    auto const n = std::count_if(first, scales.end(), [](float v) { return v < 0; });
    warn(io.where(scale_name) + " holds " + std::to_string(n) + " negative scale" + (n == 1 ? "" : "s") +
         " (the first, element " + std::to_string(first - scales.begin()) + ", is " + float_text(*first) +
         "): requantized as the engine does, the dequantized values kept: their codes change sign, their new "
         "scales are positive");
  }
}

std::span<std::uint8_t const> codes(tensor_info const& t) {
  return {reinterpret_cast<std::uint8_t const*>(t.bytes.data()), t.bytes.size()};
}

op_spec block_quant_dequant_op() {
  return {"block-quant-dequant",
          "FP8 block weight (weight, weight_scale_inv) -> BF16 or F32: fl(e4m3(q)*s) in float32, then one "
          "rounding (sglang block_quant_dequant)",
          [](CLI::App& cmd) -> op_runner {
            auto type = std::make_shared<std::string>();
            cmd.add_option("--dtype", *type, "bf16 or f32")->required()->check(CLI::IsMember({"bf16", "f32"}));
            auto block = add_block_flag(cmd);
            return [type, block](op_io& io) {
              auto const in = read_fp8_block(io, parse_block(*block));
              typed_tensor<float> const s(*in.scale);
              std::span<float const> const sv(s.data(), static_cast<std::size_t>(s.size()));
              auto const n = static_cast<std::size_t>(in.grid.elements());
              if (*type == "bf16") {
                std::vector<bfloat16_t> out(n);
                cv::block_quant_dequant<bfloat16_t>(codes(*in.weight), sv, in.grid, out);
                io.emit("weight", dtype::BF16, in.weight->shape, std::move(out));
              } else {
                std::vector<float> out(n);
                cv::block_quant_dequant<float>(codes(*in.weight), sv, in.grid, out);
                io.emit("weight", dtype::F32, in.weight->shape, std::move(out));
              }
            };
          }};
}

op_spec requant_op() {
  return {"requant-weight-ue8m0",
          "FP8 block weight -> FP8 block weight with power-of-two scales, as an engine does at load "
          "(sglang: bf16 dequant, bits rule; vllm: f32 dequant, log2 rule); --canonical: the fixed point",
          [](CLI::App& cmd) -> op_runner {
            auto recipe = std::make_shared<std::string>();
            auto canonical = std::make_shared<bool>(false);
            cmd.add_option("--recipe", *recipe, "sglang (bf16 dequant, bits rule), sglang-legacy (bf16, log2 rule: "
                                                "sglang up to 6082c49) or vllm (f32, log2 rule)")
                ->required()
                ->check(one_of_names<cv::recipes>());
            cmd.add_flag("--canonical", *canonical,
                         "apply the requant twice: what the engine holds after its own load-time requant");
            return [recipe, canonical](op_io& io) {
              auto const in = read_fp8_block(io, cv::block_size{128, 128});
              typed_tensor<float> const s(*in.scale);
              std::span<float const> const sv(s.data(), static_cast<std::size_t>(s.size()));
              warn_negative_scales(io, sv);
              std::vector<std::uint8_t> q(static_cast<std::size_t>(in.grid.elements()));
              std::vector<float> sf(static_cast<std::size_t>(in.grid.scales()));
              qtl::dispatch_name<cv::recipes>("--recipe", *recipe, [&]<class R>() {
                if (*canonical) {
                  cv::requant_weight_ue8m0_canonical<R>(codes(*in.weight), sv, in.grid.groups, in.grid.n, in.grid.k, q, sf);
                } else {
                  cv::requant_weight_ue8m0<R>(codes(*in.weight), sv, in.grid.groups, in.grid.n, in.grid.k, q, sf);
                }
              });
              io.emit("weight", dtype::F8_E4M3, in.weight->shape, std::move(q));
              io.emit(scale_name, dtype::F32, in.scale->shape, std::move(sf));
            };
          }};
}

op_spec pack_op() {
  return {"deepgemm-pack-ue8m0",
          "power-of-two block scales [ceil(N/128),kb] -> DeepGEMM's MN-major packed UE8M0 int32 storage [P,A] "
          "(P = ceil(kb/4), A = N rounded up to 4)",
          [](CLI::App& cmd) -> op_runner {
            auto mn = std::make_shared<std::int64_t>(0);
            cmd.add_option("--mn", *mn, "N, the rows the scales are broadcast to")->required();
            return [mn](op_io& io) {
              auto const& t = io.tensor(scale_name, {dtype::F32}, {2, 3});
              bool const experts = t.shape.size() == 3;
              std::int64_t const groups = experts ? t.shape[0] : 1;
              std::int64_t const rows = t.shape[experts ? 1 : 0];
              std::int64_t const kb = t.shape[experts ? 2 : 1];
              if (*mn < 1) {
                throw usage_error("--mn " + std::to_string(*mn) + ": a positive row count");
              }
              auto const l = cv::deepgemm_layout(groups, *mn, kb);
              if (rows != l.scale_rows()) {
                throw data_error(io.where(scale_name) + " has " + std::to_string(rows) + " block rows; --mn " +
                                 std::to_string(*mn) + " needs ceil(N/128) = " + std::to_string(l.scale_rows()));
              }
              typed_tensor<float> const s(t);
              std::vector<std::int32_t> out(static_cast<std::size_t>(l.words()));
              cv::deepgemm_pack_ue8m0(std::span<float const>(s.data(), static_cast<std::size_t>(s.size())), l, out);
              io.emit(scale_name, dtype::I32,
                      experts ? shape_of(groups, l.packed_k(), l.aligned_mn()) : shape_of(l.packed_k(), l.aligned_mn()),
                      std::move(out));
            };
          }};
}

op_spec unpack_op() {
  return {"deepgemm-unpack-ue8m0",
          "DeepGEMM packed UE8M0 int32 storage [P,A] -> block scales F32 [ceil(A/128),kb] (byte b -> 2^(b-127), "
          "0 -> 0.0, 255 -> Inf)",
          [](CLI::App& cmd) -> op_runner {
            auto kb = std::make_shared<std::int64_t>(0);
            cmd.add_option("--k-blocks", *kb, "kb, the K scale blocks (4P-3 <= kb <= 4P)")->required();
            return [kb](op_io& io) {
              auto const& t = io.tensor(scale_name, {dtype::I32}, {2, 3});
              bool const experts = t.shape.size() == 3;
              std::int64_t const groups = experts ? t.shape[0] : 1;
              std::int64_t const P = t.shape[experts ? 1 : 0];
              std::int64_t const A = t.shape[experts ? 2 : 1];
              if (P >= 1 && (*kb < 4 * P - 3 || *kb > 4 * P)) {
                throw usage_error("--k-blocks " + std::to_string(*kb) + ": " + io.where(scale_name) + " has P = " +
                                  std::to_string(P) + " packed words per row, so 4P-3 <= kb <= 4P");
              }
              std::int64_t const rows = (A + 127) / 128;
              typed_tensor<std::int32_t> const w(t);
              std::vector<float> out(static_cast<std::size_t>(groups * rows * *kb));
              cv::deepgemm_unpack_ue8m0(std::span<std::int32_t const>(w.data(), static_cast<std::size_t>(w.size())),
                                        groups, P, A, *kb, out);
              io.emit(scale_name, dtype::F32, experts ? shape_of(groups, rows, *kb) : shape_of(rows, *kb),
                      std::move(out));
            };
          }};
}

op_spec mxfp4_op() {
  return {"fp8-block-to-mxfp4",
          "FP8 block weight -> MXFP4 as sglang does it (bf16 dequant, then ModelOpt's MXFP4QuantizeUtil: bf16 "
          "log2 exponent, ties toward zero, zeros as 0x8)",
          [](CLI::App& cmd) -> op_runner {
            auto block = add_block_flag(cmd);
            return [block](op_io& io) {
              auto const in = read_fp8_block(io, parse_block(*block));
              if (in.grid.k % cv::mxfp4_block != 0) {
                throw data_error(io.where("weight") + " has K = " + std::to_string(in.grid.k) +
                                 " columns, not a multiple of the MXFP4 block of 32");
              }
              typed_tensor<float> const s(*in.scale);
              auto const n = static_cast<std::size_t>(in.grid.elements());
              std::vector<std::uint8_t> packed(n / 2);
              std::vector<std::uint8_t> scales(n / cv::mxfp4_block);
              cv::fp8_block_to_mxfp4(codes(*in.weight), std::span<float const>(s.data(), static_cast<std::size_t>(s.size())),
                                     in.grid, packed, scales);
              auto shape = in.weight->shape;
              shape.back() = in.grid.k / 2;
              io.emit("weight", dtype::U8, shape, std::move(packed));
              shape.back() = in.grid.k / cv::mxfp4_block;
              io.emit("weight_scale", dtype::U8, shape, std::move(scales));
            };
          }};
}

op_spec nvfp4_op() {
  return {"fp8-block-to-nvfp4",
          "FP8 block weight -> NVFP4, QTL's definition (not verified against flashinfer): bf16 dequant, then "
          "nvfp4-quant with global scale fl(1/fl(amax/2688)) over the whole tensor (or the given global_scale)",
          [](CLI::App& cmd) -> op_runner {
            auto block = add_block_flag(cmd);
            return [block](op_io& io) {
              auto const in = read_fp8_block(io, parse_block(*block));
              if (in.grid.k % 16 != 0) {
                throw data_error(io.where("weight") + " has K = " + std::to_string(in.grid.k) +
                                 " columns, not a multiple of the NVFP4 block of 16");
              }
              typed_tensor<float> const s(*in.scale);
              std::span<float const> const sv(s.data(), static_cast<std::size_t>(s.size()));
              auto const* g = io.optional_tensor("global_scale", {dtype::F32}, {0});
              float const gs = g != nullptr ? scalar_value(*g)
                                            : cv::nvfp4_shared_global_scale(
                                                  cv::fp8_block_bf16_amax(codes(*in.weight), sv, in.grid));
              auto const n = static_cast<std::size_t>(in.grid.elements());
              std::vector<float4_e2m1x2_t> packed(n / 2);
              std::vector<float8_e4m3fn_t> scales(n / 16);
              cv::fp8_block_to_nvfp4(codes(*in.weight), sv, in.grid, gs, packed, scales);
              auto shape = in.weight->shape;
              shape.back() = in.grid.k / 2;
              io.emit("weight", dtype::U8, shape, std::move(packed));
              shape.back() = in.grid.k / 16;
              io.emit("weight_scale", dtype::F8_E4M3, shape, std::move(scales));
              io.emit("global_scale", dtype::F32, {}, std::vector<float>{gs});
            };
          }};
}

op_spec cast_op() {
  return {"per-block-cast-to-fp8",
          "F32|F16|BF16 weight [N,K] -> FP8 block weight: per block sf = max(amax, 1e-4)/448, rounded up to a "
          "power of two with --ue8m0 bits|log2, q = e4m3(x * (1/sf))",
          [](CLI::App& cmd) -> op_runner {
            auto block = add_block_flag(cmd);
            auto rule = std::make_shared<std::string>();
            cmd.add_option("--ue8m0", *rule, "bits or log2: the power-of-two rule (absent: scales not rounded)")
                ->check(CLI::IsMember({"bits", "log2"}));
            return [block, rule](op_io& io) {
              auto const& t = io.tensor("weight", float_types, {2, 3});
              cv::block_grid const g = grid_of(t, parse_block(*block));
              std::vector<float> x(static_cast<std::size_t>(g.elements()));
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                for (std::size_t i = 0; i < x.size(); ++i) {
                  x[i] = qtl::to_float(in.data()[i]);
                }
              });
              std::vector<std::uint8_t> q(x.size());
              std::vector<float> sf(static_cast<std::size_t>(g.scales()));
              cv::pow2_rule const r = rule->empty() ? cv::pow2_rule::none
                                      : *rule == "bits" ? cv::pow2_rule::bits
                                                        : cv::pow2_rule::log2;
              cv::per_block_cast_to_fp8(r, x, g, q, sf);
              io.emit("weight", dtype::F8_E4M3, t.shape, std::move(q));
              io.emit(scale_name, dtype::F32, scale_shape(g, t.shape.size() == 3), std::move(sf));
            };
          }};
}

op_spec e2m1_cast_op() {
  return {"cast-e2m1fn-to-e4m3fn",
          "DeepSeek-V4 MXFP4 weight -> FP8 128x128 blocks, losslessly, as sglang's cast_e2m1fn_to_e4m3fn: block "
          "scale = largest 1x32 scale / 2^6, elements e2m1 * 2^(scale - block scale); a block that e4m3 cannot hold "
          "exactly is refused",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              auto const& w = io.tensor("weight", {dtype::I8, dtype::U8}, {2, 3});
              auto const& s = io.tensor("scale", {dtype::F8_E8M0, dtype::U8}, {2, 3});
              bool const experts = w.shape.size() == 3;
              cv::block_grid const g{
                  experts ? w.shape[0] : 1, w.shape[experts ? 1 : 0], w.shape[experts ? 2 : 1] * 2, {128, 128}};
              auto want = w.shape;
              want.back() = g.k / cv::e2m1_scale_group;
              if (g.k % cv::e2m1_scale_group != 0 || s.shape != want) {
                throw data_error(io.where("scale") + " has shape " + qtl::io::shape_string(s.shape) + "; weight " +
                                 qtl::io::shape_string(w.shape) + " (K = " + std::to_string(g.k) +
                                 ", a multiple of 32) needs one scale per 32 elements of a row");
              }
              std::vector<std::uint8_t> q(static_cast<std::size_t>(g.elements()));
              std::vector<std::uint8_t> sf(static_cast<std::size_t>(g.scales()));
              cv::cast_e2m1fn_to_e4m3fn(codes(w), codes(s), g, q, sf);
              auto shape = w.shape;
              shape.back() = g.k;
              io.emit("weight", dtype::F8_E4M3, shape, std::move(q));
              io.emit("scale", dtype::F8_E8M0, scale_shape(g, experts), std::move(sf));
            };
          }};
}

op_spec dg_e8m0_op() {
  return {"deepgemm-post-process-e8m0",
          "FP8 block weight with E8M0 scales -> DeepGEMM's packed int32 scales, no requant, as vLLM's "
          "deepgemm_post_process_fp8_weight_block (--bmm-batch: its is_bmm view of a 2-D weight)",
          [](CLI::App& cmd) -> op_runner {
            auto bmm = std::make_shared<std::int64_t>(0);
            cmd.add_option("--bmm-batch", *bmm, "B: view the 2-D weight as B matrices [N/B, K] (wo_a); 0: no view");
            return [bmm](op_io& io) {
              auto const& w = io.tensor("weight", {dtype::F8_E4M3}, {2, 3});
              auto const& s = io.tensor("scale", {dtype::F8_E8M0, dtype::U8}, {2, 3});
              bool const experts = w.shape.size() == 3;
              if (*bmm < 0 || (*bmm > 0 && experts)) {
                throw usage_error("--bmm-batch " + std::to_string(*bmm) + ": a positive batch, of a 2-D weight");
              }
              auto const g = grid_of(w, {128, 128});
              if (s.shape != scale_shape(g, experts)) {
                throw data_error(io.where("scale") + " has shape " + qtl::io::shape_string(s.shape) + "; weight " +
                                 qtl::io::shape_string(w.shape) + " has 128x128 blocks " +
                                 qtl::io::shape_string(scale_shape(g, experts)));
              }
              auto const l = cv::deepgemm_post_process_layout(g.groups, g.n, g.k, *bmm);
              std::vector<std::int32_t> out(static_cast<std::size_t>(l.words()));
              cv::deepgemm_post_process_e8m0(codes(s), l, out);
              auto const q = codes(w);
              io.emit("weight", dtype::F8_E4M3, *bmm > 0 ? shape_of(*bmm, g.n / *bmm, g.k) : w.shape,
                      std::vector<std::uint8_t>(q.begin(), q.end()));
              io.emit("scale", dtype::I32,
                      experts || *bmm > 0 ? shape_of(l.groups, l.packed_k(), l.aligned_mn())
                                          : shape_of(l.packed_k(), l.aligned_mn()),
                      std::move(out));
            };
          }};
}

}  // namespace

std::vector<op_spec> convert_ops() {
  return {block_quant_dequant_op(), requant_op(), pack_op(), unpack_op(), mxfp4_op(), nvfp4_op(), cast_op(),
          e2m1_cast_op(), dg_e8m0_op()};
}

}  // namespace qtl::tool
