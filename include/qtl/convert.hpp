#pragma once
/// \file
/// The load-time converters of sglang and vLLM on the host (`docs/spec/converters.md` §3), each
/// reproducing a named engine byte for byte where the engines differ (the recipes of
/// <qtl/element/convert.hpp>):
///
///   block_quant_dequant     FP8 block q [G,N,K] + s [G,nb,kb] -> F32 or BF16 [G,N,K]
///   per_block_cast_to_fp8   F32 [G,N,K] -> q [G,N,K] + s [G,nb,kb] (pow2 by a rule, or not)
///   requant_weight_ue8m0    FP8 block -> FP8 block with power-of-two scales (a recipe)
///   deepgemm_pack_ue8m0     pow2 scales [G,nb,kb] -> DeepGEMM's packed int32 [G,P,A]
///   deepgemm_unpack_ue8m0   its inverse (sglang `_unpack_ue8m0_scale_for_triton`, any N)
///   fp8_block_to_mxfp4      FP8 block -> E2M1 codes [G,N,K/2] + E8M0 bytes [G,N,K/32] (sglang)
///   input_to_float8         F32 [n] -> e4m3 codes + the per-tensor scale_inv fl(1/fl(448/amax))
///   fp8_block_to_fp8_tensor FP8 block -> per-tensor FP8 (sglang block_quant_to_tensor_quant, CPU)
///   fp8_block_to_nvfp4      FP8 block -> E2M1 codes [G,N,K/2] + E4M3 scales [G,N,K/16] (QTL's own
///                           definition: no engine recipe is published, see its contract)
///
/// G = 1 for a plain [N,K] weight; stacked experts are converted one matrix at a time (the newest
/// sglang and vLLM; the older sglang flattening of (E*N, K) is not reproduced). Sizes are checked
/// before anything is written: `shape_error` names the dimension, `value_error` the value.
///
/// `threads` (default 1) of the whole-tensor converters: their blocks are independent, so the
/// tensor is cut into slices of whole block rows, one per thread (detail::for_each_row_slice); the
/// output bytes do not depend on it.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/convert.hpp>
#include <qtl/element/fp8.hpp>
#include <qtl/error.hpp>
#include <qtl/fp4.hpp>
#include <qtl/numeric.hpp>
#include <qtl/parallel.hpp>
#include <qtl/x86/convert.hpp>

namespace qtl::convert {

/// A G x N x K weight in blocks of `block`: nb = ceil(N/BN) block rows, kb = ceil(K/BK) columns.
struct block_grid {
  std::int64_t groups = 1;
  std::int64_t n = 0;
  std::int64_t k = 0;
  block_size block{};

