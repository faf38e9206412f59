#pragma once
/// \file
/// vLLM's packings of `quant_utils.py` beyond `pack_rows` / `pack_cols` (`docs/spec/engines.md`
/// §1-§3), on the host:
///
///   gptq_pack    in (K, N) -> out (K/pf, N)      vLLM's `gptq_pack` is `pack_rows` (qtl/pack.hpp)
///   awq_pack     in (K, N) -> out (K, N/pf)      out[k, c] slot i holds in[k, c*pf + order[i]],
///                                                order [0,2,4,6,1,3,5,7] (4-bit), [0,2,1,3] (8-bit)
///   pack_quantized_values_into_int32     in (outer, P, inner) -> out (outer, P/pf, inner)
///   unpack_quantized_values_into_int32   in (outer, R, inner) -> out (outer, R*pf, inner)
///
/// The last two pack along any dimension of a tensor of any rank, seen as three extents
/// (`split_at_dim`; `qtl/element/pack_nd.hpp` draws the layout): word (o, r, i) holds code
/// (o, r*pf + j, i) as element j.
///
/// Widths as in `qtl/pack.hpp` (a bit width or an integer `qtl::scalar_type`); codes outside the
/// width are a `qtl::value_error` naming the first (then `out` is zero-filled), where vLLM masks
/// them (`pack_quantized_values_into_int32`) or lets them spill into the neighbouring fields
/// (`gptq_pack`, `awq_pack`). A signed type's codes are stored in two's complement, which is what
/// vLLM's mask makes of them. Unpacking zero-extends every field whatever the type's sign, as
/// vLLM's `unpack_quantized_values_into_int32` does (int4 -1 comes back as 15): the round trip is
/// exact for unsigned and biased types (uint4b8, uint8b128, ...), and modulo 2^b for signed ones.
/// vLLM's 3-bit `uint3b4` (ten codes in 30 bits) is not supported: widths must divide 32.

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include <qtl/dispatch.hpp>
#include <qtl/element/pack_nd.hpp>
#include <qtl/error.hpp>
#include <qtl/pack.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// The extents (outer, P, inner) of a packing along dimension `dim` of a tensor of `shape`:
/// outer the product of the extents before `dim`, P `shape[dim]`, inner the product after it.
/// @throws shape_error if `dim` is not in [0, rank) or an extent is negative.
inline std::array<index_t, 3> split_at_dim(std::span<index_t const> shape, index_t dim) {
  auto const rank = static_cast<index_t>(shape.size());
  if (dim < 0 || dim >= rank) {
    throw shape_error("qtl::split_at_dim: packed_dim = " + std::to_string(dim) + " is not a dimension of a rank-" +
                      std::to_string(rank) + " tensor (0 to " + std::to_string(rank - 1) + ")");
  }
  std::array<index_t, 3> e = {1, shape[static_cast<std::size_t>(dim)], 1};
  for (index_t d = 0; d < rank; ++d) {
    index_t const n = shape[static_cast<std::size_t>(d)];
    if (n < 0) {
      throw shape_error("qtl::split_at_dim: extent " + std::to_string(d) + " is negative (" + std::to_string(n) + ")");
    }
    if (d != dim) {
      e[d < dim ? 0 : 2] *= n;
    }
  }
  return e;
}

/// True for the integer scalar types whose codes pack into int32 words: integer, width dividing 32.
constexpr bool is_pack_type(scalar_type t) { return t.is_integer() && is_pack_width(static_cast<int>(t.size_bits())); }

/// Calls `f(scalar_constant<T>{})` for the named type `t` (a `qtl::scalar_type`, its id or its name)
/// that `is_pack_type`: int4, uint4, int8, uint8, uint2b2, uint4b8, uint8b128 (vLLM's `wtype`s but
/// uint3b4). @throws unsupported_error for any other type.
template <class Type, class F>
decltype(auto) dispatch_pack_type(Type const& t, F&& f) {
  return dispatch_scalar_type<int4, uint4, int8, uint8, uint2b2, uint4b8, uint8b128>(t, std::forward<F>(f));
}

