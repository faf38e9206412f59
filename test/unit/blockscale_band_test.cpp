// The 128x4 band executors of qtl/detail/blockscale_band.hpp (portable, SSE2, AVX2, AVX-512; each
// one this CPU runs) against the reference loops of qtl/blockscale.hpp, byte for byte: every M and
// K around the tile and vector widths (padding rows, ragged K-tiles, whole 16-tile blocks with
// leftovers), batches, unaligned pointers, row strides with gaps, and bands of arbitrary row
// pointers (permuted and repeated, as the MoE preparation gathers them).
#include <array>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <qtl/blockscale.hpp>
#include <random>
#include <vector>

namespace {

using qtl::index_t;
using qtl::detail::band_isa;
using qtl::detail::byte_t;
using layout = qtl::layout_128x4;

std::vector<band_isa> levels() {
  std::vector<band_isa> v;
  for (band_isa l : {band_isa::portable, band_isa::sse2, band_isa::avx2, band_isa::avx512}) {
    if (l <= qtl::detail::best_band_isa()) {
      v.push_back(l);
    }
  }
  if (qtl::detail::best_band_isa() != band_isa::avx512) {
    WARN("this CPU does not run every executor; only the ones up to its best are compared");
  }
  return v;
}

std::vector<byte_t> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<byte_t> v(n);
  for (auto& b : v) {
    b = static_cast<byte_t>(rng());
  }
  return v;
}

// `n` bytes at a 64-byte aligned address plus `offset` (the executors stream only to aligned tiles).
struct buffer {
  std::vector<byte_t> storage;
  byte_t* data;
  buffer(std::size_t n, index_t offset, byte_t fill) : storage(n + 64 + static_cast<std::size_t>(offset), fill) {
    auto const a = reinterpret_cast<std::uintptr_t>(storage.data());
    data = storage.data() + (64 - a % 64) % 64 + offset;
  }
  /// The `n` bytes at `data` and the one after them (which no operation may write).
  std::vector<byte_t> bytes(std::size_t n) const { return {data, data + n + 1}; }
};

constexpr index_t ms[] = {1, 2, 31, 32, 33, 127, 128, 129, 200, 256, 383};
constexpr index_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 28, 31, 32, 33, 36, 60, 63, 64, 65, 67, 68, 96, 100, 131};

