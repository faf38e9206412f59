#pragma once
/// \file
/// The x86 executor of the MoE weight shuffles and paddings (`qtl/moe.hpp`): rows copied (and
/// padding zeroed) with streaming stores
/// (16 bytes, SSE2; 64 bytes from the first 64-byte boundary on, AVX-512F) into outputs too large
/// for the caches, which skips reading each destination line before writing it, as memcpy does.
/// The entry points `detail::moe_x86` do nothing where `QTL_X86` is 0 (then rows are memcpy'd).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <qtl/detail/band_executor.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

/// How `copy_row_bytes` writes: plain `memcpy`, or streaming stores of 16 bytes (SSE2) or of
/// 64 bytes (AVX-512F, from the first 64-byte boundary on; 16 bytes before it and after the last).
enum class row_store { plain, stream16, stream64 };

#if QTL_X86
// Every byte XOR `x` on its way (x = 0: a plain copy; 0x88: uint4b8 <-> int4 nibbles).
QTL_X86_AVX512F inline void stream_row64(byte_t* dst, byte_t const* src, std::size_t n, std::uint8_t x = 0) {
  __m128i const x16 = _mm_set1_epi32(static_cast<int>(x * 0x01010101u));
  __m512i const x64 = _mm512_set1_epi32(static_cast<int>(x * 0x01010101u));
  std::size_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(dst + i) % 64 != 0; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<__m128i const*>(src + i)), x16));
  }
  for (; i + 64 <= n; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_xor_si512(_mm512_loadu_si512(src + i), x64));
  }
  for (; i < n; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<__m128i const*>(src + i)), x16));
  }
}
#endif  // ^^^ QTL_X86 ^^^

/// The entry points of qtl/moe.hpp's row copies.
namespace moe_x86 {

/// True where streaming stores exist.
inline constexpr bool streams = QTL_X86 != 0;

/// Copies `n` bytes, each XOR `x` (0: unchanged), with `How`'s streaming stores where `dst` is
/// 16-byte aligned and `n` a multiple of 16; false when it does not (`How` plain, unaligned, or no
/// x86 executor).
template <row_store How>
bool copy_row([[maybe_unused]] byte_t* dst, [[maybe_unused]] byte_t const* src, [[maybe_unused]] std::size_t n,
              [[maybe_unused]] std::uint8_t x = 0) {
#if QTL_X86
  if constexpr (How != row_store::plain) {
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && n % 16 == 0) {
      if constexpr (How == row_store::stream64) {
        stream_row64(dst, src, n, x);
      } else {
        __m128i const x16 = _mm_set1_epi32(static_cast<int>(x * 0x01010101u));
        for (std::size_t i = 0; i < n; i += 16) {
          _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                           _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<__m128i const*>(src + i)), x16));
        }
      }
      return true;
    }
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// `copy_row` with `how` chosen at run time.
inline bool copy_row(row_store how, byte_t* dst, byte_t const* src, std::size_t n, std::uint8_t x = 0) {
  switch (how) {
    case row_store::stream64: return copy_row<row_store::stream64>(dst, src, n, x);
    case row_store::stream16: return copy_row<row_store::stream16>(dst, src, n, x);
    default: return false;
  }
}

/// Writes one padded row of `out_cols` bytes at `dst`: the `cols` bytes at `src` (`cols <=
/// out_cols`; `src` may be null when `cols` is 0), then zeros, with `How`'s streaming stores (the
/// 16 bytes that hold the row's last input bytes and its first zeros assembled in a register), where
/// `How` streams, `dst` is 16-byte aligned and `out_cols` a multiple of 16; false when it does not.
template <row_store How>
bool pad_row([[maybe_unused]] byte_t* dst, [[maybe_unused]] byte_t const* src, [[maybe_unused]] std::size_t cols,
             [[maybe_unused]] std::size_t out_cols) {
#if QTL_X86
  if constexpr (How != row_store::plain) {
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && out_cols % 16 == 0) {
      std::size_t i = cols / 16 * 16;
      if (i > 0) {
        copy_row<How>(dst, src, i);
      }
      if (i < cols) {
        alignas(16) byte_t edge[16] = {};
        std::memcpy(edge, src + i, cols - i);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_load_si128(reinterpret_cast<__m128i const*>(edge)));
        i += 16;
      }
      __m128i const z = _mm_setzero_si128();
      for (; i < out_cols; i += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), z);
      }
      return true;
    }
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

}  // namespace moe_x86

}  // namespace qtl::detail
