#pragma once
/// \file
/// What the executors of the 128x4 block-scale bands share (`qtl/detail/blockscale_band.hpp` runs
/// them; `qtl/x86/blockscale.hpp` holds the SSE2/AVX2/AVX-512 ones): the byte type, the executor
/// levels, how they store, the prefetch of the next band, and which row a word of a group is.

#include <cstdint>

#include <qtl/view.hpp>

namespace qtl::detail {

using byte_t = unsigned char;  // may alias every scale type

/// The executors, slowest first; a level runs every narrower width too (for the K-tiles left over).
enum class band_isa { portable, sse2, avx2, avx512 };

/// How the executors write: ordinary stores; streaming stores (to an aligned destination); or
/// ordinary stores into an aligned buffer, streamed from there into a destination that is not
/// aligned (the swizzle only), each line that lies wholly inside a window of tiles.
enum class band_store { plain, stream, staged };

/// The next band's input, asked for (into L2) while a band runs, as many bytes as the executors
/// read: `count` spans of `bytes` each (the next band's 128 rows, or its tiles as one span), walked
/// in memory order. Empty (`count` 0) for the last band, and where the band is too large for
/// its successor to wait in L2 (`band_prefetch_bytes`).
struct band_prefetch {
  byte_t const* const* spans = nullptr;
  int count = 0;
  index_t bytes = 0;
  int span = 0;
  std::uintptr_t at = 0;   // next line to ask for in `spans[span]`
  std::uintptr_t end = 0;  // one past its last byte

  band_prefetch() = default;
  band_prefetch(byte_t const* const* s, int n, index_t b) : spans(s), count(b > 0 ? n : 0), bytes(b) { open(0); }

  /// Asks for the next `n` lines.
  void lines(int n) {
    for (; n > 0 && span < count; --n) {
#if defined(__GNUC__)
      __builtin_prefetch(reinterpret_cast<void const*>(at), 0, 2);
#endif  // ^^^ __GNUC__ ^^^
      at += 64;
      if (at >= end) {
        open(span + 1);
      }
    }
  }

 private:
  void open(int i) {
    span = i;
    if (i < count) {
      at = reinterpret_cast<std::uintptr_t>(spans[i]) / 64 * 64;
      end = reinterpret_cast<std::uintptr_t>(spans[i]) + static_cast<std::uintptr_t>(bytes);
    }
  }
};

/// Bands whose input is larger than this are not prefetched: the next one would not wait in L2
/// (1 MiB or more on the x86 cores of the last years) until its turn. Up to 2048 K-blocks a row.
inline constexpr index_t band_prefetch_bytes = index_t{256} << 10;

constexpr int band_row(int lq, int i) { return lq + i / 4 + 32 * (i % 4); }

}  // namespace qtl::detail
