#pragma once
/// \file
/// FP8 and FP4 weight-only Marlin on the host (`docs/spec/marlin.md` §6, §7): the weight bytes as a
/// GPTQ-style qweight that `qtl::marlin::repack_gptq` (<qtl/marlin.hpp>) takes, and the scale steps
/// the engines run before their Marlin GEMM.
///
///   pack_fp8_k     e4m3 bytes [N, K] (or [K, N])     -> 8-bit qweight [K/4, N], then repack_gptq<8>
///   pack_fp4_k     NVFP4/MXFP4 bytes [N, K/2]         -> 4-bit qweight [K/8, n_pad], then repack_gptq<4>
///   fold_fp8_exponent_bias   the e4m3 -> fp16/bf16 exponent-bias correction carried by the scales
///   nvfp4_process_scales / nvfp4_scale_factor / nvfp4_process_global_scale,
///   mxfp4_process_scales      the FP4 scale bytes as the kernels read them
///   fp8_scale_groups, fp8_marlin_scales, fp4_scale_groups   the reshapes before them
///
/// Where the engines' versions differ (the FP8 exponent fold, the NVFP4 rescale), a flag names the
/// version; the defaults are the newest vLLM of docs/spec/marlin.md's sources.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include <qtl/error.hpp>
#include <qtl/marlin.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl::marlin {

/// e4m3 weight bytes [N, K] (or [K, N] when `size_k_first`) -> the 8-bit GPTQ-style qweight
/// [K/4, N] that `repack_gptq<8>` takes: byte k%4 of word (k/4, n) is element (n, k)
/// (vLLM `pack_fp8_to_int32` then its transpose: the little-endian int32 view of each row).
inline host_tensor<std::int32_t, 2> pack_fp8_k(view2d<std::uint8_t const> w, bool size_k_first) {
  index_t const K = size_k_first ? w.extent[0] : w.extent[1];
  index_t const N = size_k_first ? w.extent[1] : w.extent[0];
  if (K % 4 != 0) {
    throw shape_error("qtl::marlin::pack_fp8_k: K = " + std::to_string(K) + " is not a multiple of 4");
  }
  host_tensor<std::int32_t, 2> out({K / 4, N});
  auto o = out.view();
  for (index_t r = 0; r < K / 4; ++r) {
    for (index_t n = 0; n < N; ++n) {
      std::uint32_t word = 0;
      for (int i = 0; i < 4; ++i) {
        word |= static_cast<std::uint32_t>(size_k_first ? w(4 * r + i, n) : w(n, 4 * r + i)) << (8 * i);
      }
      o(r, n) = static_cast<std::int32_t>(word);
    }
  }
  return out;
}

/// N padded to the Marlin tile width of 64, as the FP4 weight-only path pads (`_pad_to_marlin_tile`).
constexpr index_t fp4_padded_n(index_t n) { return (n + 63) / 64 * 64; }

/// NVFP4/MXFP4 weight bytes [N, K/2] (element 2i in the low nibble) -> the 4-bit GPTQ-style
/// qweight [K/8, n_pad] (rows N..n_pad-1 zero: `_pad_to_marlin_tile`) that `repack_gptq<4>` takes.
inline host_tensor<std::int32_t, 2> pack_fp4_k(view2d<std::uint8_t const> w, index_t n_pad) {
  index_t const N = w.extent[0], K = 2 * w.extent[1];
  if (K % 8 != 0) {
    throw shape_error("qtl::marlin::pack_fp4_k: K = " + std::to_string(K) + " is not a multiple of 8");
  }
  if (n_pad < N) {
    throw shape_error("qtl::marlin::pack_fp4_k: n_pad = " + std::to_string(n_pad) + " is less than N = " +
                      std::to_string(N));
  }
  host_tensor<std::int32_t, 2> out({K / 8, n_pad});
  auto o = out.view();
  for (index_t c = 0; c < K / 8; ++c) {
    for (index_t n = 0; n < N; ++n) {
      std::uint32_t word = 0;
      for (int i = 0; i < 4; ++i) word |= static_cast<std::uint32_t>(w(n, 4 * c + i)) << (8 * i);
      o(c, n) = static_cast<std::int32_t>(word);
    }
  }
  return out;
}