  constexpr std::int64_t n_blocks() const { return (n + block.n - 1) / block.n; }
  constexpr std::int64_t k_blocks() const { return (k + block.k - 1) / block.k; }
  constexpr std::int64_t elements() const { return groups * n * k; }
  constexpr std::int64_t scales() const { return groups * n_blocks() * k_blocks(); }
};

namespace detail {

[[noreturn]] inline void fail_shape(std::string const& op, std::string const& what) {
  throw shape_error("qtl::convert::" + op + ": " + what);
}

/// Checks the grid, the element count and the scale count.
inline void check_grid(std::string const& op, block_grid const& g, std::size_t elements, std::size_t scales) {
  if (g.block.n <= 0 || g.block.k <= 0) {
    fail_shape(op, "block size " + std::to_string(g.block.n) + "x" + std::to_string(g.block.k) + " must be positive");
  }
  if (g.groups < 0 || g.n < 0 || g.k < 0) {
    fail_shape(op, "negative extent");
  }
  if (static_cast<std::int64_t>(elements) != g.elements()) {
    fail_shape(op, "the weight has " + std::to_string(elements) + " elements, G*N*K = " + std::to_string(g.elements()));
  }
  if (static_cast<std::int64_t>(scales) != g.scales()) {
    fail_shape(op, "the scales have " + std::to_string(scales) + " elements; ceil(N/BN) x ceil(K/BK) = " +
                       std::to_string(g.n_blocks()) + " x " + std::to_string(g.k_blocks()) + " per matrix (" +
                       std::to_string(g.groups) + " matrices) are needed");
  }
}

/// Calls f(g, bi, bj, n0, n1, k0, k1) for every block of the grid.
template <class F>
void for_each_block(block_grid const& g, F&& f) {
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    for (std::int64_t bi = 0; bi < g.n_blocks(); ++bi) {
      std::int64_t const n0 = bi * g.block.n;
      std::int64_t const n1 = n0 + g.block.n < g.n ? n0 + g.block.n : g.n;
      for (std::int64_t bj = 0; bj < g.k_blocks(); ++bj) {
        std::int64_t const k0 = bj * g.block.k;
        std::int64_t const k1 = k0 + g.block.k < g.k ? k0 + g.block.k : g.k;
        f(gi, bi, bj, n0, n1, k0, k1);
      }
    }
  }
}

/// Where the rows of a slice of `for_each_row_slice` lie in the whole weight, so that a refusal in
/// the slice names the element of the whole: `row` the stack row (g*N + n) of the slice's row 0,
/// `n` the whole's N (0: the grid is the whole).
struct slice_origin {
  std::int64_t row = 0;
  std::int64_t n = 0;
};

/// "(g, n, k)" of element (gi, n, k) of grid `g` in the whole weight `o` places it in.
inline std::string element_at(block_grid const& g, slice_origin o, std::int64_t gi, std::int64_t n, std::int64_t k) {
  std::int64_t const r = o.row + gi * g.n + n;
  std::int64_t const whole = o.n == 0 ? g.n : o.n;
  return "(" + std::to_string(r / whole) + ", " + std::to_string(r % whole) + ", " + std::to_string(k) + ")";
}

/// A converter's (`op`) refusal of element (gi, n, k) whose dequant is not finite, named as
/// `element_at` names it.
[[noreturn]] inline void refuse_nonfinite_element(char const* op, block_grid const& g, slice_origin o, std::int64_t gi,
                                                  std::int64_t n, std::int64_t k) {
  throw value_error(std::string("qtl::convert::") + op + ": element " + element_at(g, o, gi, n, k) +
                    " dequantizes to NaN or Inf");
}

/// `fp8_block_bf16_amax`'s refusal of block (gi, bi, bj).
[[noreturn]] inline void refuse_nonfinite_block(std::int64_t gi, std::int64_t bi, std::int64_t bj) {
  throw value_error("qtl::convert::fp8_block_bf16_amax: block (" + std::to_string(gi) + ", " + std::to_string(bi) +
                    ", " + std::to_string(bj) + ") dequantizes to NaN or Inf");
}

/// Runs `f(sub, e0, s0)` over slices of whole block rows of `g` on up to `threads` threads
/// (`qtl::run_parts`): `sub` a one-matrix grid of the slice's rows, `e0` the offset of its first
/// element in the [G,N,K] tensor and `s0` of its first scale in [G,nb,kb]. Every converter whose
/// blocks are independent runs its serial loop on each slice, so the bytes do not depend on the
/// thread count.
template <class F>
void for_each_row_slice(block_grid const& g, int threads, F&& f) {
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  std::int64_t const rows = g.groups * nb;  // (matrix, block row) pairs
  std::int64_t const parts = threads < 1 ? 1 : (threads < rows ? threads : (rows < 1 ? 1 : rows));
  auto const run = [&](int part) {
    std::int64_t r = rows * part / parts;
    std::int64_t const r1 = rows * (part + 1) / parts;
    while (r < r1) {
      std::int64_t const gi = r / nb;
      std::int64_t const bi0 = r % nb;
      std::int64_t const bi1 = (r1 - gi * nb) < nb ? r1 - gi * nb : nb;
      std::int64_t const n0 = bi0 * g.block.n;
      std::int64_t const n1 = bi1 * g.block.n < g.n ? bi1 * g.block.n : g.n;
      f(block_grid{1, n1 - n0, g.k, g.block}, static_cast<std::size_t>((gi * g.n + n0) * g.k),
        static_cast<std::size_t>((gi * nb + bi0) * kb));
      r = gi * nb + bi1;
    }
  };
  if (parts <= 1) {
    f(g, std::size_t{0}, std::size_t{0});
    return;
  }
  run_parts(static_cast<int>(parts), run);
}

/// The largest code magnitude (c & 0x7F) of a rows x cols block of FP8 codes (row stride
/// `stride`): the x86 executor scans the leading columns, the loop the rest.
inline std::uint8_t block_code_top(std::uint8_t const* in, std::int64_t stride, std::int64_t rows, std::int64_t cols) {
  std::uint8_t top = 0;
  std::int64_t const scanned = qtl::detail::convert_x86::block_top(in, stride, rows, cols, top);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint8_t const* row = in + r * stride;
    for (std::int64_t c = scanned; c < cols; ++c) {
      std::uint8_t const m = static_cast<std::uint8_t>(row[c] & 0x7Fu);
      top = m > top ? m : top;
    }
  }
  return top;
}

/// The per-block cast of one rows x cols block of float values `x` (row stride `xs`), writing its
/// codes to `q` (row stride `qs`): returns the block scale. The x86 executors take the leading
/// columns of the amax scan and of each row of a finite block.
template <pow2_rule Rule>
float cast_block(float const* x, std::int64_t xs, std::uint8_t* q, std::int64_t qs, std::int64_t rows,
                 std::int64_t cols) {
  // |x| as bits: their integer max is the NaN-propagating amax (a NaN's bits exceed Inf's)
  std::uint32_t top = 0;
  std::int64_t const scanned = qtl::detail::convert_x86::float_block_top(x, xs, rows, cols, top);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = scanned; c < cols; ++c) {
      std::uint32_t const a = float_to_bits(x[r * xs + c]) & 0x7FFFFFFFu;
      top = a > top ? a : top;
    }
  }
  float const amax = bits_to_float(top);
  float const sf = cast_block_scale<Rule>(amax);
  float const inv = qtl::detail::div_rn(1.0f, sf);
  if (top < 0x7F800000u) {
    // finite block: |x * inv| <= 448 (1 + 6 ulp), which rounds to at most 448, so the
    // branch-free encoder of the clamped domain gives torch's code
    for (std::int64_t r = 0; r < rows; ++r) {
      float const* xr = x + r * xs;
      std::uint8_t* qr = q + r * qs;
      for (std::int64_t c = qtl::detail::convert_x86::cast_row(xr, qr, cols, sf, inv); c < cols; ++c) {
        qr[c] = fp8_encode_clamped<float8_e4m3fn_t>(qtl::detail::mul_rn(xr[c], inv));
      }
    }
    return sf;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      q[r * qs + c] = cast_element(x[r * xs + c], inv);
    }
  }
  return sf;
}

