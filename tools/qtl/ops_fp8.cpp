// qtl op scaled-fp8-quant | per-tensor-dequantize | requantize-with-max-scale | <format>-quant
// for each block format of qtl::block_formats (nvfp4-quant, mxfp4-quant, mxfp8-quant)
// (qtl/fp8.hpp, qtl/fp4.hpp)
//
//   scaled-fp8-quant [--per-token | --scale S]   input [M,N] F32|F16|BF16
//                      -> output F8_E4M3 [M,N], scale F32 [1] (per tensor) or [M,1] (per token)
//                      (S finite, positive; 0 as sglang's kernel takes it, with a warning)
//   per-tensor-dequantize   tensor F8_E4M3, inv_scale F32 [] (-> dq_weight F16) or [1] (-> F32)
//   requantize-with-max-scale --logical-widths a,b,c   (a+b+c <= N)
//                      weight F8_E4M3 [N,K], weight_scale F32 [S] or []
//                      -> max_w_scale F32 [], weight F8_E4M3 [N,K]
//                      (more scales than shards: as vLLM, with a warning)
//   nvfp4-quant [--swizzle]   input [M,K] F32|F16|BF16, global_scale F32 [] (optional)
//                      -> output U8 [M,K/2], scale F8_E4M3 [M,K/16] (linear) or
//                         [pad128(M), pad4(K/16)] (128x4 layout), global_scale F32 []
//   mxfp4-quant [--swizzle]   input [M,K] -> output U8 [M,K/2], scale F8_E8M0 [M,K/32] (or 128x4)
//   mxfp8-quant [--swizzle]   input [M,K] -> output F8_E4M3 [M,K], scale F8_E8M0 [M,K/32] (or 128x4)
//   normalize-e4m3fn-to-e4m3fnuz   weight F8_E4M3, weight_scale F32|F16|BF16, input_scale (optional),
//                      any rank each -> weight U8 (the float8_e4m3fnuz bytes: safetensors has no
//                      fnuz dtype), weight_scale and input_scale doubled, in their dtypes (qtl/fnuz.hpp)
//   float8-e4m3fnuz-encode   x F32 (any rank) -> codes U8: torch's x.to(float8_e4m3fnuz)
//   float8-e4m3fnuz-decode   codes U8 (any rank) -> x F32
//   scaled-quantize [--group-rows R] [--group-cols C] [--quant-dtype float8_e4m3fn|float8_e4m3fnuz]
//                   [--compute-dtype float32|bfloat16|float16] [--is-fp8-fnuz]
//                      x [M,N] F32|F16|BF16 -> x_q F8_E4M3 (U8: the e4m3fnuz bytes) [M,N],
//                      x_s F32 [M/R,N/C] (vLLM scaled_quantize; -1: the whole dimension)
//   scaled-dequantize [--group-rows R --group-cols C] [--quant-dtype ...] [--out-dtype ...]
//                      x_q, x_s F32|F16|BF16 (rank 0-2) -> out [M,N] (vLLM scaled_dequantize)
//   group-broadcast --shape M,N   t [a,b] F32|F16|BF16 -> t, each element repeated over its group
//                      (vLLM group_broadcast: an extent of 1 stays 1)

#include <cmath>
#include <limits>

#include <qtl/blockscale.hpp>
#include <qtl/fnuz.hpp>
#include <qtl/fp4.hpp>
#include <qtl/fp8.hpp>
#include <qtl/scaled_quantize.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

/// `--scale S` as float32: finite and not negative (@throws usage_error); 0 (or a value that is 0
/// in float32) is sglang's kernel's case, taken with a warning.
float static_scale(double v) {
  if (!(v >= 0) || v > std::numeric_limits<float>::max()) {
    throw usage_error("--scale " + float_text(v) + ": a dequantization scale is a finite positive float32");
  }
  auto const s = static_cast<float>(v);
  if (s == 0) {
    warn("--scale " + float_text(v) + (v == 0 ? "" : " is 0 in float32") +
         ": as sglang's kernel, QTL multiplies by 1/0 = inf, so every element quantizes to +-448 and zeros "
         "(0 x inf = NaN) to +448");
  }
  return s;
}

