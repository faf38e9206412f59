// qtl op marlin-* (qtl/marlin.hpp): Marlin weight, scale and zero-point layouts, and back.
//
//   marlin-repack-gptq   --bits 4|8 [--a8]  qweight I32 [K/pf,N], sort_indices I32 [K] optional
//                                           -> qweight I32 [K/16,N*16/pf]
//   unmarlin-gptq        --bits [--a8]      qweight (Marlin), sort_indices optional -> qweight [K/pf,N]
//   marlin-repack-awq    --bits [--a8]      qweight I32 [K,N/pf] (AWQ order) -> qweight (Marlin)
//   unmarlin-awq         --bits [--a8]      qweight (Marlin) -> qweight I32 [K,N/pf]
//   marlin-permute-scales / unmarlin-permute-scales  --group-size G|-1 [--a8]
//                                           scales F32|F16|BF16 [G',N] -> scales, columns moved
//   marlin-zero-points   --bits [--a8]      zp I32 [G,N] codes -> zp I32 [G,N/pf]
//   unmarlin-zero-points --bits [--a8]      zp I32 [G,N/pf] -> zp I32 [G,N]
//   awq-to-marlin-zero-points --bits [--a8] qzeros I32 [G,N/pf] (AWQ) -> zp I32 [G,N/pf]
//
// The contract is test/data/golden/README.md; shapes the layout cannot take are the library's
// shape_error (exit 2).

#include <qtl/marlin.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

using qtl::marlin::act_width;

struct layout_flags {
  int bits = 0;
  bool a8 = false;
};

std::shared_ptr<layout_flags> add_layout_flags(CLI::App& cmd) {
  auto f = std::make_shared<layout_flags>();
  cmd.add_option("--bits", f->bits, "bits per code: 4 or 8")->required()->check(CLI::IsMember({4, 8}));
  cmd.add_flag("--a8", f->a8, "the 8-bit-activation layout (vLLM's is_a_8bit: 32x32 tiles)");
  return f;
}

/// Calls `f.template operator()<Bits, A>()` for the run-time bits and --a8.
template <class F>
decltype(auto) with_layout(layout_flags const& l, F&& f) {
  if (l.bits == 4) {
    return l.a8 ? f.template operator()<4, act_width::a8>() : f.template operator()<4, act_width::a16>();
  }
  return l.a8 ? f.template operator()<8, act_width::a8>() : f.template operator()<8, act_width::a16>();
}

view1d<std::int32_t const> optional_indices(op_io& io, std::optional<typed_tensor<std::int32_t>>& keep) {
  if (auto const* t = io.optional_tensor("sort_indices", {dtype::I32}, {1})) {
    keep.emplace(*t);
    return keep->view1();
  }
  return {};
}

enum class weight_op { repack_gptq, unrepack_gptq, repack_awq, unrepack_awq };

op_spec weight_spec(char const* name, char const* help, weight_op kind) {
  return {name, help, [kind](CLI::App& cmd) -> op_runner {
            auto l = add_layout_flags(cmd);
            return [kind, l](op_io& io) {
              typed_tensor<std::int32_t> const q(io.tensor("qweight", {dtype::I32}, {2}));
              std::optional<typed_tensor<std::int32_t>> keep;
              bool const gptq = kind == weight_op::repack_gptq || kind == weight_op::unrepack_gptq;
              view1d<std::int32_t const> const s = gptq ? optional_indices(io, keep) : view1d<std::int32_t const>{};
              with_layout(*l, [&]<int Bits, act_width A>() {
                switch (kind) {
                  case weight_op::repack_gptq: emit(io, "qweight", dtype::I32, qtl::marlin::repack_gptq<Bits, A>(q.view2(), s)); break;
                  case weight_op::unrepack_gptq: emit(io, "qweight", dtype::I32, qtl::marlin::unrepack_gptq<Bits, A>(q.view2(), s)); break;
                  case weight_op::repack_awq: emit(io, "qweight", dtype::I32, qtl::marlin::repack_awq<Bits, A>(q.view2())); break;
                  case weight_op::unrepack_awq: emit(io, "qweight", dtype::I32, qtl::marlin::unrepack_awq<Bits, A>(q.view2())); break;
                }
              });
            };
          }};
}