/// mxfp4_exponent_of for every non-negative bf16 d (its bits, 0 to 0x7FFF). A plain function, not
/// a lambda: g++ tries to evaluate an (implicitly constexpr) lambda's table at compile time in every
/// translation unit, for seconds, before giving up on the vector.
inline std::vector<std::int16_t> mxfp4_exponent_table() {
  std::vector<std::int16_t> t(0x8000);
  for (std::uint32_t b = 0; b < 0x8000u; ++b) {
    t[b] = static_cast<std::int16_t>(mxfp4_exponent_of(static_cast<std::uint16_t>(b)));
  }
  return t;
}

}  // namespace detail

/// The output element types of `block_quant_dequant`.
template <class T>
concept dequant_output = std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>;

/// sglang `block_quant_dequant`: out[g,n,k] = fl(e4m3(q[g,n,k]) * s[g, n/BN, k/BK]) in float32,
/// then (bf16) one RNE rounding. NaN codes give NaN (bf16 0x7FC0).
/// @throws shape_error when the sizes do not match the grid
template <dequant_output Out>
void block_quant_dequant(std::span<std::uint8_t const> q, std::span<float const> s, block_grid const& g,
                         std::span<Out> out, int threads = 1) {
  detail::check_grid("block_quant_dequant", g, q.size(), s.size());
  if (out.size() != q.size()) {
    detail::fail_shape("block_quant_dequant", "the output has " + std::to_string(out.size()) +
                                                  " elements, the weight " + std::to_string(q.size()));
  }
  if (threads > 1) {
    return detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
      auto const n = static_cast<std::size_t>(sub.elements());
      block_quant_dequant<Out>(q.subspan(e0, n), s.subspan(s0, static_cast<std::size_t>(sub.scales())), sub,
                               out.subspan(e0, n));
    });
  }
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  // Each block's 256 possible outputs, computed once per block: the element loop is a lookup.
  std::vector<Out> table(static_cast<std::size_t>(kb) * 256);
  std::vector<std::uint8_t> lo(std::is_same_v<Out, bfloat16_t> ? table.size() : 0);  // bf16: low bytes
  std::vector<std::uint8_t> hi(lo.size());                                           // and high bytes
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    for (std::int64_t bi = 0; bi < nb; ++bi) {
      float const* srow = s.data() + (gi * nb + bi) * kb;
      for (std::int64_t bj = 0; bj < kb; ++bj) {
        for (int c = 0; c < 256; ++c) {
          float const d = dequant_element(static_cast<std::uint8_t>(c), srow[bj]);
          Out v{};
          if constexpr (std::is_same_v<Out, float>) {
            v = d;
          } else {
            v = bfloat16_t{float_to_bf16(d)};
          }
          table[static_cast<std::size_t>(bj * 256 + c)] = v;
        }
      }
      std::int64_t const r0 = bi * g.block.n;
      std::int64_t const r1 = r0 + g.block.n < g.n ? r0 + g.block.n : g.n;
      if constexpr (std::is_same_v<Out, bfloat16_t>) {  // bf16 x86 executors: two byte tables
        for (std::size_t c = 0; c < table.size(); ++c) {
          lo[c] = static_cast<std::uint8_t>(table[c].bits & 0xFFu);
          hi[c] = static_cast<std::uint8_t>(table[c].bits >> 8);
        }
        std::size_t const at = static_cast<std::size_t>((gi * g.n + r0) * g.k);
        if (qtl::detail::convert_x86::translate_rows16(q.data() + at, reinterpret_cast<std::uint16_t*>(out.data() + at),
                                                       r1 - r0, g.k, g.block.k, lo.data(), hi.data())) {
          continue;  // the whole block row, row by row
        }
      }
      for (std::int64_t bj = 0; bj < kb; ++bj) {
        Out const* t = table.data() + bj * 256;
        std::int64_t const k0 = bj * g.block.k;
        std::int64_t const k1 = k0 + g.block.k < g.k ? k0 + g.block.k : g.k;
        std::size_t const at = static_cast<std::size_t>((gi * g.n + r0) * g.k + k0);
        std::int64_t done = 0;  // the leading columns of the block an x86 executor takes
        if constexpr (std::is_same_v<Out, bfloat16_t>) {
          if (qtl::detail::convert_x86::has_avx2()) {
            done = qtl::detail::convert_x86::translate_block16(
                q.data() + at, reinterpret_cast<std::uint16_t*>(out.data() + at), g.k, r1 - r0, k1 - k0,
                lo.data() + bj * 256, hi.data() + bj * 256);
          }
        }
        for (std::int64_t n = r0; n < r1; ++n) {
          std::uint8_t const* in = q.data() + (gi * g.n + n) * g.k;
          Out* o = out.data() + (gi * g.n + n) * g.k;
          for (std::int64_t k = k0 + done; k < k1; ++k) {
            o[k] = t[in[k]];
          }
        }
      }
    }
  }
}

