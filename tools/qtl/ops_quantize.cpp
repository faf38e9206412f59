// Group quantization ops (qtl/quantize.hpp). W is the dtype of w (F32, F16 or BF16).
//
//   quantize-weights --type T --group-size N|-1|none [--zero-points] [--ref-zero-points-after-scales]
//       w W [K,N] -> w_ref W (F32 with none), w_q I32 [K,N] (bias added), w_s W [K/G,N] (not with
//       none), w_zp I32 [K/G,N] (only with --zero-points)
//   gptq-quantize-weights --type uint4b8|uint8b128 --group-size N [--act-order [--seed S]]
//       w W [K,N], perm I64 [K] (only with --act-order; without it a --seed permutation)
//       -> w_ref W, w_q I32, w_s W, g_idx I32 [K] and rand_perm I64 [K] ([0] without act-order)
//   permute-rows --group-size N [--seed S]   q_w I32 [K,N], w_ref W [K,N], perm I64 [K] (or --seed)
//       -> w_ref, q_w, g_idx I32 [K], rand_perm I64 [K]
//   sort-weights   q_w I32 [K,N], g_idx I32 [K] -> q_w, g_idx, sort_indices I32 [K] (stable)
//   convert-to-channelwise --logical-widths a,b,c   weight_scale F32 [S] or []
//       -> weight_scale F32 [a+b+c, 1]   (a+b+c <= 2^24; scales past the shards: ignored, as the
//       reference, with a warning)
//   ct-pack-quantize --bits 4|8 --group-size N|-1 [--asym] [--allow-nonfinite]
//   gptq-checkpoint-quantize --bits 4|8 --group-size N [--asym] [--allow-nonfinite]
//       weight W [N,K] -> weight_packed I32 [N,K/pf], weight_scale W [N,G] (G = K/N, 1 for -1),
//       zero_point I32 [N,G] (zp + 2^(bits-1), unpacked; only with --asym): compressed-tensors
//       pack-quantized (qtl/ct_quantize.hpp)
//   ct-nvfp4-quantize   weight W [N,K], global_scale F32 [] (optional: else ct_nvfp4_global_scale of
//       the weight's amax) -> weight_packed U8 [N,K/2], weight_scale F8_E4M3 [N,K/16],
//       weight_global_scale F32 [1]: compressed-tensors nvfp4-pack-quantized (qtl/ct_fp4.hpp)
//   ct-mxfp4-quantize [--allow-nonfinite]   weight W [N,K] -> weight_packed U8 [N,K/2],
//       weight_scale U8 [N,K/32]: compressed-tensors mxfp4-pack-quantized (qtl/ct_fp4.hpp)

#include <charconv>
#include <utility>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/fp8.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/gptq_checkpoint.hpp>
#include <qtl/group_size.hpp>
#include <qtl/quantize.hpp>
#include <qtl/scalar_type.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {


/// `--type` names of the integer quantization types (CLI11 checks membership), and the dispatch to
/// `scalar_constant` through qtl/dispatch.hpp over the same set.
std::vector<std::string> const quant_type_names = {"int4",    "uint4",   "int8",    "uint8",
                                                   "uint2b2", "uint3b4", "uint4b8", "uint8b128"};

template <class F>
void with_quant_type(std::string const& name, F&& f) {
  qtl::dispatch_scalar_type<qtl::int4, qtl::uint4, qtl::int8, qtl::uint8, qtl::uint2b2, qtl::uint3b4, qtl::uint4b8,
                            qtl::uint8b128>(name, std::forward<F>(f));
}

/// `--group-size N|-1|none`: nullopt for none. CLI11 checks the syntax (exit code 1).
std::optional<index_t> parse_op_group_size(std::string const& s) {
  if (s == "none") {
    return std::nullopt;
  }
  return parse_group_size(s);
}

std::string check_group_size(std::string const& s) {
  try {
    parse_op_group_size(s);
    return "";
  } catch (usage_error const& e) {
    return e.what();
  }
}