TEST_CASE("swizzle and unswizzle executors equal the reference loops", "[blockscale][band]") {
  std::mt19937 rng(7);
  for (band_isa const level : levels()) {
    for (bool const stream : {false, true}) {
      for (index_t const batch : {1, 3}) {
        for (index_t const m : ms) {
          for (index_t const k : ks) {
            // Row stride k, k + 5 or the next multiple of 64 (aligned rows: the un-swizzle streams).
            index_t const stride = std::array<index_t, 3>{k, k + 5, (k + 63) / 64 * 64}[rng() % 3];
            // Offset from 64-byte alignment: none, a multiple of 16 (rows then start with a head of
            // narrower blocks), or any.
            std::uint32_t const pick = rng() % 3;
            index_t const misalign = pick == 0 ? 0 : pick == 1 ? 16 * (1 + rng() % 3) : 1 + rng() % 63;
            index_t const mp = layout::pad_rows(m);
            index_t const kp = layout::pad_cols(k);
            INFO("level " << static_cast<int>(level) << ", stream " << stream << ", B " << batch << ", M " << m
                          << ", K " << k << ", row stride " << stride << ", offset " << misalign);
            // Swizzle from a strided, maybe misaligned input into a maybe misaligned output.
            auto const n_in = static_cast<std::size_t>(batch * m * stride);
            buffer in(n_in, misalign, 0);
            for (std::size_t i = 0; i < n_in; ++i) {
              in.data[i] = static_cast<byte_t>(rng());
            }
            qtl::view<byte_t, 3> src;
            src.data = in.data;
            src.extent[0] = batch;
            src.extent[1] = m;
            src.extent[2] = k;
            src.stride[0] = m * stride;
            src.stride[1] = stride;
            src.stride[2] = 1;
            auto const n_out = static_cast<std::size_t>(batch * mp * kp);
            buffer want(n_out, misalign, 0xEE);
            buffer got(n_out, misalign, 0xEE);
            qtl::detail::swizzle_generic<layout>(qtl::view<byte_t const, 3>(src), want.data, mp, kp);
            qtl::detail::swizzle_128x4(qtl::view<byte_t const, 3>(src), got.data, mp, kp, level, stream);
            qtl::detail::band_stream_fence();
            REQUIRE(got.bytes(n_out) == want.bytes(n_out));

            // Unswizzle (every tile byte random, padding included) into a strided output whose
            // gaps must stay untouched.
            buffer tiles(n_out, misalign % 8, 0);
            for (std::size_t i = 0; i < n_out; ++i) {
              tiles.data[i] = static_cast<byte_t>(rng());
            }
            buffer back_want(n_in, misalign, 0x5A);
            buffer back_got(n_in, misalign, 0x5A);
            qtl::view<byte_t, 3> dst_want = src;
            dst_want.data = back_want.data;
            qtl::view<byte_t, 3> dst_got = src;
            dst_got.data = back_got.data;
            REQUIRE(qtl::detail::disjoint_unit_rows(dst_got));
            qtl::detail::unswizzle_generic<layout>(tiles.data, dst_want, mp, kp);
            qtl::detail::unswizzle_128x4(tiles.data, dst_got, mp, level, stream);
            qtl::detail::band_stream_fence();
            REQUIRE(back_got.bytes(n_in) == back_want.bytes(n_in));
          }
        }
      }
    }
  }
}

TEST_CASE("band executors on arbitrary row pointers (permuted, repeated)", "[blockscale][band]") {
  std::mt19937 rng(11);
  for (band_isa const level : levels()) {
    for (index_t const k : ks) {
      for (bool const stream : {false, true}) {
        index_t const kp = layout::pad_cols(k);
        INFO("level " << static_cast<int>(level) << ", K " << k << ", stream " << stream);
        std::vector<byte_t> pool = random_bytes(static_cast<std::size_t>(200 * k + 3), rng);
        byte_t const* rows[128];
        for (auto& r : rows) {
          r = pool.data() + 1 + static_cast<index_t>(rng() % 200) * k;
        }
        std::vector<byte_t> want(static_cast<std::size_t>(128 * kp), 0xEE);
        for (index_t r = 0; r < 128; ++r) {
          for (index_t c = 0; c < kp; ++c) {
            want[static_cast<std::size_t>(qtl::blockscale_offset<layout>(r, c, kp))] = c < k ? rows[r][c] : byte_t{0};
          }
        }
        buffer got(want.size(), stream ? 0 : 1, 0xEE);
        qtl::detail::swizzle_band_128x4(rows, k, got.data, level, stream);
        qtl::detail::band_stream_fence();
        REQUIRE(std::vector<byte_t>(got.data, got.data + want.size()) == want);

        // And back into 128 separate rows in shuffled order (64-byte aligned ones when streaming).
        index_t const out_stride = stream ? (k + 64) / 64 * 64 : k + 1;
        buffer out(static_cast<std::size_t>(128 * out_stride), 0, 0x5A);
        byte_t* out_rows[128];
        for (index_t r = 0; r < 128; ++r) {
          out_rows[r] = out.data + ((r * 37) % 128) * out_stride;
        }
        qtl::detail::unswizzle_band_128x4(got.data, k, out_rows, level, stream);
        qtl::detail::band_stream_fence();
        for (index_t r = 0; r < 128; ++r) {
          for (index_t c = 0; c < k; ++c) {
            REQUIRE(out_rows[r][c] == rows[r][c]);
          }
          REQUIRE(out_rows[r][k] == 0x5A);
        }
      }
    }
  }
}

}  // namespace