namespace detail {

template <auto Width>
[[noreturn]] void throw_pack_dim_shape_error(char const* op, view3d<std::int32_t const> codes,
                                             view3d<std::int32_t const> packed, bool codes_are_input) {
  constexpr index_t pf = pack_factor<Width>;
  auto const shape = [](view3d<std::int32_t const> v) {
    return "(" + std::to_string(v.extent[0]) + ", " + std::to_string(v.extent[1]) + ", " + std::to_string(v.extent[2]) +
           ")";
  };
  std::string const codes_name = codes_are_input ? "in" : "out";
  std::string const packed_name = codes_are_input ? "out" : "in";
  if (codes.extent[1] >= 0 && codes.extent[1] % pf != 0) {
    throw_shape(pack_op_name<Width>(op), codes_name + " " + shape(codes) + ": the packed extent " +
                                             std::to_string(codes.extent[1]) +
                                             " is not a multiple of the pack factor " + std::to_string(pf));
  }
  throw_shape(pack_op_name<Width>(op), "codes " + codes_name + " " + shape(codes) + " and words " + packed_name + " " +
                                           shape(packed) +
                                           " do not fit: need (outer, P, inner) and "
                                           "(outer, P/" +
                                           std::to_string(pf) + ", inner), no extent negative");
}

}  // namespace detail

/// vLLM's `gptq_pack`: `pack_rows` (GPTQ's qweight layout), under its name.
template <auto Width>
constexpr void gptq_pack(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  pack_rows<Width>(in, out);
}

/// `gptq_pack` into a new (K/pf, N) tensor.
template <auto Width>
host_tensor<std::int32_t, 2> gptq_pack(view2d<std::int32_t const> in) {
  return pack_rows<Width>(in);
}

/// vLLM's `awq_pack`: `in` (K, N) codes -> `out` (K, N/pf), slot i of word (k, c) holding
/// `in[k, c*pf + order[i]]` (order [0,2,4,6,1,3,5,7] for 4 bits, [0,2,1,3] for 8). 4- and 8-bit
/// widths only (vLLM raises for others).
/// @throws shape_error if pf does not divide N or `out` is not (K, N/pf);
///         value_error naming the first code (row-major) outside the width (then `out` is zeroed).
template <auto Width>
constexpr void awq_pack(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  static_assert(traits::bits == 4 || traits::bits == 8, "qtl::awq_pack: AWQ packs 4- or 8-bit codes");
  constexpr index_t pf = traits::factor;
  detail::check_pack_shapes<Width>("awq_pack", 1, in, out, true);
  for (index_t k = 0; k < in.extent[0]; ++k) {
    std::uint32_t excess = 0;
    for (index_t c = 0; c < out.extent[1]; ++c) {
      out(k, c) = static_cast<std::int32_t>(
          awq_pack_word<traits::bits, traits::is_signed>(&in(k, c * pf), in.stride[1], excess));
    }
    if (excess != 0) {
      detail::zero_fill(out);
      detail::report_first_bad_code<Width>("awq_pack", in, k, k + 1);
    }
  }
}

/// `awq_pack` into a new (K, N/pf) tensor.
template <auto Width>
host_tensor<std::int32_t, 2> awq_pack(view2d<std::int32_t const> in) {
  host_tensor<std::int32_t, 2> out(
      {std::max<index_t>(in.extent[0], 0), std::max<index_t>(in.extent[1], 0) / pack_factor<Width>});
  awq_pack<Width>(in, out.view());
  return out;
}