/// `per_block_cast_to_fp8` (DeepGEMM/sglang with `Rule = bits`, vLLM with `log2`, `none` for
/// `use_ue8m0=False`): per zero-padded block, sf = ceil_pow2<Rule>(fl(max(amax, 1e-4)/448)),
/// q = e4m3(fl(x * fl(1/sf))) (torch's cast: RNE, not saturating).
/// @throws shape_error when the sizes do not match the grid
template <pow2_rule Rule>
void per_block_cast_to_fp8(std::span<float const> x, block_grid const& g, std::span<std::uint8_t> q, std::span<float> s,
                           int threads = 1) {
  detail::check_grid("per_block_cast_to_fp8", g, x.size(), s.size());
  if (q.size() != x.size()) {
    detail::fail_shape("per_block_cast_to_fp8", "the codes have " + std::to_string(q.size()) + " elements, the input " +
                                                    std::to_string(x.size()));
  }
  if (threads > 1) {
    return detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
      auto const n = static_cast<std::size_t>(sub.elements());
      per_block_cast_to_fp8<Rule>(x.subspan(e0, n), sub, q.subspan(e0, n),
                                  s.subspan(s0, static_cast<std::size_t>(sub.scales())));
    });
  }
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  detail::for_each_block(g, [&](std::int64_t gi, std::int64_t bi, std::int64_t bj, std::int64_t n0, std::int64_t n1,
                                std::int64_t k0, std::int64_t k1) {
    std::size_t const at = static_cast<std::size_t>((gi * g.n + n0) * g.k + k0);
    s[static_cast<std::size_t>((gi * nb + bi) * kb + bj)] =
        detail::cast_block<Rule>(x.data() + at, g.k, q.data() + at, g.k, n1 - n0, k1 - k0);
  });
}

/// The run-time form of `per_block_cast_to_fp8<Rule>`.
inline void per_block_cast_to_fp8(pow2_rule rule, std::span<float const> x, block_grid const& g,
                                  std::span<std::uint8_t> q, std::span<float> s, int threads = 1) {
  switch (rule) {
    case pow2_rule::bits: return per_block_cast_to_fp8<pow2_rule::bits>(x, g, q, s, threads);
    case pow2_rule::log2: return per_block_cast_to_fp8<pow2_rule::log2>(x, g, q, s, threads);
    case pow2_rule::none: return per_block_cast_to_fp8<pow2_rule::none>(x, g, q, s, threads);
  }
}

/// The load-time requant to power-of-two scales of `Recipe` (`recipe::sglang`, `recipe::vllm`,
/// `recipe::sglang_legacy`): per 128x128 block, dequant (bf16 or f32), then the per-block cast
/// with the recipe's rule. In place is allowed (q_out may alias q, s_out may alias s: each block
/// is read whole before it is written). Not idempotent (docs/spec/converters.md §2): a block whose largest
/// code becomes 224 halves its scale on a second pass; `requant_weight_ue8m0_canonical` is the
/// fixed point. NaN codes or an Inf scale: the bits rule gives the block 2^127 (sglang).
/// @throws shape_error when the sizes do not match G x N x K in 128x128 blocks
template <requant_recipe_type Recipe>
void requant_weight_ue8m0(std::span<std::uint8_t const> q, std::span<float const> s, std::int64_t groups,
                          std::int64_t n, std::int64_t k, std::span<std::uint8_t> q_out, std::span<float> s_out,
                          int threads = 1) {
  block_grid const g{groups, n, k, block_size{Recipe::block::n, Recipe::block::k}};
  detail::check_grid("requant_weight_ue8m0", g, q.size(), s.size());
  if (q_out.size() != q.size() || s_out.size() != s.size()) {
    detail::fail_shape("requant_weight_ue8m0", "the outputs must have the sizes of the inputs");
  }
  if (threads > 1) {
    return detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
      auto const ne = static_cast<std::size_t>(sub.elements());
      auto const ns = static_cast<std::size_t>(sub.scales());
      requant_weight_ue8m0<Recipe>(q.subspan(e0, ne), s.subspan(s0, ns), 1, sub.n, k, q_out.subspan(e0, ne),
                                   s_out.subspan(s0, ns));
    });
  }
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  std::vector<float> block(static_cast<std::size_t>(Recipe::block::n) * Recipe::block::k);
  detail::for_each_block(g, [&](std::int64_t gi, std::int64_t bi, std::int64_t bj, std::int64_t n0, std::int64_t n1,
                                std::int64_t k0, std::int64_t k1) {
    auto const at = [&](std::int64_t r, std::int64_t c) { return static_cast<std::size_t>((gi * n + r) * k + c); };
    std::size_t const si = static_cast<std::size_t>((gi * nb + bi) * kb + bj);
    float const scale = s[si];
    if (qtl::is_nan(scale - scale)) {
      // Inf or NaN scale: element by element (0 * Inf is NaN, so amax depends on which codes occur)
      auto const local = [&](std::int64_t r, std::int64_t c) {
        return static_cast<std::size_t>((r - n0) * Recipe::block::k + (c - k0));
      };
      for (std::int64_t r = n0; r < n1; ++r) {
        for (std::int64_t c = k0; c < k1; ++c) {
          block[local(r, c)] = dequant_element_as<Recipe::precision>(q[at(r, c)], scale);
        }
      }
      s_out[si] = detail::cast_block<Recipe::rule>(block.data(), Recipe::block::k, q_out.data() + at(n0, k0), k,
                                                   n1 - n0, k1 - k0);
      return;
    }
    // A finite scale: the block's amax is the dequant of its largest magnitude (requant_block_scale),
    // each code a function of the input code alone. Same bytes as the element loop above.
    std::uint8_t const* const in = q.data() + at(n0, k0);
    std::int64_t const rows = n1 - n0;
    std::int64_t const cols = k1 - k0;
    std::uint8_t const top = detail::block_code_top(in, k, rows, cols);
    float const sf = requant_block_scale<Recipe>(top, scale);
    float const inv = qtl::detail::div_rn(1.0f, sf);
    std::uint8_t map[256];
    for (int c = 0; c < 256; ++c) {
      map[c] = requant_element<Recipe>(static_cast<std::uint8_t>(c), scale, inv);
    }
    std::uint8_t* const out = q_out.data() + at(n0, k0);
    std::int64_t const done = qtl::detail::convert_x86::translate_block(in, out, k, rows, cols, map);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::uint8_t const* const ir = in + r * k;
      std::uint8_t* const orow = out + r * k;
      for (std::int64_t c = done; c < cols; ++c) {
        orow[c] = map[ir[c]];
      }
    }
    s_out[si] = sf;
  });
}