/// The rows `convert-to-channelwise` writes at most (a 64 MiB output): more than any weight's, and
/// the op has no weight to measure the widths against.
constexpr std::int64_t max_channelwise_rows = std::int64_t{1} << 24;

/// Rows of the scale tensors: K / effective group size (-1 or >= K: one group).
index_t group_rows(index_t k, index_t g) { return qtl::is_channelwise_group_size(g, k) ? 1 : k / g; }

op_spec quantize_weights_op() {
  return {"quantize-weights",
          "quantize float weights w [K,N] to integer codes of --type per group of --group-size "
          "rows: w_ref, w_q, w_s (and w_zp with --zero-points)",
          [](CLI::App& cmd) -> op_runner {
            struct flags {
              std::string type, group_size;
              bool zero_points = false, zp_after = false;
            };
            auto f = std::make_shared<flags>();
            cmd.add_option("--type", f->type, "integer quantization type")
                ->required()
                ->check(CLI::IsMember(quant_type_names));
            cmd.add_option("--group-size", f->group_size, "rows per group: N, -1 (one group) or none")
                ->required()
                ->check(check_group_size, "N|-1|none");
            cmd.add_flag("--zero-points", f->zero_points, "asymmetric, with per-group zero points");
            cmd.add_flag("--ref-zero-points-after-scales", f->zp_after,
                         "w_ref = q*s - zp*s (Machete's order) instead of (q - zp)*s");
            return [f](op_io& io) {
              auto const& t = io.tensor("w", float_types, {2});
              auto const group = parse_op_group_size(f->group_size);
              qtl::quantize_options const opt{f->zero_points, f->zp_after};
              with_quant_type(f->type, [&]<scalar_type Q>(scalar_constant<Q>) {
                with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                  typed_tensor<T> const w(t);
                  index_t const k = w.dim(0);
                  index_t const n = w.dim(1);
                  std::vector<std::int32_t> w_q(static_cast<std::size_t>(k * n));
                  if (!group) {
                    std::vector<float> w_ref(static_cast<std::size_t>(k * n));
                    qtl::quantize_weights<Q>(
                        w.view2(), std::nullopt,
                        qtl::quantize_outputs<float>{make_view(w_ref.data(), k, n),
                                                     make_view(w_q.data(), k, n), {}, {}},
                        opt);
                    io.emit("w_ref", dtype::F32, shape_of(k, n), std::move(w_ref));
                    io.emit("w_q", dtype::I32, shape_of(k, n), std::move(w_q));
                    return;
                  }
                  index_t const g = k == 0 ? 0 : group_rows(k, *group);
                  std::vector<T> w_ref(static_cast<std::size_t>(k * n));
                  std::vector<T> w_s(static_cast<std::size_t>(g * n));
                  std::vector<std::int32_t> w_zp(f->zero_points ? static_cast<std::size_t>(g * n) : 0);
                  qtl::quantize_weights<Q>(
                      w.view2(), *group,
                      qtl::quantize_outputs<T>{make_view(w_ref.data(), k, n),
                                               make_view(w_q.data(), k, n),
                                               make_view(w_s.data(), g, n),
                                               make_view(w_zp.data(), f->zero_points ? g : 0, n)},
                      opt);
                  io.emit("w_ref", t.type, shape_of(k, n), std::move(w_ref));
                  io.emit("w_q", dtype::I32, shape_of(k, n), std::move(w_q));
                  io.emit("w_s", t.type, shape_of(g, n), std::move(w_s));
                  if (f->zero_points) {
                    io.emit("w_zp", dtype::I32, shape_of(g, n), std::move(w_zp));
                  }
                });
              });
            };
          }};
}

