// qtl op pack-cols | pack-rows | unpack-cols | unpack-rows  (qtl/pack.hpp)
//
//   pack-cols    --bits b   q_w    I32 [K, N]     -> packed I32 [K, N/pf]    pf = 32 / b
//   pack-rows    --bits b   q_w    I32 [K, N]     -> packed I32 [K/pf, N]
//   unpack-cols  --bits b   packed I32 [K, N/pf]  -> q_w    I32 [K, N]
//   unpack-rows  --bits b   packed I32 [K/pf, N]  -> q_w    I32 [K, N]

#include <qtl/dispatch.hpp>
#include <qtl/pack.hpp>

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
  };
}

}  // namespace qtl::tool
