#pragma once
/// \file
/// The element layer of vLLM's packings beyond `pack_rows` / `pack_cols` (`qtl/pack_nd.hpp` runs it
/// on the host, `qtl/cuda/pack_nd.cuh` on the device): the AWQ word (`awq_pack_word`) and the word
/// of a packing along any dimension of a tensor seen as (outer, P, inner) (`pack_dim_word`,
/// `unpack_dim_word`), with the shape predicate that host ops and CUDA launchers share.
///
/// Any tensor and any `packed_dim` reduce to three extents: `outer` the product of the extents
/// before `packed_dim`, `P` its own, `inner` the product of those after it. Packing along it maps
/// codes (outer, P, inner) to words (outer, P/pf, inner); word (o, r, i) holds code
/// (o, r*pf + j, i) as element j (bits [j*b, (j+1)*b)), as vLLM's `pack_quantized_values_into_int32`
/// (`w_q_perm[..., j::pf] << b*j`) does once `packed_dim` is moved last.

#include <cstdint>

#include <qtl/element/marlin.hpp>
#include <qtl/element/pack.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// One AWQ word (vLLM `awq_pack`) from the `32 / Bits` codes `codes[0], codes[stride], ...` of
/// one word's columns: slot i holds `codes[marlin::awq_column<Bits>(i) * stride]`, the
/// `[0,2,4,6,1,3,5,7]` (4-bit) or `[0,2,1,3]` (8-bit) interleave. ORs each code's `code_excess`
/// into `excess`; `Masked` as `pack_word`.
template <int Bits, bool Signed = false, bool Masked = true>
QTL_HOST_DEVICE constexpr std::uint32_t awq_pack_word(std::int32_t const* codes, index_t stride,
                                                      std::uint32_t& excess) {
  static_assert(Bits == 4 || Bits == 8, "qtl::awq_pack_word: AWQ packs 4- or 8-bit codes");
  constexpr int pf = 32 / Bits;
  std::int32_t ordered[pf] = {};
  for (int i = 0; i < pf; ++i) {
    ordered[i] = codes[marlin::awq_column<Bits>(i) * stride];
  }
  return pack_word<Bits, Signed, Masked>(ordered, 1, excess);
}

/// True when `codes` (outer, P, inner) and `packed` fit a packing along P with pack factor `pf`:
/// extents non-negative, pf divides P, and `packed` is (outer, P/pf, inner). (The host ops throw
/// shape_error when it is false; the CUDA launchers return cudaErrorInvalidValue.)
QTL_HOST_DEVICE constexpr bool pack_dim_shapes_fit(index_t pf, view3d<std::int32_t const> codes,
                                                   view3d<std::int32_t const> packed) {
  for (int d = 0; d < 3; ++d) {
    if (codes.extent[d] < 0 || packed.extent[d] < 0) {
      return false;
    }
  }
  return pf > 0 && codes.extent[1] % pf == 0 && packed.extent[1] == codes.extent[1] / pf &&
         packed.extent[0] == codes.extent[0] && packed.extent[2] == codes.extent[2];
}

/// Word (o, r, i) of a packing along P: codes (o, r*pf + j, i) as element j.
template <int Bits, bool Signed = false, bool Masked = true>
QTL_HOST_DEVICE constexpr std::uint32_t pack_dim_word(view3d<std::int32_t const> codes, index_t o, index_t r, index_t i,
                                                      std::uint32_t& excess) {
  constexpr index_t pf = 32 / Bits;
  return pack_word<Bits, Signed, Masked>(&codes(o, r * pf, i), codes.stride[1], excess);
}

/// The inverse of `pack_dim_word` as vLLM's `unpack_quantized_values_into_int32` does it: element j
/// of `word` to codes (o, r*pf + j, i), zero-extended (`(w >> b*j) & mask`) whatever the type's sign.
template <int Bits>
QTL_HOST_DEVICE constexpr void unpack_dim_word(std::uint32_t word, view3d<std::int32_t> codes, index_t o, index_t r,
                                               index_t i) {
  constexpr index_t pf = 32 / Bits;
  unpack_word<Bits, false>(word, &codes(o, r * pf, i), codes.stride[1]);
}

}  // namespace qtl