op_spec scaled_fp8_quant_op() {
  return {"scaled-fp8-quant",
          "FP8 E4M3 quantization of input [M,N]: dynamic per tensor (default), --per-token, or "
          "static with --scale S",
          [](CLI::App& cmd) -> op_runner {
            auto per_token = std::make_shared<bool>(false);
            auto scale = std::make_shared<std::optional<double>>();
            auto* pt = cmd.add_flag("--per-token", *per_token, "one dynamic scale per row");
            cmd.add_option("--scale", *scale,
                           "static per-tensor dequantization scale: a finite positive float32; 0 quantizes as "
                           "sglang's kernel does (times 1/0 = inf: every element to +-448, zeros to +448)")
                ->excludes(pt);
            return [per_token, scale](op_io& io) {
              float const s = scale->has_value() ? static_scale(**scale) : 0.0f;
              auto const& t = io.tensor("input", float_types, {2});
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                auto r = qtl::scaled_fp8_quant<float8_e4m3fn_t>(in.view2(), scale->has_value() ? &s : nullptr, 0,
                                                                *per_token);
                auto const m = r.output.extent(0);
                auto const n = r.output.extent(1);
                io.emit("output", dtype::F8_E4M3, shape_of(m, n), std::move(r.output.storage()));
                io.emit("scale", dtype::F32, *per_token ? shape_of(m, 1) : shape_of(1), std::move(r.scale.storage()));
              });
            };
          }};
}

op_spec per_tensor_dequantize_op() {
  return {"per-tensor-dequantize",
          "dq_weight = tensor (F8_E4M3) * inv_scale: F16 for a 0-dim inv_scale, F32 for a [1] one "
          "(torch promotes)",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              auto const& q = io.tensor("tensor", {dtype::F8_E4M3}, {1, 2, 3});
              auto const& s = io.tensor("inv_scale", {dtype::F32}, {0, 1});
              if (s.numel() != 1) {
                throw data_error(io.where("inv_scale") + " has shape " + qtl::io::shape_string(s.shape) +
                                 "; it must be [] or [1]");
              }
              typed_tensor<float8_e4m3fn_t> const in(q);
              index_t const cols = q.shape.back();
              index_t const rows = cols == 0 ? 0 : in.size() / cols;
              auto const view = make_view(in.data(), rows, cols);
              float const scale = scalar_value(s);
              if (s.shape.empty()) {
                std::vector<half_t> out(static_cast<std::size_t>(in.size()));
                qtl::per_tensor_dequantize<half_t>(view, scale, make_view(out.data(), rows, cols));
                io.emit("dq_weight", dtype::F16, q.shape, std::move(out));
              } else {
                std::vector<float> out(static_cast<std::size_t>(in.size()));
                qtl::per_tensor_dequantize<float>(view, scale, make_view(out.data(), rows, cols));
                io.emit("dq_weight", dtype::F32, q.shape, std::move(out));
              }
            };
          }};
}

op_spec requantize_op() {
  return {"requantize-with-max-scale",
          "requantize each shard (rows given by --logical-widths) of an FP8 weight to the largest "
          "of its per-shard scales",
          [](CLI::App& cmd) -> op_runner {
            auto widths = std::make_shared<std::string>();
            cmd.add_option("--logical-widths", *widths, "rows of each shard, e.g. 16,16,9 (the weight's rows at most)")
                ->required();
            return [widths](op_io& io) {
              auto const lw = parse_int_list("--logical-widths", *widths);
              auto const& w = io.tensor("weight", {dtype::F8_E4M3}, {2});
              auto const& s = io.tensor("weight_scale", {dtype::F32}, {0, 1});
              check_logical_widths(lw, *widths, w.shape[0],
                                   io.where("weight") + " has " + std::to_string(w.shape[0]) + " rows");
              std::vector<float8_e4m3fn_t> weight = qtl::io::tensor_values<float8_e4m3fn_t>(w);
              std::vector<float> const scales = qtl::io::tensor_values<float>(s);
              if (!s.shape.empty() && scales.size() > lw.size()) {
                warn(io.where("weight_scale") + " holds " + std::to_string(scales.size()) + " scales for " +
                     std::to_string(lw.size()) +
                     " shards: as in vLLM's requantize_with_max_scale, the extra ones "
                     "count in the max scale, and the last one decides whether the weight is requantized");
              }
              float const max_scale = qtl::requantize_with_max_scale<float8_e4m3fn_t>(
                  make_view(weight.data(), w.shape[0], w.shape[1]), qtl::weight_scales{scales, s.shape.empty()}, lw);
              io.emit("max_w_scale", dtype::F32, {}, std::vector<float>{max_scale});
              io.emit("weight", dtype::F8_E4M3, w.shape, std::move(weight));
            };
          }};
}