/// The canonical requant: `requant_weight_ue8m0<Recipe>` applied twice, its fixed point
/// (docs/spec/converters.md §5 property 2: R(R(R(x))) == R(R(x))). It equals what the engine of `Recipe`
/// holds after its own load-time requant of a checkpoint converted once (the blocks whose largest
/// code is 224 after one pass have sf/2 and codes x2; the values are the same).
template <requant_recipe_type Recipe>
void requant_weight_ue8m0_canonical(std::span<std::uint8_t const> q, std::span<float const> s, std::int64_t groups,
                                    std::int64_t n, std::int64_t k, std::span<std::uint8_t> q_out,
                                    std::span<float> s_out, int threads = 1) {
  requant_weight_ue8m0<Recipe>(q, s, groups, n, k, q_out, s_out, threads);
  requant_weight_ue8m0<Recipe>(q_out, s_out, groups, n, k, q_out, s_out, threads);
}

/// The packed layout `deepgemm_pack_ue8m0` writes for `groups` matrices of `mn` rows, `k_blocks`.
inline dg_packed_layout deepgemm_layout(std::int64_t groups, std::int64_t mn, std::int64_t k_blocks) {
  return dg_packed_layout{groups, mn, k_blocks};
}

namespace detail {
/// What `is_ue8m0_packable` refused, for the packers' messages.
inline std::string unpackable_scale(float s) {
  char buf[9];
  std::uint32_t b = float_to_bits(s);
  for (int d = 7; d >= 0; --d, b >>= 4) buf[d] = "0123456789abcdef"[b & 0xF];
  buf[8] = 0;
  return "(bits 0x" + std::string(buf) + ") is not a positive normal power of two";
}
inline std::string unpackable_scale(std::uint8_t code) {
  return "(E8M0 code " + std::to_string(code) + ", which upcasts to " + (code == 0 ? "0.0" : "Inf") +
         ") is not a positive normal power of two";
}

/// The DeepGEMM packing of scales of type `Scale` (float powers of two or E8M0 codes), for `op`.
template <class Scale>
void deepgemm_pack(char const* op, std::span<Scale const> sf, dg_packed_layout const& l, std::span<std::int32_t> out) {
  std::int64_t const nb = l.scale_rows();
  if (l.groups < 0 || l.mn < 1 || l.k_blocks < 1) {
    fail_shape(op, "N = " + std::to_string(l.mn) + " and kb = " + std::to_string(l.k_blocks) + " must be positive");
  }
  if (static_cast<std::int64_t>(sf.size()) != l.groups * nb * l.k_blocks) {
    fail_shape(op, "the scales have " + std::to_string(sf.size()) + " elements; N = " + std::to_string(l.mn) +
                       " needs ceil(N/128) = " + std::to_string(nb) + " rows of kb = " + std::to_string(l.k_blocks));
  }
  if (static_cast<std::int64_t>(out.size()) != l.words()) {
    fail_shape(op, "the output has " + std::to_string(out.size()) + " words, the layout " + std::to_string(l.words()));
  }
  for (std::size_t i = 0; i < sf.size(); ++i) {
    if (!is_ue8m0_packable(sf[i])) {
      throw value_error(std::string("qtl::convert::") + op + ": scale " + std::to_string(i) + " " +
                        unpackable_scale(sf[i]));
    }
  }
  std::int64_t const A = l.aligned_mn();
  std::int64_t const P = l.packed_k();
  for (std::int64_t g = 0; g < l.groups; ++g) {
    for (std::int64_t p = 0; p < P; ++p) {
      // one word per block row, broadcast to its (up to) 128 rows; pad rows 0
      std::int32_t* out_row = out.data() + l.word(g, p, 0);
      for (std::int64_t i = 0; i < nb; ++i) {
        std::int32_t const w = dg_pack_word(sf.data() + (g * nb + i) * l.k_blocks, l.k_blocks, p);
        std::int64_t const n1 =
            (i + 1) * dg_packed_layout::rows_per_scale < l.mn ? (i + 1) * dg_packed_layout::rows_per_scale : l.mn;
        for (std::int64_t n = i * dg_packed_layout::rows_per_scale; n < n1; ++n) {
          out_row[n] = w;
        }
      }
      for (std::int64_t n = l.mn; n < A; ++n) {
        out_row[n] = 0;
      }
    }
  }
}
}  // namespace detail

/// DeepGEMM `transform_sf_into_required_layout` (recipe (1,128,128), SM100, its torch path): the
/// power-of-two scales sf [G, ceil(N/128), kb] broadcast to N rows and packed four K-blocks to an
/// int32, MN-major (`dg_packed_layout`); pad rows are 0.
/// @throws shape_error (sizes), value_error naming the first scale that is not a positive normal
///         power of two (DeepGEMM's kernels trap on it; its torch path would floor it)
inline void deepgemm_pack_ue8m0(std::span<float const> sf, dg_packed_layout const& l, std::span<std::int32_t> out) {
  detail::deepgemm_pack("deepgemm_pack_ue8m0", sf, l, out);
}

