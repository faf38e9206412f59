#pragma once
/// \file
/// The foundation of the x86 executors (`qtl/x86/<op>.hpp`, the host twin of `qtl/cuda/`): the one
/// guard that decides whether they exist, the one CPU check, and the one hook that caps the level
/// they may use.
///
/// * `QTL_X86` is 1 on x86-64 hosts compiled by GCC or Clang (their target attributes let one
///   binary for baseline x86-64 carry AVX2 and AVX-512 functions), outside nvcc, and unless the
///   consumer defines `QTL_NO_SIMD`; else 0. With 0 no intrinsic is compiled and every op runs its
///   portable loop, which gives the same bits (the tests and a CI configuration check that).
/// * `x86::cpu()` reads the CPU's features once (`__builtin_cpu_supports`, which includes the
///   OS's saving of the YMM / ZMM state; F16C through CPUID leaf 1, which Clang 14's builtin does
///   not know).
/// * `x86::level_cap()` is the widest `x86::level` any executor may use (default: no cap). Tests
///   and benchmarks lower it to run the narrower executors, or the portable loops, on a CPU that
///   has more: `x86::scoped_level_cap`.
///
/// * The target attributes of the executors' functions, one per instruction-set subset (below).
///
/// Each op turns the features into the level it runs (`x86::quantize_level()`, ...) in its own
/// `qtl/x86/<op>.hpp`, because the ops need different AVX-512 subsets.

#include <cstdint>

#if !defined(QTL_NO_SIMD) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__)
#  define QTL_X86 1
#  include <cpuid.h>
#  include <immintrin.h>
#else
#  define QTL_X86 0
#endif  // ^^^ x86-64 GCC/Clang host without QTL_NO_SIMD ^^^

#if QTL_X86
// The target attributes of the executors, named by the subset each enables (a function runs only
// where the CPU has all of it: the op's level check). None enables FMA: with it the compiler may
// contract a product and a sum into one rounding, and the executors promise the bits of the
// portable loops (see qtl/macros.hpp).
/// AVX2 (the fp8, fp4, convert, Marlin and block-scale band executors).
#  define QTL_X86_AVX2 __attribute__((target("avx2")))
/// AVX2 and F16C (quantize's executor: fp16 through `vcvtph2ps` / `vcvtps2ph`).
#  define QTL_X86_AVX2_F16C __attribute__((target("avx2,f16c")))
/// AVX-512F alone (the block-scale bands and MoE's streamed rows: 512-bit moves).
#  define QTL_X86_AVX512F __attribute__((target("avx512f")))
/// AVX-512 F, BW, VL with AVX2 and F16C (quantize's AVX-512 executor).
#  define QTL_X86_AVX512_BW_VL_F16C __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
/// AVX-512 F, BW, VL, DQ and VBMI (the fp8 and fp4 executors: `vpermb`, `vfpclassps`).
#  define QTL_X86_AVX512_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")))
#endif  // ^^^ QTL_X86 ^^^

namespace qtl::x86 {

/// Executor levels, slowest first; a level also runs every narrower one (for leftover columns).
enum class level : std::uint8_t { portable, sse2, avx2, avx512 };

/// The features of this CPU that some executor needs (all false where `QTL_X86` is 0).
struct cpu_features {
  bool sse2 = false;
  bool avx2 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vbmi = false;
};

/// The CPU's features, read once.
inline cpu_features const& cpu() {
  static cpu_features const f = [] {
    cpu_features c;
#if QTL_X86
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    c.sse2 = __builtin_cpu_supports("sse2");
    c.avx2 = __builtin_cpu_supports("avx2");
    c.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512dq = __builtin_cpu_supports("avx512dq");
    c.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
#endif  // ^^^ QTL_X86 ^^^
    return c;
  }();
  return f;
}

/// The widest level any executor may use (a test and benchmark hook; default: no cap).
inline level& level_cap() {
  static level cap = level::avx512;
  return cap;
}

/// `l` lowered to `level_cap()`.
inline level capped(level l) { return l < level_cap() ? l : level_cap(); }

/// Caps the level for its lifetime, then restores the previous cap.
class scoped_level_cap {
 public:
  explicit scoped_level_cap(level l) : saved_(level_cap()) { level_cap() = l; }
  ~scoped_level_cap() { level_cap() = saved_; }
  scoped_level_cap(scoped_level_cap const&) = delete;
  scoped_level_cap& operator=(scoped_level_cap const&) = delete;

 private:
  level saved_;
};

}  // namespace qtl::x86