/// `<name>-quant` of block format F (qtl::block_formats): its codes and its scales, linear or in
/// the 128x4 layout; NVFP4 also takes and gives its global scale.
template <block_format_type F>
op_spec block_quant_op() {
  constexpr index_t bs = F::block_size;
  std::string const name(qtl::name_of<F>);
  std::string const elements = F::elements_per_value == 2 ? "E2M1 codes (two per byte)" : "E4M3 codes";
  std::string const scales = F::has_global_scale ? "one E4M3 scale per " : "one UE8M0 scale per ";
  return {name + "-quant",
          name + " quantization of input [M,K]: " + elements + ", " + scales + std::to_string(bs) +
              " elements (128x4 layout with --swizzle)" +
              (F::has_global_scale ? ", global scale 448*6/amax unless given" : ""),
          [name](CLI::App& cmd) -> op_runner {
            auto swizzle = std::make_shared<bool>(false);
            cmd.add_flag("--swizzle", *swizzle, "write the scales in the 128x4 (tcgen05) layout");
            return [swizzle, name](op_io& io) {
              auto const& t = io.tensor("input", float_types, {2});
              auto const* g = F::has_global_scale ? io.optional_tensor("global_scale", {dtype::F32}, {0}) : nullptr;
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                index_t const m = in.dim(0);
                index_t const k = in.dim(1);
                if (k % bs != 0) {
                  throw data_error(io.where("input") + " has K = " + std::to_string(k) +
                                   " columns, not a multiple of the " + name + " block of " + std::to_string(bs));
                }
                float gs = 1.0f;
                if constexpr (F::has_global_scale) {
                  gs = g != nullptr ? scalar_value(*g) : qtl::nvfp4_global_scale(in.view2());
                }
                index_t const vk = k / F::elements_per_value;
                std::vector<typename F::element> values(static_cast<std::size_t>(m * vk));
                auto const vview = make_view(values.data(), m, vk);
                std::vector<typename F::scale> scale;
                std::vector<std::int64_t> scale_shape;
                auto const run = [&]<class Layout>(Layout) {
                  scale.resize(static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(m, k)));
                  qtl::block_quantize<F, Layout>(in.view2(), vview, std::span(scale), gs);
                };
                if (*swizzle) {
                  run(qtl::layout_128x4{});
                  scale_shape = shape_of(qtl::layout_128x4::pad_rows(m), qtl::layout_128x4::pad_cols(k / bs));
                } else {
                  run(qtl::layout_linear{});
                  scale_shape = shape_of(m, k / bs);
                }
                io.emit("output", F::elements_per_value == 2 ? dtype::U8 : dtype::F8_E4M3, shape_of(m, vk),
                        std::move(values));
                io.emit("scale", F::has_global_scale ? dtype::F8_E4M3 : dtype::F8_E8M0, std::move(scale_shape),
                        std::move(scale));
                if constexpr (F::has_global_scale) {
                  io.emit("global_scale", dtype::F32, {}, std::vector<float>{gs});
                }
              });
            };
          }};
}

// The ranks the elementwise ops take.
constexpr std::initializer_list<int> any_rank = {0, 1, 2, 3, 4, 5, 6, 7, 8};

op_spec normalize_fnuz_op() {
  return {"normalize-e4m3fn-to-e4m3fnuz",
          "e4m3fn weight -> float8_e4m3fnuz bytes (U8; 0x80 -> 0), weight_scale and input_scale doubled "
          "(sglang normalize_e4m3fn_to_e4m3fnuz)",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              typed_tensor<float8_e4m3fn_t> const w(io.tensor("weight", {dtype::F8_E4M3}, any_rank));
              io.emit("weight", dtype::U8, w.info().shape,
                      std::move(qtl::normalize_e4m3fn_to_e4m3fnuz(w.view1()).storage()));
              for (char const* name : {"weight_scale", "input_scale"}) {
                auto const* s = io.optional_tensor(name, float_types, any_rank);
                if (s == nullptr) {
                  if (std::string_view(name) == "weight_scale") {
                    io.tensor(name, float_types, any_rank);  // names the missing tensor
                  }
                  continue;
                }
                with_float_type(s->type, [&]<class T>(std::type_identity<T>) {
                  typed_tensor<T> const in(*s);
                  io.emit(name, s->type, s->shape, std::move(qtl::double_scales(in.view1()).storage()));
                });
              }
            };
          }};
}

