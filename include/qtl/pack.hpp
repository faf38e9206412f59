#pragma once
/// \file
/// Bit packing of integer codes into int32 words, as sglang/vLLM's `pack_cols`, `pack_rows` and
/// `unpack_cols` do (`docs/spec/semantics.md` §4.12-§4.14), plus `unpack_rows`, the exact inverse of
/// `pack_rows` that the reference lacks.
///
/// A *width* is a template argument: a bit width (`qtl::pack_rows<4>`) or an integer
/// `qtl::scalar_type` (`qtl::pack_rows<qtl::uint4b8>`, or `scalar_constant<V>::value`). Widths
/// that do not divide 32, and floating-point scalar types, do not compile.
///
/// One int32 word holds `pack_factor<W> = 32 / b` codes of `b` bits; element `j` of a word is in
/// bits `[j*b, (j+1)*b)`, least significant first. For b = 4 (pack factor 8):
///
///     bit 31                                          bit 0
///     | e7 | e6 | e5 | e4 | e3 | e2 | e1 | e0 |         word = OR_j (code_j << 4j)
///
///   pack_cols: in (K, N)  -> out (K, N/pf)   out[k, c] holds in[k, c*pf + j] as element j
///   pack_rows: in (K, N)  -> out (K/pf, N)   out[r, n] holds in[r*pf + j, n] as element j
///                                            (GPTQ's qweight layout; vLLM's `gptq_pack`)
///
/// Differences from the reference, on purpose (docs/spec/README.md: "explicit where it is not"):
/// * A code outside its width is a `qtl::value_error` on the host that names the first offending
///   (row, col) in row-major order and its value; the reference ORs it in unmasked and silently
///   corrupts the neighbouring fields. For a bit width or an unsigned scalar type the valid codes
///   are `[0, 2^b)` (b = 32: every int32, reinterpreted, as in the reference); for a signed
///   scalar type (int4, int8) they are `[-2^(b-1), 2^(b-1))`, stored in two's complement, and
///   unpacking sign-extends, so that the round trip holds.
/// * The device element code does not validate (device code never throws); it masks each code to
///   its width, so an out-of-range code changes only its own field.
/// * A host call that meets an out-of-range code leaves `out` zero-filled, never half written (a
///   shape_error is thrown before anything is written).
///
/// Views: element (i, j) of a `view2d` is `data[i*stride[0] + j*stride[1]]`; any strides work,
/// unit column strides are the fast path. `in` and `out` must not overlap.
///
/// Speed: the host loops run row by row over contiguous streams that g++ vectorises at -O2 and
/// -O3 (bench/pack_bench.cpp compares them with memcpy). Everything is `constexpr`: on small
/// arrays the ops run in constant evaluation (test/static/pack_static.cpp).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <qtl/element/pack.hpp>
#include <qtl/error.hpp>
#include <qtl/macros.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>