/// The inverse of the packing (sglang `_unpack_ue8m0_scale_for_triton`, any N): from the storage
/// [G, P, A], block row i of sf [G, ceil(A/128), kb] is word row 128·i; byte b -> float(b << 23)
/// (0 -> +0.0, 255 -> +Inf). Pad rows and bytes past kb are not read.
/// @throws shape_error unless 4P-3 <= kb <= 4P and the sizes match
inline void deepgemm_unpack_ue8m0(std::span<std::int32_t const> packed, std::int64_t groups, std::int64_t P,
                                  std::int64_t A, std::int64_t k_blocks, std::span<float> sf) {
  if (P < 1 || A < 1 || groups < 0) {
    detail::fail_shape("deepgemm_unpack_ue8m0",
                       "P = " + std::to_string(P) + " and A = " + std::to_string(A) + " must be positive");
  }
  if (k_blocks < 4 * P - 3 || k_blocks > 4 * P) {
    detail::fail_shape("deepgemm_unpack_ue8m0", "kb = " + std::to_string(k_blocks) + " does not fit P = " +
                                                    std::to_string(P) + " packed words (4P-3 <= kb <= 4P)");
  }
  std::int64_t const rows = (A + 127) / 128;
  if (static_cast<std::int64_t>(packed.size()) != groups * P * A ||
      static_cast<std::int64_t>(sf.size()) != groups * rows * k_blocks) {
    detail::fail_shape("deepgemm_unpack_ue8m0", "the sizes do not match G x P x A and G x ceil(A/128) x kb");
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < k_blocks; ++j) {
        std::int32_t const w = packed[static_cast<std::size_t>((g * P + j / 4) * A + 128 * i)];
        sf[static_cast<std::size_t>((g * rows + i) * k_blocks + j)] =
            ue8m0_decode(packed_byte(w, static_cast<int>(j % 4)));
      }
    }
  }
}

/// sglang `quantize_block_fp8_weight_to_mxfp4`: `block_quant_dequant` to bf16, then per 32
/// consecutive values (ModelOpt `MXFP4QuantizeUtil.quantize`) the exponent of `mxfp4_exponent` and
/// the nibbles of `mxfp4_nibble`; element 2i in the low nibble of byte i, scale byte e + 127.
/// NaN elements are refused (torch would cast a NaN exponent to an undefined byte).
/// (`origin`: the slices' own, for the threads.)
/// @throws shape_error (K % 32, sizes), value_error (a NaN code or a non-finite result)
inline void fp8_block_to_mxfp4(std::span<std::uint8_t const> q, std::span<float const> s, block_grid const& g,
                               std::span<std::uint8_t> packed, std::span<std::uint8_t> scales, int threads = 1,
                               detail::slice_origin origin = {}) {
  detail::check_grid("fp8_block_to_mxfp4", g, q.size(), s.size());
  if (g.k % mxfp4_block != 0) {
    detail::fail_shape("fp8_block_to_mxfp4", "K = " + std::to_string(g.k) + " is not a multiple of 32");
  }
  if (packed.size() != q.size() / 2 || scales.size() != q.size() / mxfp4_block) {
    detail::fail_shape("fp8_block_to_mxfp4", "the outputs must hold G*N*K/2 codes and G*N*K/32 scales");
  }
  if (threads > 1) {
    return detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
      auto const n = static_cast<std::size_t>(sub.elements());
      fp8_block_to_mxfp4(q.subspan(e0, n), s.subspan(s0, static_cast<std::size_t>(sub.scales())), sub,
                         packed.subspan(e0 / 2, n / 2), scales.subspan(e0 / mxfp4_block, n / mxfp4_block), 1,
                         {static_cast<std::int64_t>(e0) / g.k, g.n});
    });
  }
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  static std::vector<std::int16_t> const exponents = detail::mxfp4_exponent_table();
  float x[mxfp4_block];
  // the 256 bf16 dequant values of each block of the current block row, computed once per block
  std::vector<float> table(static_cast<std::size_t>(kb) * 256);
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    for (std::int64_t bi = 0; bi < nb; ++bi) {
      std::int64_t const n0 = bi * g.block.n;
      std::int64_t const n1 = n0 + g.block.n < g.n ? n0 + g.block.n : g.n;
      float const* srow = s.data() + (gi * nb + bi) * kb;
      std::size_t const first = static_cast<std::size_t>((gi * g.n + n0) * g.k);
      // the leading rows of the block row an x86 executor takes
      std::int64_t const done =
          qtl::detail::convert_x86::mxfp4_rows(q.data() + first, n1 - n0, g.k, g.block.k, srow, exponents.data(),
                                               packed.data() + first / 2, scales.data() + first / mxfp4_block);
      if (n0 + done == n1) {
        continue;
      }
      for (std::int64_t bj = 0; bj < kb; ++bj) {
        for (int c = 0; c < 256; ++c) {
          table[static_cast<std::size_t>(bj * 256 + c)] =
              dequant_element_as<dequant_precision::bf16>(static_cast<std::uint8_t>(c), srow[bj]);
        }
      }
      for (std::int64_t n = n0 + done; n < n1; ++n) {
        std::size_t const row = static_cast<std::size_t>((gi * g.n + n) * g.k);
        for (std::int64_t k0 = 0; k0 < g.k; k0 += mxfp4_block) {
          float amax = 0.0f;
          for (int i = 0; i < mxfp4_block; ++i) {
            std::int64_t const k = k0 + i;
            x[i] = table[static_cast<std::size_t>((k / g.block.k) * 256 + q[row + static_cast<std::size_t>(k)])];
            if (!(x[i] - x[i] == 0.0f)) {
              detail::refuse_nonfinite_element("fp8_block_to_mxfp4", g, origin, gi, n, k);
            }
            amax = amax_step(amax, x[i]);
          }
          int const e = exponents[mxfp4_scaled_amax(amax) & 0x7FFFu];
          std::size_t const out = row / 2 + static_cast<std::size_t>(k0 / 2);
          for (int i = 0; i < mxfp4_block; i += 2) {
            packed[out + static_cast<std::size_t>(i / 2)] =
                static_cast<std::uint8_t>(mxfp4_nibble(x[i], e) | (mxfp4_nibble(x[i + 1], e) << 4));
          }
          scales[row / mxfp4_block + static_cast<std::size_t>(k0 / mxfp4_block)] = mxfp4_scale_byte(e);
        }
      }
    }
  }
}