op_spec gptq_op() {
  return {"gptq-quantize-weights",
          "GPTQ's symmetric quantization of w [K,N]; with --act-order the rows are permuted by the "
          "file's perm (or a --seed permutation) and g_idx records each row's group",
          [](CLI::App& cmd) -> op_runner {
            struct flags {
              std::string type;
              index_t group_size = 0;
              bool act_order = false;
              std::optional<std::uint64_t> seed;
            };
            auto f = std::make_shared<flags>();
            cmd.add_option("--type", f->type, "uint4b8 or uint8b128")
                ->required()
                ->check(CLI::IsMember({"uint4b8", "uint8b128"}));
            cmd.add_option("--group-size", f->group_size, "-1, 32, 64, 128, or K")->required();
            auto* ao = cmd.add_flag("--act-order", f->act_order, "permute rows (desc_act)");
            cmd.add_option("--seed", f->seed, "seed of the random permutation when the file has no perm")
                ->needs(ao);
            return [f](op_io& io) {
              if (f->act_order && f->group_size == -1) {
                throw usage_error("--act-order needs groups: --group-size -1 (channelwise) has none");
              }
              auto const& t = io.tensor("w", float_types, {2});
              auto const* perm_t = io.optional_tensor("perm", {dtype::I64}, {1});
              if (perm_t != nullptr && !f->act_order) {
                throw data_error(io.where("perm") + " is given without --act-order, which would "
                                 "ignore it");
              }
              if (f->act_order && perm_t == nullptr && !f->seed) {
                throw data_error(io.input().path().string() + ": has no tensor 'perm'; "
                                 "--act-order needs one, or --seed N for a random permutation");
              }
              std::optional<typed_tensor<std::int64_t>> perm;
              qtl::gptq_options opt;
              opt.act_order = f->act_order;
              opt.seed = f->seed.value_or(0);
              if (perm_t != nullptr) {
                perm.emplace(*perm_t);
                opt.perm = perm->view1();
              }
              with_quant_type(f->type, [&]<scalar_type Q>(scalar_constant<Q>) {
                if constexpr (qtl::is_gptq_quant_type(Q)) {
                  with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                    typed_tensor<T> const w(t);
                    index_t const k = w.dim(0);
                    index_t const n = w.dim(1);
                    index_t const g = k == 0 ? 0 : group_rows(k, f->group_size);
                    index_t const kp = f->act_order ? k : 0;
                    std::vector<T> w_ref(static_cast<std::size_t>(k * n));
                    std::vector<std::int32_t> w_q(static_cast<std::size_t>(k * n));
                    std::vector<T> w_s(static_cast<std::size_t>(g * n));
                    std::vector<std::int32_t> g_idx(static_cast<std::size_t>(kp));
                    std::vector<std::int64_t> rand_perm(static_cast<std::size_t>(kp));
                    qtl::gptq_quantize_weights<Q>(
                        w.view2(), f->group_size,
                        qtl::gptq_outputs<T>{make_view(w_ref.data(), k, n), make_view(w_q.data(), k, n),
                                             make_view(w_s.data(), g, n), make_view(g_idx.data(), kp),
                                             make_view(rand_perm.data(), kp)},
                        opt);
                    io.emit("w_ref", t.type, shape_of(k, n), std::move(w_ref));
                    io.emit("w_q", dtype::I32, shape_of(k, n), std::move(w_q));
                    io.emit("w_s", t.type, shape_of(g, n), std::move(w_s));
                    io.emit("g_idx", dtype::I32, shape_of(kp), std::move(g_idx));
                    io.emit("rand_perm", dtype::I64, shape_of(kp), std::move(rand_perm));
                  });
                } else {
                  throw usage_error("--type " + f->type + ": GPTQ takes uint4b8 or uint8b128");
                }
              });
            };
          }};
}

