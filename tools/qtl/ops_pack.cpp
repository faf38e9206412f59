// qtl op pack-cols | pack-rows | unpack-cols | unpack-rows  (qtl/pack.hpp)
//
//   pack-cols    --bits b   q_w    I32 [K, N]     -> packed I32 [K, N/pf]    pf = 32 / b
//   pack-rows    --bits b   q_w    I32 [K, N]     -> packed I32 [K/pf, N]
//   unpack-cols  --bits b   packed I32 [K, N/pf]  -> q_w    I32 [K, N]
//   unpack-rows  --bits b   packed I32 [K/pf, N]  -> q_w    I32 [K, N]
//
// vLLM's quant_utils.py packings (qtl/pack_nd.hpp):
//   gptq-pack    --bits b   q_w    I32 [K, N]     -> packed I32 [K/pf, N]    (pack-rows)
//   awq-pack     --bits 4|8 q_w    I32 [K, N]     -> packed I32 [K, N/pf]    AWQ's in-word interleave
//   pack-quantized-values-into-int32    --type T --packed-dim d   w_q I32 [..., P, ...] -> packed [..., P/pf, ...]
//   unpack-quantized-values-into-int32  --type T --packed-dim d   packed I32 [..., R, ...] -> w_q [..., R*pf, ...]

#include <qtl/dispatch.hpp>
#include <qtl/pack.hpp>
#include <qtl/pack_nd.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

enum class pack_kind { pack_cols, pack_rows, unpack_cols, unpack_rows };

template <int Bits>
host_tensor<std::int32_t, 2> run_pack(pack_kind kind, view2d<std::int32_t const> in) {
  switch (kind) {
    case pack_kind::pack_cols: return qtl::pack_cols<Bits>(in);
    case pack_kind::pack_rows: return qtl::pack_rows<Bits>(in);
    case pack_kind::unpack_cols: return qtl::unpack_cols<Bits>(in);
    case pack_kind::unpack_rows: return qtl::unpack_rows<Bits>(in);
  }
  throw std::logic_error("unreachable");
}

host_tensor<std::int32_t, 2> pack_with_bits(int bits, pack_kind kind, view2d<std::int32_t const> in) {
  return qtl::dispatch_bits<1, 2, 4, 8, 16, 32>(bits, [&]<int Bits>() { return run_pack<Bits>(kind, in); });
}

op_spec pack_op(char const* name, char const* help, pack_kind kind) {
  return {name, help, [kind](CLI::App& cmd) -> op_runner {
            auto bits = std::make_shared<int>(0);
            cmd.add_option("--bits", *bits, "bits per code; 32 / bits codes per int32 word")
                ->required()
                ->check(CLI::IsMember({1, 2, 4, 8, 16, 32}));
            bool const packing = kind == pack_kind::pack_cols || kind == pack_kind::pack_rows;
            return [kind, bits, packing](op_io& io) {
              char const* const in_name = packing ? "q_w" : "packed";
              char const* const out_name = packing ? "packed" : "q_w";
              typed_tensor<std::int32_t> const in(io.tensor(in_name, {dtype::I32}, {2}));
              emit(io, out_name, dtype::I32, pack_with_bits(*bits, kind, in.view2()));
            };
          }};
}

op_spec awq_pack_op() {
  return {"awq-pack",
          "pack int32 codes q_w [K,N] along N into packed [K,N*b/32] in AWQ's in-word order (vLLM awq_pack)",
          [](CLI::App& cmd) -> op_runner {
            auto bits = std::make_shared<int>(0);
            cmd.add_option("--bits", *bits, "bits per code")->required()->check(CLI::IsMember({4, 8}));
            return [bits](op_io& io) {
              typed_tensor<std::int32_t> const in(io.tensor("q_w", {dtype::I32}, {2}));
              qtl::dispatch_bits<4, 8>(*bits,
                                       [&]<int B>() { emit(io, "packed", dtype::I32, qtl::awq_pack<B>(in.view2())); });
            };
          }};
}

// The names --type takes: the named integer types whose codes pack into int32 words.
std::vector<std::string> pack_type_names() {
  std::vector<std::string> names;
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    if (qtl::is_pack_type(t)) {
      names.emplace_back(t.name().view());
    }
  }
  return names;
}

// pack- / unpack-quantized-values-into-int32: any rank, the packed dimension's extent divided or
// multiplied by the pack factor, the others kept.
op_spec pack_dim_op(bool packing) {
  return {packing ? "pack-quantized-values-into-int32" : "unpack-quantized-values-into-int32",
          packing ? "pack int32 codes w_q along --packed-dim into int32 words packed (vLLM "
                    "pack_quantized_values_into_int32)"
                  : "unpack int32 words packed along --packed-dim into zero-extended codes w_q (vLLM "
                    "unpack_quantized_values_into_int32)",
          [packing](CLI::App& cmd) -> op_runner {
            struct flags {
              std::string type;
              std::int64_t dim = 0;
            };
            auto f = std::make_shared<flags>();
            cmd.add_option("--type", f->type, "integer type of the codes (its width divides 32)")
                ->required()
                ->check(CLI::IsMember(pack_type_names()));
            cmd.add_option("--packed-dim", f->dim, "dimension packed (0 to rank - 1)")->default_val(0);
            return [f, packing](op_io& io) {
              auto const& t = io.any_tensor(packing ? "w_q" : "packed", 1);
              if (t.type != dtype::I32) {
                throw data_error(io.where(packing ? "w_q" : "packed") + " is " +
                                 std::string(qtl::io::dtype_name(t.type)) + "; the op needs I32");
              }
              typed_tensor<std::int32_t> const in(t);
              std::vector<index_t> const shape(t.shape.begin(), t.shape.end());
              auto const e = qtl::split_at_dim(shape, f->dim);
              qtl::dispatch_pack_type(f->type, [&]<qtl::scalar_type T>(qtl::scalar_constant<T>) {
                auto const v = make_view(in.data(), e[0], e[1], e[2]);
                auto out = packing ? qtl::pack_quantized_values_into_int32<T>(v)
                                   : qtl::unpack_quantized_values_into_int32<T>(v);
                std::vector<std::int64_t> out_shape(t.shape.begin(), t.shape.end());
                out_shape[static_cast<std::size_t>(f->dim)] = out.extent(1);
                io.emit(packing ? "packed" : "w_q", dtype::I32, std::move(out_shape), std::move(out.storage()));
              });
            };
          }};
}

}  // namespace

std::vector<op_spec> pack_ops() {
  return {
      pack_op("pack-cols", "pack int32 codes q_w [K,N] along N into packed [K,N*b/32] (AWQ order)",
              pack_kind::pack_cols),
      pack_op("pack-rows", "pack int32 codes q_w [K,N] along K into packed [K*b/32,N] (GPTQ qweight)",
              pack_kind::pack_rows),
      pack_op("unpack-cols", "unpack packed [K,N*b/32] into codes q_w [K,N] (inverse of pack-cols)",
              pack_kind::unpack_cols),
      pack_op("unpack-rows", "unpack packed [K*b/32,N] into codes q_w [K,N] (inverse of pack-rows)",
              pack_kind::unpack_rows),
      pack_op("gptq-pack", "pack int32 codes q_w [K,N] along K into packed [K*b/32,N] (vLLM gptq_pack: pack-rows)",
              pack_kind::pack_rows),
      awq_pack_op(),
      pack_dim_op(true),
      pack_dim_op(false),
  };
}

}  // namespace qtl::tool