/// How the FP8 Marlin scales carry the e4m3 -> fp16/bf16 exponent-bias correction (docs/spec/marlin.md §6.3):
///   none         old vLLM (02d33ed1): the scales as they are
///   vllm         newer vLLM (`fp8_fused_exponent_bias_into_scales`): s * 2^8 (fp16) or s * 2^120
///                (bf16), in the scale dtype (exact, or Inf from 256 up) -- the default
///   sglang_fp16  one sglang copy: through fp16 even for bf16 scales, s -> fp16 -> * 2^8 -> bf16
///                (lossy for bf16 values outside fp16's range or precision)
/// Not applied when the activations are 8-bit (the A8 layout), as in vLLM.
enum class fp8_scale_fold { none, vllm, sglang_fp16 };

/// Applies `fold` in place to scales of type T (half_t or bfloat16_t).
template <class T>
void fold_fp8_exponent_bias(view2d<T> s, fp8_scale_fold fold) {
  static_assert(std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>,
                "qtl::marlin::fold_fp8_exponent_bias: the scales are fp16 or bf16 (the activation dtype)");
  if (fold == fp8_scale_fold::none) {
    return;
  }
  for (index_t g = 0; g < s.extent[0]; ++g) {
    for (index_t n = 0; n < s.extent[1]; ++n) {
      T& v = s(g, n);
      if (fold == fp8_scale_fold::vllm || std::is_same_v<T, half_t>) {
        float const bias = std::is_same_v<T, half_t> ? 256.0f : 0x1p120f;
        v = from_float<T>(to_float(v) * bias);
      } else {
        half_t const h = from_float<half_t>(to_float(v));
        v = from_float<T>(to_float(from_float<half_t>(to_float(h) * 256.0f)));
      }
    }
  }
}

/// The dtype of the activations (and of the scales that the GEMM reads).
enum class act_dtype { f16, bf16 };

/// NVFP4 `_nvfp4_compute_scale_factor` (newer vLLM): 1 for fp16 activations; for bf16, with m the
/// smallest positive fl16(s)*2^7 over every e4m3 scale byte, 2^ceil(log2(2/m)) when m < 2, else 1.
/// (MoE: pass all experts' scales at once; the peers share one factor.)
inline float nvfp4_scale_factor(view2d<std::uint8_t const> e4m3, act_dtype a) {
  if (a == act_dtype::f16) {
    return 1.0f;
  }
  float m = 0.0f;
  for (index_t i = 0; i < e4m3.extent[0]; ++i) {
    for (index_t j = 0; j < e4m3.extent[1]; ++j) {
      float const v = e4m3fn_to_float(e4m3(i, j)) * 128.0f;  // e4m3 -> fp16 is exact
      if (v > 0.0f && (m == 0.0f || v < m)) m = v;
    }
  }
  if (m == 0.0f || !(m < 2.0f)) {
    return 1.0f;
  }
  float const q = 2.0f / m;  // fp32, as torch; then the smallest power of two >= q
  float sf = 1.0f;
  while (sf < q) sf *= 2.0f;
  return sf;
}