op_spec permute_rows_op() {
  return {"permute-rows",
          "reorder the rows of q_w and w_ref by perm (or a --seed permutation); g_idx = perm // "
          "group size",
          [](CLI::App& cmd) -> op_runner {
            auto group_size = std::make_shared<index_t>(0);
            auto seed = std::make_shared<std::optional<std::uint64_t>>();
            cmd.add_option("--group-size", *group_size, "rows per group (-1: one group)")->required();
            cmd.add_option("--seed", *seed, "seed of the random permutation when the file has no perm");
            return [group_size, seed](op_io& io) {
              auto const& q = io.tensor("q_w", {dtype::I32}, {2});
              auto const& r = io.tensor("w_ref", float_types, {2});
              auto const* perm_t = io.optional_tensor("perm", {dtype::I64}, {1});
              if (perm_t == nullptr && !seed->has_value()) {
                throw data_error(io.input().path().string() +
                                 ": has no tensor 'perm'; permute-rows needs one, or --seed N");
              }
              typed_tensor<std::int32_t> const q_w(q);
              index_t const k = q_w.dim(0);
              index_t const n = q_w.dim(1);
              std::vector<std::int64_t> perm;
              if (perm_t != nullptr) {
                perm = qtl::io::tensor_values<std::int64_t>(*perm_t);
              } else {
                perm.resize(static_cast<std::size_t>(k));
                qtl::random_permutation(**seed, make_view(perm.data(), k));
              }
              with_float_type(r.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const w_ref(r);
                std::vector<T> w_ref_out(static_cast<std::size_t>(k * n));
                std::vector<std::int32_t> q_out(static_cast<std::size_t>(k * n));
                std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
                std::vector<std::int64_t> rand_perm(static_cast<std::size_t>(k));
                qtl::permute_rows(
                    q_w.view2(), w_ref.view2(), *group_size,
                    make_view(static_cast<std::int64_t const*>(perm.data()), static_cast<index_t>(perm.size())),
                    qtl::permute_rows_outputs<T>{make_view(w_ref_out.data(), k, n), make_view(q_out.data(), k, n),
                                                 make_view(g_idx.data(), k), make_view(rand_perm.data(), k)});
                io.emit("w_ref", r.type, shape_of(k, n), std::move(w_ref_out));
                io.emit("q_w", dtype::I32, shape_of(k, n), std::move(q_out));
                io.emit("g_idx", dtype::I32, shape_of(k), std::move(g_idx));
                io.emit("rand_perm", dtype::I64, shape_of(k), std::move(rand_perm));
              });
            };
          }};
}

op_spec sort_weights_op() {
  return {"sort-weights", "order the rows of q_w by g_idx (stable): q_w, g_idx, sort_indices",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              typed_tensor<std::int32_t> const q_w(io.tensor("q_w", {dtype::I32}, {2}));
              typed_tensor<std::int32_t> const g_idx(io.tensor("g_idx", {dtype::I32}, {1}));
              index_t const k = q_w.dim(0);
              index_t const n = q_w.dim(1);
              std::vector<std::int32_t> q_out(static_cast<std::size_t>(k * n));
              std::vector<std::int32_t> g_out(static_cast<std::size_t>(k));
              std::vector<std::int32_t> order(static_cast<std::size_t>(k));
              qtl::sort_weights(q_w.view2(), g_idx.view1(),
                                qtl::sort_weights_outputs{make_view(q_out.data(), k, n),
                                                          make_view(g_out.data(), k),
                                                          make_view(order.data(), k)});
              io.emit("q_w", dtype::I32, shape_of(k, n), std::move(q_out));
              io.emit("g_idx", dtype::I32, shape_of(k), std::move(g_out));
              io.emit("sort_indices", dtype::I32, shape_of(k), std::move(order));
            };
          }};
}

op_spec convert_to_channelwise_op() {
  return {"convert-to-channelwise",
          "expand per-shard scales weight_scale [S] (or 0-dim) to one per row, [sum of "
          "--logical-widths, 1]",
          [](CLI::App& cmd) -> op_runner {
            auto widths = std::make_shared<std::string>();
            cmd.add_option("--logical-widths", *widths,
                           "rows of each shard, e.g. 16,16,9; at most " + std::to_string(max_channelwise_rows) +
                               " (2^24) in all")
                ->required();
            return [widths](op_io& io) {
              auto const lw = parse_int_list("--logical-widths", *widths);
              check_logical_widths(lw, *widths, max_channelwise_rows, "no weight has more rows; the output is a float a row");
              auto const& s = io.tensor("weight_scale", {dtype::F32}, {0, 1});
              index_t total = 0;
              for (auto w : lw) {
                total += w;
              }
              if (s.shape.size() == 1 && s.shape[0] > static_cast<std::int64_t>(lw.size())) {
                warn(io.where("weight_scale") + " holds " + std::to_string(s.shape[0]) + " scales for " +
                     std::to_string(lw.size()) + " shards: the last " +
                     std::to_string(s.shape[0] - static_cast<std::int64_t>(lw.size())) +
                     " are ignored, as in the reference's convert_to_channelwise");
              }
              std::vector<float> out(static_cast<std::size_t>(total));
              auto const ov = make_view(out.data(), total, index_t{1});
              if (s.shape.empty()) {
                qtl::convert_to_channelwise(scalar_value(s), lw, ov);
              } else {
                typed_tensor<float> const scales(s);
                qtl::convert_to_channelwise(scales.view1(), lw, ov);
              }
              io.emit("weight_scale", dtype::F32, shape_of(total, 1), std::move(out));
            };
          }};
}