op_spec fnuz_codec_op(bool encode) {
  return {encode ? "float8-e4m3fnuz-encode" : "float8-e4m3fnuz-decode",
          encode ? "x (F32) -> float8_e4m3fnuz codes (U8), RNE, overflow and NaN to 0x80 (torch's .to)"
                 : "float8_e4m3fnuz codes (U8) -> x (F32), exact; 0x80 is NaN",
          [encode](CLI::App&) -> op_runner {
            return [encode](op_io& io) {
              if (encode) {
                typed_tensor<float> const x(io.tensor("x", {dtype::F32}, any_rank));
                std::vector<std::uint8_t> codes(static_cast<std::size_t>(x.size()));
                for (index_t i = 0; i < x.size(); ++i) {
                  codes[static_cast<std::size_t>(i)] = qtl::float_to_e4m3fnuz(x.data()[i]);
                }
                io.emit("codes", dtype::U8, x.info().shape, std::move(codes));
              } else {
                typed_tensor<std::uint8_t> const c(io.tensor("codes", {dtype::U8}, any_rank));
                std::vector<float> x(static_cast<std::size_t>(c.size()));
                for (index_t i = 0; i < c.size(); ++i) {
                  x[static_cast<std::size_t>(i)] = qtl::e4m3fnuz_to_float(c.data()[i]);
                }
                io.emit("x", dtype::F32, c.info().shape, std::move(x));
              }
            };
          }};
}

/// `--quant-dtype`, `--compute-dtype` and `--out-dtype` take torch's dtype names.
constexpr char const* e4m3fn_name = "float8_e4m3fn";
constexpr char const* e4m3fnuz_name = "float8_e4m3fnuz";

/// Calls `f(std::type_identity<T>{})` with the float type torch names `name`.
template <class F>
void with_float_name(std::string const& name, F&& f) {
  with_float_type(name == "float32" ? dtype::F32 : name == "bfloat16" ? dtype::BF16 : dtype::F16, f);
}
CLI::Validator float_names() { return CLI::IsMember({"float32", "bfloat16", "float16"}); }
dtype float_dtype_of(std::string const& name) {
  return name == "float32" ? dtype::F32 : name == "bfloat16" ? dtype::BF16 : dtype::F16;
}

/// `--group-rows R --group-cols C` (vLLM's GroupShape(R, C); -1 the whole dimension) and
/// `--quant-dtype`, the flags both GroupShape ops take.
struct group_flags {
  std::optional<std::int64_t> rows;
  std::optional<std::int64_t> cols;
  std::string quant = e4m3fn_name;
  bool fnuz() const { return quant == e4m3fnuz_name; }
  void define(CLI::App& cmd, char const* absent) {
    cmd.add_option("--quant-dtype", quant, "float8_e4m3fn (default) or float8_e4m3fnuz (stored as U8)")
        ->check(CLI::IsMember({e4m3fn_name, e4m3fnuz_name}));
    auto* r = cmd.add_option("--group-rows", rows, std::string("rows of a group (-1: all; absent: ") + absent + ")");
    auto* c = cmd.add_option("--group-cols", cols, std::string("columns of a group (-1: all; absent: ") + absent + ")");
    if (std::string_view(absent) == "none") {
      r->needs(c);
      c->needs(r);
    }
  }
  qtl::group_shape shape() const { return {rows.value_or(-1), cols.value_or(-1)}; }
};

op_spec scaled_quantize_op() {
  return {"scaled-quantize",
          "FP8 quantization with one scale per group of --group-rows x --group-cols (vLLM scaled_quantize): "
          "fp8_max / amax in the compute dtype",
          [](CLI::App& cmd) -> op_runner {
            auto group = std::make_shared<group_flags>();
            auto compute = std::make_shared<std::string>();
            auto fnuz = std::make_shared<bool>(false);
            group->define(cmd, "-1");
            cmd.add_option("--compute-dtype", *compute, "float32, bfloat16 or float16 (absent: the input's)")
                ->check(float_names());
            cmd.add_flag("--is-fp8-fnuz", *fnuz, "the platform's FP8 is e4m3fnuz: fp8_max 224 (else 448)");
            return [group, compute, fnuz](op_io& io) {
              auto const& t = io.tensor("x", float_types, {2});
              float const fp8_max = qtl::get_fp8_min_max(*fnuz).max;
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                auto const run = [&]<class Q, class C>() {
                  auto r = qtl::scaled_quantize<Q, C>(in.view2(), group->shape(), fp8_max);
                  io.emit("x_q", std::is_same_v<Q, float8_e4m3fn_t> ? dtype::F8_E4M3 : dtype::U8,
                          shape_of(r.q.extent(0), r.q.extent(1)), std::move(r.q.storage()));
                  io.emit("x_s", dtype::F32, shape_of(r.scale.extent(0), r.scale.extent(1)),
                          std::move(r.scale.storage()));
                };
                auto const with_q = [&]<class C>() {
                  if (group->fnuz()) {
                    run.template operator()<float8_e4m3fnuz_t, C>();
                  } else {
                    run.template operator()<float8_e4m3fn_t, C>();
                  }
                };
                if (compute->empty()) {
                  with_q.template operator()<T>();
                } else {
                  with_float_name(*compute, [&]<class C>(std::type_identity<C>) { with_q.template operator()<C>(); });
                }
              });
            };
          }};
}