/// NVFP4 `nvfp4_marlin_process_scales` on e4m3 scale bytes [K/16, N] that already went through
/// permute_scales: per group of 4 bytes the order {0,2,1,3}, then each value v becomes the byte
/// of bits 14..7 of h = fl16(fl16(v * sf) * 2^7) (5 exponent bits, 3 mantissa bits, sign dropped:
/// "S0E5M3"). 1.0 -> 0xb0, 448 -> 0xf6; with sf > 1 large values can reach fp16 Inf (0xf8).
/// `scale_factor` 1 is the older vLLM (no rescale). NaN scale bytes are refused (value_error): the
/// peers' result depends on the NaN bit pattern of the device.
inline void nvfp4_process_scales(view2d<std::uint8_t const> e4m3, float scale_factor, view2d<std::uint8_t> out) {
  if (e4m3.extent[1] % 4 != 0) {
    throw shape_error("qtl::marlin::nvfp4_process_scales: N = " + std::to_string(e4m3.extent[1]) +
                      " is not a multiple of 4");
  }
  detail::check_extents("qtl::marlin::nvfp4_process_scales", "out", out, e4m3.extent[0], e4m3.extent[1]);
  constexpr int regroup[4] = {0, 2, 1, 3};
  for (index_t g = 0; g < e4m3.extent[0]; ++g) {
    for (index_t n = 0; n < e4m3.extent[1]; ++n) {
      std::uint8_t const b = e4m3(g, n - n % 4 + regroup[n % 4]);
      if ((b & 0x7F) == 0x7F) {
        throw value_error("qtl::marlin::nvfp4_process_scales: scale (" + std::to_string(g) + ", " +
                          std::to_string(n - n % 4 + regroup[n % 4]) + ") is NaN");
      }
      float v = to_float(from_float<half_t>(e4m3fn_to_float(b)));
      if (scale_factor > 1.0f) v = to_float(from_float<half_t>(v * scale_factor));
      std::uint16_t const h = from_float<half_t>(v * 128.0f).bits;
      out(g, n) = static_cast<std::uint8_t>((h >> 7) & 0xFF);
    }
  }
}

/// NVFP4 `nvfp4_marlin_process_global_scale`, divided by the scale factor as the newer vLLM does:
/// gs * 2^7 (fp16) or gs * 2^119 (bf16), then / sf, in fp32.
inline float nvfp4_process_global_scale(float gs, act_dtype a, float scale_factor) {
  float const r = gs * (a == act_dtype::f16 ? 0x1p7f : 0x1p119f);
  return r / scale_factor;
}

/// MXFP4 `mxfp4_marlin_process_scales` on e8m0 scale bytes [K/32, N] that already went through
/// permute_scales, with the scales held in `param` (the model dtype) on the way:
///   16-bit activations: per group of 4 bytes the order {0,2,1,3};
///   8-bit activations (`fp8_act`): no regroup, every byte + 6 (max 249, else value_error).
/// With fp16 parameters the peers send 2^(b-127) through fp16, which turns bytes outside
/// [103, 142] into 0 or Inf (silent corruption): QTL refuses them (value_error naming the byte).
inline void mxfp4_process_scales(view2d<std::uint8_t const> e8m0, act_dtype param, bool fp8_act,
                                 view2d<std::uint8_t> out) {
  if (e8m0.extent[1] % 4 != 0) {
    throw shape_error("qtl::marlin::mxfp4_process_scales: N = " + std::to_string(e8m0.extent[1]) +
                      " is not a multiple of 4");
  }
  detail::check_extents("qtl::marlin::mxfp4_process_scales", "out", out, e8m0.extent[0], e8m0.extent[1]);
  constexpr int regroup[4] = {0, 2, 1, 3};
  for (index_t g = 0; g < e8m0.extent[0]; ++g) {
    for (index_t n = 0; n < e8m0.extent[1]; ++n) {
      index_t const src = fp8_act ? n : n - n % 4 + regroup[n % 4];
      std::uint8_t const b = e8m0(g, src);
      auto const where = [&] { return "scale (" + std::to_string(g) + ", " + std::to_string(src) + ") = " + std::to_string(b); };
      if (param == act_dtype::f16 && (b < 103 || b > 142)) {
        throw value_error("qtl::marlin::mxfp4_process_scales: " + where() +
                          " is 2^" + std::to_string(int{b} - 127) + ", outside fp16's range (bytes 103..142)");
      }
      if (fp8_act && b > 249) {
        throw value_error("qtl::marlin::mxfp4_process_scales: " + where() + " exceeds 249 (FP8 activations add 6)");
      }
      out(g, n) = static_cast<std::uint8_t>(fp8_act ? b + 6 : b);
    }
  }
}