op_spec gptq_checkpoint_quantize_op() {
  return {"gptq-checkpoint-quantize",
          "GPTQ checkpoint tensors of row-major weight [N,K] (groups along K): qweight [K/pf,N], "
          "F16 scales and zero points [K/gs,N]",
          [](CLI::App& cmd) -> op_runner {
            struct flags {
              qtl::gptq_checkpoint_options opt;
              bool asym = false;
            };
            auto f = std::make_shared<flags>();
            cmd.add_option("--bits", f->opt.bits, "4 or 8")->required()->check(CLI::IsMember({4, 8}));
            cmd.add_option("--group-size", f->opt.group_size, "columns per group, dividing K")->required();
            cmd.add_flag("--asym", f->asym, "GPTQ's own asymmetric quantizer (default: the reference's symmetric rule)");
            cmd.add_flag("--allow-nonfinite", f->opt.allow_nonfinite, "quantize NaN/Inf weights instead of refusing");
            return [f](op_io& io) {
              auto const& t = io.tensor("weight", float_types, {2});
              qtl::gptq_checkpoint_options opt = f->opt;
              opt.rule = f->asym ? qtl::gptq_rule::asymmetric : qtl::gptq_rule::symmetric;
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const w(t);
                index_t const n = w.dim(0);
                index_t const k = w.dim(1);
                index_t const words = k / (32 / opt.bits);
                index_t const g = opt.group_size > 0 ? k / opt.group_size : 0;
                std::vector<std::int32_t> qweight(static_cast<std::size_t>(words * n));
                std::vector<qtl::half_t> scales(static_cast<std::size_t>(g * n));
                std::vector<std::int32_t> zeros(static_cast<std::size_t>(g * n));
                qtl::gptq_checkpoint_quantize(w.view2(),
                                              {make_view(qweight.data(), words, n), make_view(scales.data(), g, n),
                                               make_view(zeros.data(), g, n)},
                                              opt);
                io.emit("qweight", dtype::I32, shape_of(words, n), std::move(qweight));
                io.emit("scales", dtype::F16, shape_of(g, n), std::move(scales));
                io.emit("zeros", dtype::I32, shape_of(g, n), std::move(zeros));
              });
            };
          }};
}