op_spec scaled_dequantize_op() {
  return {"scaled-dequantize",
          "out = x_q * its group's scale x_s (vLLM scaled_dequantize; with a group shape, x_s must be its "
          "groups, -1 extents included)",
          [](CLI::App& cmd) -> op_runner {
            auto group = std::make_shared<group_flags>();
            auto out_name = std::make_shared<std::string>("float32");
            group->define(cmd, "none");
            cmd.add_option("--out-dtype", *out_name, "float32 (default), bfloat16 or float16")->check(float_names());
            return [group, out_name](op_io& io) {
              bool const fnuz = group->fnuz();
              auto const& qi = io.tensor("x_q", {fnuz ? dtype::U8 : dtype::F8_E4M3}, {2});
              auto const& si = io.tensor("x_s", float_types, {0, 1, 2});
              std::vector<index_t> const sshape(si.shape.begin(), si.shape.end());
              std::optional<qtl::group_shape> g;
              if (group->rows) {
                g = group->shape();
              }
              std::array<index_t, 2> ext{};
              try {
                ext = qtl::dequantize_scale_extents(sshape, qi.shape[0], qi.shape[1], g);
              } catch (qtl::error const& e) {
                throw data_error(io.where("x_s") + ": " + e.what());
              }
              auto const run = [&]<class Q>() {
                typed_tensor<Q> const q(qi);
                with_float_type(si.type, [&]<class S>(std::type_identity<S>) {
                  typed_tensor<S> const s(si);
                  with_float_name(*out_name, [&]<class Out>(std::type_identity<Out>) {
                    std::vector<Out> out(static_cast<std::size_t>(q.size()));
                    qtl::scaled_dequantize<Out>(q.view2(), make_view(s.data(), ext[0], ext[1]),
                                                make_view(out.data(), qi.shape[0], qi.shape[1]));
                    io.emit("out", float_dtype_of(*out_name), qi.shape, std::move(out));
                  });
                });
              };
              if (fnuz) {
                run.template operator()<float8_e4m3fnuz_t>();
              } else {
                run.template operator()<float8_e4m3fn_t>();
              }
            };
          }};
}

op_spec group_broadcast_op() {
  return {"group-broadcast",
          "t [a,b] stretched to --shape M,N, each element repeated over its group (vLLM group_broadcast; an "
          "extent of 1 stays 1)",
          [](CLI::App& cmd) -> op_runner {
            auto shape = std::make_shared<std::string>();
            cmd.add_option("--shape", *shape, "the target M,N")->required();
            return [shape](op_io& io) {
              auto const target = parse_int_list("--shape", *shape);
              if (target.size() != 2) {
                throw usage_error("--shape " + *shape + ": expected two integers M,N");
              }
              auto const& ti = io.tensor("t", float_types, {2});
              with_float_type(ti.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const t(ti);
                index_t const rows = t.dim(0) == 1 ? 1 : target[0];
                index_t const cols = t.dim(1) == 1 ? 1 : target[1];
                if (qtl::group_broadcast_factor(t.dim(0), target[0]) == 0 ||
                    qtl::group_broadcast_factor(t.dim(1), target[1]) == 0) {
                  throw data_error(io.where("t") + " has shape " + qtl::io::shape_string(ti.shape) +
                                   ", which does not broadcast in groups to " + *shape);
                }
                std::vector<T> out(static_cast<std::size_t>(rows * cols));
                qtl::group_broadcast(t.view2(), make_view(out.data(), rows, cols));
                io.emit("t", ti.type, shape_of(rows, cols), std::move(out));
              });
            };
          }};
}

}  // namespace

std::vector<op_spec> fp8_ops() {
  std::vector<op_spec> ops{scaled_fp8_quant_op(), per_tensor_dequantize_op(), requantize_op(),
                           normalize_fnuz_op(),   fnuz_codec_op(true),        fnuz_codec_op(false),
                           scaled_quantize_op(),  scaled_dequantize_op(),     group_broadcast_op()};
  qtl::for_each_type<qtl::block_formats>([&]<class F>() { ops.push_back(block_quant_op<F>()); });
  return ops;
}

}  // namespace qtl::tool