/// sglang `input_to_float8` (docs/spec/converters.md §3.10): amax = max(max|x|, 1e-12), scale =
/// fl(448 / amax), q = e4m3(clamp(fl(x * scale), ±448)); returns scale_inv = fl(1 / scale) (E5:
/// not fl(amax / 448)). NaN or Inf in `x` is refused (torch's amax would make every code NaN).
/// @throws shape_error (sizes), value_error naming the first non-finite element
inline float input_to_float8(std::span<float const> x, std::span<std::uint8_t> q) {
  if (q.size() != x.size()) {
    detail::fail_shape("input_to_float8", "the codes have " + std::to_string(q.size()) + " elements, the input " +
                                              std::to_string(x.size()));
  }
  float amax = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] - x[i] == 0.0f)) {
      throw value_error("qtl::convert::input_to_float8: element " + std::to_string(i) + " is NaN or Inf");
    }
    amax = amax_step(amax, x[i]);
  }
  float const scale = input_to_float8_scale(amax);
  for (std::size_t i = 0; i < x.size(); ++i) {
    q[i] = input_to_float8_element(x[i], scale);
  }
  return qtl::detail::div_rn(1.0f, scale);
}

/// sglang `block_quant_to_tensor_quant` off CUDA: `block_quant_dequant` to float32, then
/// `input_to_float8` of the whole tensor; returns its scale_inv. (On CUDA sglang calls
/// `scaled_fp8_quant` instead: qtl/fp8.hpp's `scaled_fp8_quant_dynamic`, scale fl(amax/448).)
/// @throws shape_error (sizes), value_error (a dequant that is NaN or Inf)
inline float fp8_block_to_fp8_tensor(std::span<std::uint8_t const> q, std::span<float const> s, block_grid const& g,
                                     std::span<std::uint8_t> q_out) {
  std::vector<float> d(q.size());
  block_quant_dequant<float>(q, s, g, d);
  return input_to_float8(d, q_out);
}

/// The largest |x| of `block_quant_dequant<bfloat16_t>(q, s)`: the amax an NVFP4 global scale of
/// the BF16 dequant is computed from. A finite scale's dequant grows with the code's magnitude
/// (`c & 0x7F`), so it is that of each block's largest code.
/// @throws shape_error (sizes), value_error naming the first block that dequantizes to NaN or Inf
inline float fp8_block_bf16_amax(std::span<std::uint8_t const> q, std::span<float const> s, block_grid const& g) {
  detail::check_grid("fp8_block_bf16_amax", g, q.size(), s.size());
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  float amax = 0.0f;
  std::vector<std::uint8_t> tops(static_cast<std::size_t>(kb));  // of the current block row
  detail::for_each_block(g, [&](std::int64_t gi, std::int64_t bi, std::int64_t bj, std::int64_t n0, std::int64_t n1,
                                std::int64_t, std::int64_t) {
    std::uint8_t const* row0 = q.data() + (gi * g.n + n0) * g.k;
    if (bj == 0 && !qtl::detail::convert_x86::block_row_tops(row0, n1 - n0, g.k, g.block.k, tops.data())) {
      for (std::int64_t j = 0; j < kb; ++j) {  // block by block
        std::int64_t const c0 = j * g.block.k;
        std::int64_t const c1 = c0 + g.block.k < g.k ? c0 + g.block.k : g.k;
        tops[static_cast<std::size_t>(j)] = detail::block_code_top(row0 + c0, g.k, n1 - n0, c1 - c0);
      }
    }
    std::uint8_t const top = tops[static_cast<std::size_t>(bj)];
    float const scale = s[static_cast<std::size_t>((gi * nb + bi) * kb + bj)];
    float const v = dequant_element_as<dequant_precision::bf16>(top, scale);
    if (!(v - v == 0.0f) || !(scale - scale == 0.0f)) {
      detail::refuse_nonfinite_block(gi, bi, bj);
    }
    float const a = v < 0.0f ? -v : v;
    amax = a > amax ? a : amax;
  });
  return amax;
}