namespace qtl {

namespace detail {

// "qtl::pack_rows<4>" or "qtl::pack_rows<uint4b8>", for messages.
template <auto Width>
std::string pack_op_name(char const* op) {
  if constexpr (width_is_scalar_type<Width>()) {
    return std::string("qtl::") + op + "<" + std::string(Width.name().view()) + ">";
  } else {
    return std::string("qtl::") + op + "<" + std::to_string(pack_traits<Width>::bits) + ">";
  }
}

[[noreturn]] inline void throw_shape(std::string const& op, std::string const& what) {
  throw shape_error(op + ": " + what);
}

template <auto Width>
[[noreturn]] void throw_code_out_of_range(char const* op, index_t row, index_t col, std::int32_t value) {
  using traits = pack_traits<Width>;
  long long const lo = traits::is_signed ? -(1LL << (traits::bits - 1)) : 0;
  long long const hi = traits::is_signed ? (1LL << (traits::bits - 1)) - 1 : (1LL << traits::bits) - 1;
  throw value_error(pack_op_name<Width>(op) + ": in(" + std::to_string(row) + ", " + std::to_string(col) +
                    ") = " + std::to_string(value) + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], the range of " + std::to_string(traits::bits) +
                    "-bit codes");
}

// Why `codes` (the (K, N) side) and `packed` (the words) do not fit an op packing along `dim`
// (0: rows, 1: cols); throws shape_error naming the dimension. Only called once a check failed.
template <auto Width>
[[noreturn]] void throw_pack_shape_error(char const* op, int dim, view2d<std::int32_t const> codes,
                                         view2d<std::int32_t const> packed, bool codes_are_input) {
  constexpr index_t pf = pack_factor<Width>;
  std::string const name = pack_op_name<Width>(op);
  char const* codes_name = codes_are_input ? "in" : "out";
  char const* packed_name = codes_are_input ? "out" : "in";
  for (auto const& [v, v_name] : {std::pair{codes, codes_name}, std::pair{packed, packed_name}}) {
    if (v.extent[0] < 0 || v.extent[1] < 0) {
      throw_shape(name, std::string(v_name) + " has a negative extent [" + std::to_string(v.extent[0]) +
                            ", " + std::to_string(v.extent[1]) + "]");
    }
  }
  char const* dim_name = dim == 0 ? "rows" : "cols";
  index_t const n = codes.extent[dim];
  if (n % pf != 0) {
    throw_shape(name, std::string(codes_name) + " " + dim_name + " (" + (dim == 0 ? "K" : "N") + " = " +
                          std::to_string(n) + ") is not a multiple of the pack factor " +
                          std::to_string(pf));
  }
  if (packed.extent[dim] != n / pf) {
    throw_shape(name, std::string(packed_name) + " has " + std::to_string(packed.extent[dim]) + " " +
                          dim_name + "; expected " + codes_name + " " + dim_name + " / pack factor = " +
                          std::to_string(n) + " / " + std::to_string(pf) + " = " + std::to_string(n / pf));
  }
  int const other = 1 - dim;
  throw_shape(name, std::string(packed_name) + " has " + std::to_string(packed.extent[other]) + " " +
                        (other == 0 ? "rows" : "cols") + "; expected " +
                        std::to_string(codes.extent[other]) + ", the " + (other == 0 ? "rows" : "cols") +
                        " of " + codes_name);
}

// Checks `codes` (K, N) against `packed` for an op that packs (or unpacks) along `dim`.
template <auto Width>
constexpr void check_pack_shapes(char const* op, int dim, view2d<std::int32_t const> codes,
                                 view2d<std::int32_t const> packed, bool codes_are_input) {
  if (!pack_shapes_fit(pack_factor<Width>, dim, codes, packed)) {
    throw_pack_shape_error<Width>(op, dim, codes, packed, codes_are_input);
  }
}

// Leaves `out` all zeros (the state of a failed call).
constexpr void zero_fill(view2d<std::int32_t> out) {
  for (index_t i = 0; i < out.extent[0]; ++i) {
    for (index_t j = 0; j < out.extent[1]; ++j) {
      out(i, j) = 0;
    }
  }
}

// The first code of `in` rows [r0, r1) outside the width, in row-major order; throws for it.
template <auto Width>
constexpr void report_first_bad_code(char const* op, view2d<std::int32_t const> in, index_t r0, index_t r1) {
  using traits = pack_traits<Width>;
  for (index_t i = r0; i < r1; ++i) {
    for (index_t j = 0; j < in.extent[1]; ++j) {
      if (code_excess<traits::bits, traits::is_signed>(in(i, j)) != 0) {
        throw_code_out_of_range<Width>(op, i, j, in(i, j));
      }
    }
  }
}

// The row loops. They pack unmasked fields (pack_word<..., Masked = false>): the ops reject any row
// whose `excess` is non-zero, so masks would only cost instructions. Each loop runs whole chunks of
// `chunk` columns in an inner loop of constant trip count (which g++ vectorises even under -O2's
// cheap cost model: no epilogue, no run-time checks), then the remainder. They are kept out of line
// (noinline): inlined into the ops, g++ 12 -O2 no longer vectorised them (docs/performance.md).
// Modes:
//   strided    any column strides (the general path);
//   unit       unit column strides on both sides: contiguous streams.
enum class row_mode { strided, unit };
inline constexpr int chunk = 64;
inline constexpr row_mode pick_mode(bool unit) { return unit ? row_mode::unit : row_mode::strided; }

// out row (n words) from pf input rows starting at `in`, `ld` elements apart:
//   out[c] = OR_j in[j*ld + c] << (b*j)
template <int Bits, bool Signed, row_mode Mode>
[[gnu::noinline]] constexpr std::uint32_t pack_rows_row(std::int32_t const* __restrict__ in, index_t ld,
                                                        index_t in_cs, std::int32_t* __restrict__ out,
                                                        index_t out_cs, index_t n) {
  index_t const ics = Mode == row_mode::strided ? in_cs : 1;
  index_t const ocs = Mode == row_mode::strided ? out_cs : 1;
  std::uint32_t excess = 0;
  index_t c = 0;
  for (; c + chunk <= n; c += chunk) {
    std::int32_t const* src = in + c * ics;
    std::int32_t* dst = out + c * ocs;
    for (int t = 0; t < chunk; ++t) {
      dst[t * ocs] = static_cast<std::int32_t>(pack_word<Bits, Signed, false>(src + t * ics, ld, excess));
    }
  }
  for (; c < n; ++c) {
    out[c * ocs] = static_cast<std::int32_t>(pack_word<Bits, Signed, false>(in + c * ics, ld, excess));
  }
  return excess;
}

// out row (n words) from one input row of n * pf codes: out[c] = OR_j in[c*pf + j] << (b*j)
template <int Bits, bool Signed, row_mode Mode>
[[gnu::noinline]] constexpr std::uint32_t pack_cols_row(std::int32_t const* __restrict__ in, index_t in_cs,
                                                        std::int32_t* __restrict__ out, index_t out_cs,
                                                        index_t n) {
  constexpr index_t pf = 32 / Bits;
  index_t const ics = Mode == row_mode::strided ? in_cs : 1;
  index_t const ocs = Mode == row_mode::strided ? out_cs : 1;
  std::uint32_t excess = 0;
  index_t c = 0;
  for (; c + chunk <= n; c += chunk) {
    std::int32_t const* src = in + c * pf * ics;
    std::int32_t* dst = out + c * ocs;
    for (int t = 0; t < chunk; ++t) {
      dst[t * ocs] = static_cast<std::int32_t>(pack_word<Bits, Signed, false>(src + t * pf * ics, ics, excess));
    }
  }
  for (; c < n; ++c) {
    out[c * ocs] = static_cast<std::int32_t>(pack_word<Bits, Signed, false>(in + c * pf * ics, ics, excess));
  }
  return excess;
}

// out row (n codes) = element j of each word of the input row (n words).
template <int Bits, bool Signed, row_mode Mode>
[[gnu::noinline]] constexpr void unpack_rows_row(std::int32_t const* __restrict__ in, index_t in_cs, int j,
                                                 std::int32_t* __restrict__ out, index_t out_cs, index_t n) {
  index_t const ics = Mode == row_mode::strided ? in_cs : 1;
  index_t const ocs = Mode == row_mode::strided ? out_cs : 1;
  index_t c = 0;
  for (; c + chunk <= n; c += chunk) {
    std::int32_t const* src = in + c * ics;
    std::int32_t* dst = out + c * ocs;
    for (int t = 0; t < chunk; ++t) {
      dst[t * ocs] = unpack_code<Bits, Signed>(static_cast<std::uint32_t>(src[t * ics]), j);
    }
  }
  for (; c < n; ++c) {
    out[c * ocs] = unpack_code<Bits, Signed>(static_cast<std::uint32_t>(in[c * ics]), j);
  }
}

// out row (n * pf codes) from one input row of n words: out[c*pf + j] = element j of in[c]
template <int Bits, bool Signed, row_mode Mode>
[[gnu::noinline]] constexpr void unpack_cols_row(std::int32_t const* __restrict__ in, index_t in_cs,
                                                 std::int32_t* __restrict__ out, index_t out_cs, index_t n) {
  constexpr index_t pf = 32 / Bits;
  index_t const ics = Mode == row_mode::strided ? in_cs : 1;
  index_t const ocs = Mode == row_mode::strided ? out_cs : 1;
  index_t c = 0;
  for (; c + chunk <= n; c += chunk) {
    std::int32_t const* src = in + c * ics;
    std::int32_t* dst = out + c * pf * ocs;
    for (int t = 0; t < chunk; ++t) {
      unpack_word<Bits, Signed>(static_cast<std::uint32_t>(src[t * ics]), dst + t * pf * ocs, ocs);
    }
  }
  for (; c < n; ++c) {
    unpack_word<Bits, Signed>(static_cast<std::uint32_t>(in[c * ics]), out + c * pf * ocs, ocs);
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Host operations on caller-owned views (no allocation) and convenience forms returning a tensor.
// ---------------------------------------------------------------------------------------------

/// Packs `pack_factor<Width>` consecutive rows of `in` (K, N) into each row of `out` (K/pf, N):
/// `out[r, n]` holds `in[r*pf + j, n]` as element j (sglang `pack_rows`, GPTQ qweight layout).
/// @throws shape_error if pf does not divide K or `out` is not (K/pf, N);
///         value_error naming the first code (row-major) outside the width (then `out` is zeroed).
template <auto Width>
constexpr void pack_rows(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr bool s = traits::is_signed;
  constexpr index_t pf = traits::factor;
  using detail::row_mode;
  detail::check_pack_shapes<Width>("pack_rows", 0, in, out, true);
  bool const unit = in.stride[1] == 1 && out.stride[1] == 1;
  row_mode const mode = detail::pick_mode(unit);
  for (index_t r = 0; r < out.extent[0]; ++r) {
    std::int32_t const* src = in.data + r * pf * in.stride[0];
    std::int32_t* dst = out.data + r * out.stride[0];
    index_t const ld = in.stride[0];
    std::uint32_t const excess =
        mode == row_mode::unit
            ? detail::pack_rows_row<b, s, row_mode::unit>(src, ld, 1, dst, 1, out.extent[1])
            : detail::pack_rows_row<b, s, row_mode::strided>(src, ld, in.stride[1], dst, out.stride[1],
                                                             out.extent[1]);
    if (excess != 0) {
      detail::zero_fill(out);
      detail::report_first_bad_code<Width>("pack_rows", in, r * pf, (r + 1) * pf);
    }
  }
}

/// Packs `pack_factor<Width>` consecutive columns of `in` (K, N) into each word of `out`
/// (K, N/pf): `out[k, c]` holds `in[k, c*pf + j]` as element j (sglang `pack_cols`).
/// @throws shape_error if pf does not divide N or `out` is not (K, N/pf);
///         value_error naming the first code (row-major) outside the width (then `out` is zeroed).
template <auto Width>
constexpr void pack_cols(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr bool s = traits::is_signed;
  using detail::row_mode;
  detail::check_pack_shapes<Width>("pack_cols", 1, in, out, true);
  bool const unit = in.stride[1] == 1 && out.stride[1] == 1;
  row_mode const mode = detail::pick_mode(unit);
  for (index_t k = 0; k < in.extent[0]; ++k) {
    std::int32_t const* src = in.data + k * in.stride[0];
    std::int32_t* dst = out.data + k * out.stride[0];
    std::uint32_t const excess =
        mode == row_mode::unit
            ? detail::pack_cols_row<b, s, row_mode::unit>(src, 1, dst, 1, out.extent[1])
            : detail::pack_cols_row<b, s, row_mode::strided>(src, in.stride[1], dst, out.stride[1],
                                                             out.extent[1]);
    if (excess != 0) {
      detail::zero_fill(out);
      detail::report_first_bad_code<Width>("pack_cols", in, k, k + 1);
    }
  }
}

/// Inverse of `pack_rows`: `in` (K/pf, N) words -> `out` (K, N) codes,
/// `out[r*pf + j, n]` = element j of `in[r, n]` (zero-extended; sign-extended for signed types).
/// @throws shape_error if pf does not divide K (= out rows) or `in` is not (K/pf, N).
template <auto Width>
constexpr void unpack_rows(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr bool s = traits::is_signed;
  constexpr int pf = traits::factor;
  using detail::row_mode;
  detail::check_pack_shapes<Width>("unpack_rows", 0, out, in, false);
  bool const unit = in.stride[1] == 1 && out.stride[1] == 1;
  row_mode const mode = detail::pick_mode(unit);
  for (index_t r = 0; r < in.extent[0]; ++r) {
    std::int32_t const* src = in.data + r * in.stride[0];
    for (int j = 0; j < pf; ++j) {
      std::int32_t* dst = out.data + (r * pf + j) * out.stride[0];
      if (mode == row_mode::unit) {
        detail::unpack_rows_row<b, s, row_mode::unit>(src, 1, j, dst, 1, in.extent[1]);
      } else {
        detail::unpack_rows_row<b, s, row_mode::strided>(src, in.stride[1], j, dst, out.stride[1], in.extent[1]);
      }
    }
  }
}

/// Inverse of `pack_cols` (sglang `unpack_cols`): `in` (K, N/pf) words -> `out` (K, N) codes,
/// `out[k, c*pf + j]` = element j of `in[k, c]` (zero-extended; sign-extended for signed types).
/// @throws shape_error if pf does not divide N (= out cols) or `in` is not (K, N/pf).
template <auto Width>
constexpr void unpack_cols(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  using traits = pack_traits<Width>;
  constexpr int b = traits::bits;
  constexpr bool s = traits::is_signed;
  using detail::row_mode;
  detail::check_pack_shapes<Width>("unpack_cols", 1, out, in, false);
  bool const unit = in.stride[1] == 1 && out.stride[1] == 1;
  row_mode const mode = detail::pick_mode(unit);
  for (index_t k = 0; k < in.extent[0]; ++k) {
    std::int32_t const* src = in.data + k * in.stride[0];
    std::int32_t* dst = out.data + k * out.stride[0];
    if (mode == row_mode::unit) {
      detail::unpack_cols_row<b, s, row_mode::unit>(src, 1, dst, 1, in.extent[1]);
    } else {
      detail::unpack_cols_row<b, s, row_mode::strided>(src, in.stride[1], dst, out.stride[1], in.extent[1]);
    }
  }
}

/// `pack_rows` into a new (K/pf, N) tensor.
template <auto Width>
host_tensor<std::int32_t, 2> pack_rows(view2d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  // Bad extents give an empty tensor here and the view form's error below.
  host_tensor<std::int32_t, 2> out({std::max<index_t>(in.extent[0], 0) / pf, std::max<index_t>(in.extent[1], 0)});
  pack_rows<Width>(in, out.view());
  return out;
}

/// `pack_cols` into a new (K, N/pf) tensor.
template <auto Width>
host_tensor<std::int32_t, 2> pack_cols(view2d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  host_tensor<std::int32_t, 2> out({std::max<index_t>(in.extent[0], 0), std::max<index_t>(in.extent[1], 0) / pf});
  pack_cols<Width>(in, out.view());
  return out;
}

/// `unpack_rows` into a new (K, N) tensor, K = pf * (rows of `in`).
template <auto Width>
host_tensor<std::int32_t, 2> unpack_rows(view2d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  host_tensor<std::int32_t, 2> out({std::max<index_t>(in.extent[0], 0) * pf, std::max<index_t>(in.extent[1], 0)});
  unpack_rows<Width>(in, out.view());
  return out;
}

/// `unpack_cols` into a new (K, N) tensor, N = pf * (cols of `in`).
template <auto Width>
host_tensor<std::int32_t, 2> unpack_cols(view2d<std::int32_t const> in) {
  constexpr index_t pf = pack_factor<Width>;
  host_tensor<std::int32_t, 2> out({std::max<index_t>(in.extent[0], 0), std::max<index_t>(in.extent[1], 0) * pf});
  unpack_cols<Width>(in, out.view());
  return out;
}

/// One word (as int32, like the reference's output) from `pack_factor<Width>` codes, element j
/// from `codes[j]`. @throws value_error if a code is outside the width.
template <auto Width>
constexpr std::int32_t pack(std::array<std::int32_t, pack_factor<Width>> const& codes) {
  using traits = pack_traits<Width>;
  std::uint32_t excess = 0;
  std::uint32_t const word = pack_word<traits::bits, traits::is_signed>(codes.data(), 1, excess);
  if (excess != 0) {
    detail::report_first_bad_code<Width>("pack", make_view(codes.data(), 1, traits::factor), 0, 1);
  }
  return static_cast<std::int32_t>(word);
}

/// The `pack_factor<Width>` codes of one word, element j at index j.
template <auto Width>
constexpr std::array<std::int32_t, pack_factor<Width>> unpack(std::int32_t word) {
  using traits = pack_traits<Width>;
  std::array<std::int32_t, traits::factor> codes{};
  for (int j = 0; j < traits::factor; ++j) {
    codes[j] = unpack_code<traits::bits, traits::is_signed>(static_cast<std::uint32_t>(word), j);
  }
  return codes;
}

}  // namespace qtl