op_spec scales_spec(char const* name, char const* help, bool inverse) {
  return {name, help, [inverse](CLI::App& cmd) -> op_runner {
            auto group = std::make_shared<index_t>(0);
            auto a8 = std::make_shared<bool>(false);
            cmd.add_option("--group-size", *group, "G, or -1 (channelwise)")->required();
            cmd.add_flag("--a8", *a8, "8-bit activations: always the 32-wide scale_perm_single");
            return [inverse, group, a8](op_io& io) {
              auto const& t = io.tensor("scales", {dtype::F32, dtype::F16, dtype::BF16}, {2});
              if (*group != -1 && *group <= 0) {
                throw usage_error("--group-size " + std::to_string(*group) + ": a positive group size or -1");
              }
              // size_k = rows * G: grouped iff G != -1, more than one row and 16-bit activations.
              index_t const rows = t.shape[0];
              auto const kind = qtl::marlin::scale_kind(*group == -1 ? rows : rows * *group, *group,
                                                        *a8 ? act_width::a8 : act_width::a16);
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                host_tensor<T, 2> out({t.shape[0], t.shape[1]});
                if (inverse) {
                  qtl::marlin::unpermute_scales<T>(in.view2(), kind, out.view());
                } else {
                  qtl::marlin::permute_scales<T>(in.view2(), kind, out.view());
                }
                emit(io, "scales", t.type, std::move(out));
              });
            };
          }};
}

enum class zp_op { codes, awq, inverse };

op_spec zero_points_spec(char const* name, char const* help, zp_op kind) {
  return {name, help, [kind](CLI::App& cmd) -> op_runner {
            auto l = add_layout_flags(cmd);
            return [kind, l](op_io& io) {
              typed_tensor<std::int32_t> const in(io.tensor(kind == zp_op::awq ? "qzeros" : "zp", {dtype::I32}, {2}));
              with_layout(*l, [&]<int Bits, act_width A>() {
                switch (kind) {
                  case zp_op::codes: emit(io, "zp", dtype::I32, qtl::marlin::zero_points<Bits, A>(in.view2())); break;
                  case zp_op::awq: emit(io, "zp", dtype::I32, qtl::marlin::awq_zero_points<Bits, A>(in.view2())); break;
                  case zp_op::inverse: emit(io, "zp", dtype::I32, qtl::marlin::unzero_points<Bits, A>(in.view2())); break;
                }
              });
            };
          }};
}

}  // namespace

std::vector<op_spec> marlin_ops() {
  return {
      weight_spec("marlin-repack-gptq",
                  "GPTQ qweight [K/pf,N] (+ sort_indices [K] for act-order) -> Marlin qweight [K/16,N*16/pf]",
                  weight_op::repack_gptq),
      weight_spec("unmarlin-gptq", "Marlin qweight (+ sort_indices) -> GPTQ qweight [K/pf,N] (exact inverse)",
                  weight_op::unrepack_gptq),
      weight_spec("marlin-repack-awq", "AWQ qweight [K,N/pf] -> Marlin qweight [K/16,N*16/pf]", weight_op::repack_awq),
      weight_spec("unmarlin-awq", "Marlin qweight -> AWQ qweight [K,N/pf] (exact inverse)", weight_op::unrepack_awq),
      scales_spec("marlin-permute-scales", "scales [G,N]: columns moved as marlin_permute_scales", false),
      scales_spec("unmarlin-permute-scales", "scales [G,N]: the inverse of marlin-permute-scales", true),
      zero_points_spec("marlin-zero-points", "zero-point codes zp [G,N] -> Marlin zp [G,N/pf]", zp_op::codes),
      zero_points_spec("unmarlin-zero-points", "Marlin zp [G,N/pf] -> codes [G,N] (exact inverse)", zp_op::inverse),
      zero_points_spec("awq-to-marlin-zero-points", "AWQ qzeros [G,N/pf] -> Marlin zp [G,N/pf]", zp_op::awq),
  };
}

}  // namespace qtl::tool