/// The FP8 Marlin scales as [G, N] floats (docs/spec/marlin.md §6.2, `prepare_fp8_layer_for_marlin`), from
/// `s` as the checkpoint holds it (row-major) for a weight of N output rows and K inputs:
///   no block (`block_n == 0`): one value (per tensor: every column) or N (per channel); G = 1
///   block {block_n, block_k}: [ceil(N/bn), K/bk] ([K/bk, ceil(N/bn)] when `size_k_first`); G = K/bk
///                and (g, n) is the scale of block (n/bn, g): transposed, repeat_interleave(bn), cut to N.
/// @throws shape_error (K % bk, the number of scales)
inline host_tensor<float, 2> fp8_scale_groups(std::span<float const> s, index_t N, index_t K, bool size_k_first,
                                              index_t block_n = 0, index_t block_k = 0) {
  auto const fail = [](std::string const& what) { detail::fail_shape("qtl::marlin::fp8_scale_groups", what); };
  if (block_n == 0) {
    if (s.size() != 1 && static_cast<index_t>(s.size()) != N) {
      fail(std::to_string(s.size()) + " scales: 1 (per tensor) or N = " + std::to_string(N) + " (per channel)");
    }
    host_tensor<float, 2> out({1, N});
    for (index_t n = 0; n < N; ++n) out.data()[n] = s.size() == 1 ? s[0] : s[static_cast<std::size_t>(n)];
    return out;
  }
  if (block_n < 0 || block_k <= 0 || K % block_k != 0) {
    fail("block " + std::to_string(block_n) + "x" + std::to_string(block_k) +
         ": positive, with K = " + std::to_string(K) + " a multiple of the block's K");
  }
  index_t const G = K / block_k, nb = (N + block_n - 1) / block_n;
  if (static_cast<index_t>(s.size()) != G * nb) {
    fail(std::to_string(s.size()) + " scales; " + std::to_string(nb) + " x " + std::to_string(G) +
         " blocks are needed");
  }
  host_tensor<float, 2> out({G, N});
  for (index_t g = 0; g < G; ++g) {
    for (index_t n = 0; n < N; ++n) {
      out.data()[g * N + n] = s[static_cast<std::size_t>(size_k_first ? g * nb + n / block_n : (n / block_n) * G + g)];
    }
  }
  return out;
}

/// The FP8 Marlin scales the GEMM reads: `groups` [G, N] (`fp8_scale_groups`) in the activation
/// dtype T, permuted (`scale_kind(K, group_size, a)`, group_size -1 for one group) and, unless the
/// activations are 8-bit, folded (`fold_fp8_exponent_bias`).
template <class T>
host_tensor<T, 2> fp8_marlin_scales(view2d<float const> groups, index_t K, index_t group_size, act_width a,
                                    fp8_scale_fold fold) {
  index_t const G = groups.extent[0], N = groups.extent[1];
  host_tensor<T, 2> in({G, N}), out({G, N});
  for (index_t g = 0; g < G; ++g) {
    for (index_t n = 0; n < N; ++n) in.view()(g, n) = from_float<T>(groups(g, n));
  }
  permute_scales<T>(in.view(), scale_kind(K, group_size, a), out.view());
  if (a == act_width::a16) {
    fold_fp8_exponent_bias<T>(out.view(), fold);
  }
  return out;
}

/// FP4 scale bytes [N, C] (one per group of K) -> [C, n_pad] transposed (columns N.. zero:
/// `_pad_to_marlin_tile`), then permute_scales(kind): the input of nvfp4_process_scales /
/// mxfp4_process_scales.
inline host_tensor<std::uint8_t, 2> fp4_scale_groups(view2d<std::uint8_t const> s, index_t n_pad,
                                                     scale_perm_kind kind) {
  if (n_pad < s.extent[0]) {
    detail::fail_shape("qtl::marlin::fp4_scale_groups",
                       "n_pad = " + std::to_string(n_pad) + " is less than N = " + std::to_string(s.extent[0]));
  }
  host_tensor<std::uint8_t, 2> t({s.extent[1], n_pad});
  for (index_t n = 0; n < s.extent[0]; ++n) {
    for (index_t c = 0; c < s.extent[1]; ++c) t.view()(c, n) = s(n, c);
  }
  host_tensor<std::uint8_t, 2> out({s.extent[1], n_pad});
  permute_scales<std::uint8_t>(t.view(), kind, out.view());
  return out;
}

}  // namespace qtl::marlin