/// The NVFP4 global scale of QTL's FP8-block -> NVFP4 conversion: gs = fl(1 / fl(amax / 2688))
/// (docs/spec/converters.md §4.1 item 5: the reciprocal of ModelOpt's weight_scale_2 = amax / (448 * 6)),
/// `amax` the largest |BF16 dequant| of every tensor that shares it (w1 and w3 of an expert); 1 for
/// an all-zero weight. Not `nvfp4_global_scale_from_amax` (one division, 2688 / amax): the two
/// differ by an ulp for some amax.
/// @throws value_error for a negative or non-finite amax
inline float nvfp4_shared_global_scale(float amax) {
  if (!(amax >= 0.0f) || !(amax - amax == 0.0f)) {
    throw value_error("qtl::convert::nvfp4_shared_global_scale: amax " + std::to_string(amax) +
                      " is not a finite non-negative number");
  }
  return nvfp4_shared_global_scale_of(amax);
}

/// FP8 block -> NVFP4, QTL's definition (sglang calls flashinfer's quantizer, whose arithmetic is
/// unpublished, so no engine recipe could be pinned): `block_quant_dequant` to BF16, then
/// `qtl::block_quantize<nvfp4, layout_linear>` of the BF16 rows with `global_scale` (use
/// `nvfp4_shared_global_scale` of the tensors that share it). NOT verified against flashinfer's
/// `fp4_quantize`: the bytes may differ from what sglang holds after its own conversion.
///
///   packed  [G, N, K/2]   element 2i in the low nibble of byte i (E2M1)
///   scales  [G, N, K/16]  E4M3 block scales, row-major (not swizzled)
///   x ≈ e2m1(code) * float(scale) / global_scale
///
/// Converted one block row at a time (memory: one block row of BF16). NaN or Inf in the dequant is
/// refused (NVFP4's encoders would saturate it), by a pass over each block row's codes, unless
/// `checked` says the caller's `fp8_block_bf16_amax` over the same codes and scales (the pass a
/// global scale comes from, which refuses them) already ran: then that pass is not repeated.
/// (`origin`: the slices' own, for the threads.)
/// @throws shape_error (K % 16, sizes), value_error (non-finite dequant, bad global scale)
inline void fp8_block_to_nvfp4(std::span<std::uint8_t const> q, std::span<float const> s, block_grid const& g,
                               float global_scale, std::span<float4_e2m1x2_t> packed, std::span<float8_e4m3fn_t> scales,
                               int threads = 1, bool checked = false, detail::slice_origin origin = {}) {
  detail::check_grid("fp8_block_to_nvfp4", g, q.size(), s.size());
  constexpr std::int64_t nvfp4_block = qtl::nvfp4::block_size;
  if (g.k % nvfp4_block != 0) {
    detail::fail_shape("fp8_block_to_nvfp4", "K = " + std::to_string(g.k) + " is not a multiple of 16");
  }
  if (packed.size() != q.size() / 2 || scales.size() != q.size() / nvfp4_block) {
    detail::fail_shape("fp8_block_to_nvfp4", "the outputs must hold G*N*K/2 codes and G*N*K/16 scales");
  }
  if (!(global_scale > 0.0f) || !(global_scale - global_scale == 0.0f)) {
    throw value_error("qtl::convert::fp8_block_to_nvfp4: global scale " + std::to_string(global_scale) +
                      " is not finite and positive");
  }
  if (threads > 1) {
    return detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
      auto const n = static_cast<std::size_t>(sub.elements());
      fp8_block_to_nvfp4(q.subspan(e0, n), s.subspan(s0, static_cast<std::size_t>(sub.scales())), sub, global_scale,
                         packed.subspan(e0 / 2, n / 2), scales.subspan(e0 / nvfp4_block, n / nvfp4_block), 1, checked,
                         {static_cast<std::int64_t>(e0) / g.k, g.n});
    });
  }
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  auto const rows_buffer = std::make_unique_for_overwrite<bfloat16_t[]>(static_cast<std::size_t>(g.block.n * g.k));
  std::span<bfloat16_t> const rows(rows_buffer.get(), static_cast<std::size_t>(g.block.n * g.k));
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    for (std::int64_t bi = 0; bi < nb; ++bi) {
      std::int64_t const n0 = bi * g.block.n;
      std::int64_t const m = n0 + g.block.n < g.n ? g.block.n : g.n - n0;
      std::size_t const at = static_cast<std::size_t>((gi * g.n + n0) * g.k);
      std::size_t const count = static_cast<std::size_t>(m * g.k);
      block_grid const slice{1, m, g.k, g.block};
      std::span<bfloat16_t> const bf(rows.data(), count);
      auto const q_slice = q.subspan(at, count);
      auto const s_slice = s.subspan(static_cast<std::size_t>((gi * nb + bi) * kb), static_cast<std::size_t>(kb));
      block_quant_dequant<bfloat16_t>(q_slice, s_slice, slice, bf);
      bool finite = true;
      if (!checked) {
        try {
          (void)fp8_block_bf16_amax(q_slice, s_slice, slice);  // a pass over the codes: every dequant finite
        } catch (value_error const&) {
          finite = false;
        }
      }
      for (std::size_t i = 0; !finite && i < count; ++i) {  // name the first element that is not
        if ((bf[i].bits & 0x7F80u) == 0x7F80u) {
          detail::refuse_nonfinite_element("fp8_block_to_nvfp4", g, origin, gi, n0 + static_cast<std::int64_t>(i) / g.k,
                                           static_cast<std::int64_t>(i) % g.k);
        }
      }
      qtl::block_quantize<qtl::nvfp4, qtl::layout_linear>(
          make_view(static_cast<bfloat16_t const*>(rows.data()), m, g.k), make_view(packed.data() + at / 2, m, g.k / 2),
          scales.subspan(at / nvfp4_block, count / nvfp4_block), global_scale);
    }
  }
}

}  // namespace qtl::convert