op_spec ct_pack_quantize_op() {
  return {"ct-pack-quantize",
          "compressed-tensors pack-quantized integers of weight [N,K] (groups along K): "
          "weight_packed, weight_scale (and zero_point with --asym)",
          [](CLI::App& cmd) -> op_runner {
            struct flags {
              qtl::ct_pack_options opt;
              bool asym = false;
            };
            auto f = std::make_shared<flags>();
            cmd.add_option("--bits", f->opt.bits, "4 or 8")->required()->check(CLI::IsMember({4, 8}));
            cmd.add_option("--group-size", f->opt.group_size, "columns per group, dividing K, or -1 (one per row)")
                ->required();
            cmd.add_flag("--asym", f->asym, "asymmetric, with zero points");
            cmd.add_flag("--allow-nonfinite", f->opt.allow_nonfinite, "quantize NaN/Inf weights instead of refusing");
            return [f](op_io& io) {
              auto const& t = io.tensor("weight", float_types, {2});
              qtl::ct_pack_options* opt = &f->opt;
              opt->symmetric = !f->asym;
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const w(t);
                index_t const n = w.dim(0);
                index_t const k = w.dim(1);
                index_t const g = k / qtl::ct_pack_group_size(k, *opt);  // checks the arguments first
                index_t const zn = opt->symmetric ? 0 : n;
                index_t const words = k / (32 / opt->bits);
                std::vector<std::int32_t> packed(static_cast<std::size_t>(n * words));
                std::vector<T> scales(static_cast<std::size_t>(n * g));
                std::vector<std::int32_t> zp(static_cast<std::size_t>(zn * g));
                qtl::ct_pack_quantize(w.view2(),
                                      qtl::ct_pack_outputs<T>{make_view(packed.data(), n, words),
                                                              make_view(scales.data(), n, g),
                                                              make_view(zp.data(), zn, g)},
                                      *opt);
                io.emit("weight_packed", dtype::I32, shape_of(n, words), std::move(packed));
                io.emit("weight_scale", t.type, shape_of(n, g), std::move(scales));
                if (!opt->symmetric) {
                  io.emit("zero_point", dtype::I32, shape_of(n, g), std::move(zp));
                }
              });
            };
          }};
}

/// `ct-<name>-quantize` of block format F (NVFP4 or MXFP4): the weight's codes and scales as
/// compressed-tensors' checkpoint stores them (U8 codes; E4M3 or U8 scales), NVFP4 with its
/// global scale.
template <block_format_type F>
op_spec ct_fp4_quantize_op() {
  std::string const name(qtl::name_of<F>);
  return {"ct-" + name + "-quantize",
          "compressed-tensors " + name + "-pack-quantized of weight [N,K]: weight_packed, weight_scale" +
              (F::has_global_scale ? ", weight_global_scale (of the weight's amax unless global_scale is given)"
                                   : ""),
          [](CLI::App& cmd) -> op_runner {
            auto opt = std::make_shared<qtl::ct_fp4_options>();
            if constexpr (!F::has_global_scale) {
              cmd.add_flag("--allow-nonfinite", opt->allow_nonfinite, "quantize NaN/Inf weights instead of refusing");
            }
            return [opt](op_io& io) {
              auto const& t = io.tensor("weight", float_types, {2});
              auto const* g = F::has_global_scale ? io.optional_tensor("global_scale", {dtype::F32}, {0}) : nullptr;
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const w(t);
                index_t const n = w.dim(0);
                index_t const k = w.dim(1);
                std::vector<float4_e2m1x2_t> values(static_cast<std::size_t>(n * (k / 2)));
                std::vector<typename F::scale> scales(static_cast<std::size_t>(n * (k / F::block_size)));
                auto const vv = make_view(values.data(), n, k / 2);
                auto const sv = make_view(scales.data(), n, k / F::block_size);
                if constexpr (F::has_global_scale) {
                  float const gs = g != nullptr ? scalar_value(*g) : qtl::ct_nvfp4_global_scale(qtl::fp8_amax(w.view2()));
                  qtl::ct_nvfp4_quantize(w.view2(), gs, vv, sv);
                  io.emit("weight_global_scale", dtype::F32, shape_of(1), std::vector<float>{gs});
                } else {
                  qtl::ct_mxfp4_quantize(w.view2(), vv, sv, *opt);
                }
                io.emit("weight_packed", dtype::U8, shape_of(n, k / 2), std::move(values));
                io.emit("weight_scale", F::has_global_scale ? dtype::F8_E4M3 : dtype::U8, shape_of(n, k / F::block_size),
                        std::move(scales));
              });
            };
          }};
}

}  // namespace

std::vector<op_spec> quantize_ops() {
  return {quantize_weights_op(), gptq_op(), permute_rows_op(), sort_weights_op(),
          convert_to_channelwise_op(), ct_pack_quantize_op(), gptq_checkpoint_quantize_op(), ct_fp4_quantize_op<qtl::nvfp4>(),
          ct_fp4_quantize_op<qtl::mxfp4>()};
}

}  // namespace qtl::tool