/// vLLM's `pack_quantized_values_into_int32` along P of `in` (outer, P, inner) (`split_at_dim`):
/// `out` (outer, P/pf, inner), word (o, r, i) holding `in(o, r*pf + j, i)` as element j.
/// @throws shape_error if pf does not divide P or `out` is not (outer, P/pf, inner);
///         value_error naming the first code (row-major) outside the width (then `out` is zeroed).
template <auto Width>
void pack_quantized_values_into_int32(view3d<std::int32_t const> in, view3d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr bool s = traits::is_signed;
  constexpr index_t pf = traits::factor;
  using detail::row_mode;
  char const* const op = "pack_quantized_values_into_int32";
  if (!pack_dim_shapes_fit(pf, in, out)) {
    detail::throw_pack_dim_shape_error<Width>(op, in, out, true);
  }
  index_t const rows = out.extent[1];
  index_t const inner = out.extent[2];
  std::uint32_t excess = 0;
  for (index_t o = 0; o < out.extent[0] && excess == 0; ++o) {
    if (inner == 1) {
      // packing along the last dimension: a row of P codes -> a row of P/pf words (pack_cols)
      std::int32_t const* src = &in(o, 0, 0);
      std::int32_t* dst = &out(o, 0, 0);
      excess |= in.stride[1] == 1 && out.stride[1] == 1
                    ? detail::pack_cols_row<b, s, row_mode::unit>(src, 1, dst, 1, rows)
                    : detail::pack_cols_row<b, s, row_mode::strided>(src, in.stride[1], dst, out.stride[1], rows);
      continue;
    }
    bool const unit = in.stride[2] == 1 && out.stride[2] == 1;
    for (index_t r = 0; r < rows; ++r) {
      std::int32_t const* src = &in(o, r * pf, 0);
      std::int32_t* dst = &out(o, r, 0);
      excess |= unit ? detail::pack_rows_row<b, s, row_mode::unit>(src, in.stride[1], 1, dst, 1, inner)
                     : detail::pack_rows_row<b, s, row_mode::strided>(src, in.stride[1], in.stride[2], dst,
                                                                      out.stride[2], inner);
    }
  }
  if (excess != 0) {
    for (index_t o = 0; o < out.extent[0]; ++o) {
      detail::zero_fill(batch_item(out, o));
    }
    for (index_t o = 0; o < in.extent[0]; ++o) {
      try {
        detail::report_first_bad_code<Width>(op, batch_item(in, o), 0, in.extent[1]);
      } catch (value_error const& e) {
        throw value_error(std::string(e.what()) + " (at outer index " + std::to_string(o) + ")");
      }
    }
  }
}

/// vLLM's `unpack_quantized_values_into_int32` along R of `in` (outer, R, inner): `out`
/// (outer, R*pf, inner), `out(o, r*pf + j, i)` = element j of `in(o, r, i)`, zero-extended.
/// @throws shape_error if `out` is not (outer, R*pf, inner).
template <auto Width>
void unpack_quantized_values_into_int32(view3d<std::int32_t const> in, view3d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr index_t pf = traits::factor;
  using detail::row_mode;
  if (!pack_dim_shapes_fit(pf, out, in)) {
    detail::throw_pack_dim_shape_error<Width>("unpack_quantized_values_into_int32", out, in, false);
  }
  index_t const rows = in.extent[1];
  index_t const inner = in.extent[2];
  for (index_t o = 0; o < in.extent[0]; ++o) {
    if (inner == 1) {
      std::int32_t const* src = &in(o, 0, 0);
      std::int32_t* dst = &out(o, 0, 0);
      if (in.stride[1] == 1 && out.stride[1] == 1) {
        detail::unpack_cols_row<b, false, row_mode::unit>(src, 1, dst, 1, rows);
      } else {
        detail::unpack_cols_row<b, false, row_mode::strided>(src, in.stride[1], dst, out.stride[1], rows);
      }
      continue;
    }
    bool const unit = in.stride[2] == 1 && out.stride[2] == 1;
    for (index_t r = 0; r < rows; ++r) {
      for (int j = 0; j < pf; ++j) {
        std::int32_t const* src = &in(o, r, 0);
        std::int32_t* dst = &out(o, r * pf + j, 0);
        if (unit) {
          detail::unpack_rows_row<b, false, row_mode::unit>(src, 1, j, dst, 1, inner);
        } else {
          detail::unpack_rows_row<b, false, row_mode::strided>(src, in.stride[2], j, dst, out.stride[2], inner);
        }
      }
    }
  }
}

/// `pack_quantized_values_into_int32` into a new (outer, P/pf, inner) tensor.
template <auto Width>
host_tensor<std::int32_t, 3> pack_quantized_values_into_int32(view3d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  host_tensor<std::int32_t, 3> out({std::max<index_t>(in.extent[0], 0), std::max<index_t>(in.extent[1], 0) / pf,
                                    std::max<index_t>(in.extent[2], 0)});
  pack_quantized_values_into_int32<Width>(in, out.view());
  return out;
}

/// `unpack_quantized_values_into_int32` into a new (outer, R*pf, inner) tensor.
template <auto Width>
host_tensor<std::int32_t, 3> unpack_quantized_values_into_int32(view3d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  host_tensor<std::int32_t, 3> out({std::max<index_t>(in.extent[0], 0), std::max<index_t>(in.extent[1], 0) * pf,
                                    std::max<index_t>(in.extent[2], 0)});
  unpack_quantized_values_into_int32<Width>(in, out.view());
  return out;
}

}  // namespace qtl
