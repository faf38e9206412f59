// The run-time dispatched x86 executors of qtl/fp8.hpp (SSE2, AVX2, AVX-512) against the portable
// loops, bit for bit, through the public functions: each test runs the same call with the executor
// capped at `portable` (scalar) and at every level the CPU has, on adversarial inputs (every bf16
// code: NaN payloads and signs, ±Inf, subnormals, ±0; random float bit patterns; scales that are 0,
// -0, subnormal, huge, Inf or NaN; row lengths with tails past every vector step; rows that start at
// odd addresses), and compares every output byte (codes, scales, padding). Each x86 FP8 encoder
// (SSE2, AVX2, AVX-512) is also checked alone against the element functions on float patterns at
// every rounding boundary. The block formats (NVFP4, MX): fp4_x86_test.cpp; the shared parts: x86_compare.hpp.
#include <qtl/fp8.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "skip.hpp"
#include "x86_compare.hpp"

#if QTL_X86

namespace {

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::float8_e5m2_t;
using qtl::half_t;
using qtl::index_t;
using namespace qtl_test::x86_compare;
using qtl_test::x86_compare::inf;  // not ::inf or ::nan of <cmath>
using qtl_test::x86_compare::nan;

// (A NaN scale meets NaN inputs only under `fp8_nan::to_max`, below: the sign of NaN * NaN is
// the sign of whichever operand the compiler puts first, IEEE and C++ leave it open, and g++
// treats `*` and `_mm*_mul_ps` as commutative, so no executor can promise it.)
float const hostile_scales[] = {1.0f, 0.01f,  3.1f, 1e-30f, 1e30f, 0.0f, -0.0f,
                                inf,  -inf,   nan,  1e-40f, -2.0f, 0x1p-127f};

// Row lengths: several whole vector steps plus tails of every kind (bf16 steps are 32/64).
constexpr index_t cols_list[] = {1, 31, 64, 200, 1000};

/// Streams every output (non-temporal stores) for its lifetime.
struct stream_everything {
  stream_everything() : saved(qtl::detail::stream_min_bytes()) { qtl::detail::stream_min_bytes() = 0; }
  ~stream_everything() { qtl::detail::stream_min_bytes() = saved; }
  stream_everything(stream_everything const&) = delete;
  stream_everything& operator=(stream_everything const&) = delete;
  std::size_t saved;
};

template <class Fp8, class T>
void check_per_tensor() {
  for (index_t const cols : {index_t{1}, index_t{31}, index_t{64}, index_t{200}, index_t{1000}, index_t{300}}) {
    matrix<T> const in = hostile_input<T>(21, cols, static_cast<std::uint32_t>(cols));
    for (float const s : hostile_scales) {
      for (qtl::fp8_nan const n : {qtl::fp8_nan::to_max, qtl::fp8_nan::propagate}) {
        for (qtl::fp8_zero_scale const z : {qtl::fp8_zero_scale::reciprocal, qtl::fp8_zero_scale::guard}) {
          if (s != s && n == qtl::fp8_nan::propagate) {
            continue;  // see hostile_scales
          }
          INFO("cols " << cols << " scale " << s << " nan " << int(n) << " zero " << int(z));
          check_executors_agree([&] {
            matrix<Fp8> out(in.rows + 2, cols, 5);  // two padding rows
            qtl::scaled_fp8_quant_static<Fp8>(in.cview(), s, out.view(), {n, z});
            bytes b;
            out.append_to(b);
            return b;
          });
        }
      }
    }
    check_executors_agree([&] {
      matrix<Fp8> out(in.rows, cols, 5);
      float const s = qtl::scaled_fp8_quant_dynamic<Fp8>(in.cview(), out.view());
      bytes b;
      out.append_to(b);
      append(b, &s, 1);
      return b;
    });
  }
}

TEMPLATE_TEST_CASE("per-tensor fp8 quantization: every executor equals the portable one", "[fp8][x86]", float,
                   bfloat16_t, half_t) {
  check_per_tensor<float8_e4m3fn_t, TestType>();
  check_per_tensor<float8_e5m2_t, TestType>();
  // non-temporal stores (rows of at least 256 elements; the output rows start at every offset
  // from a 32-byte boundary, which the streamed part must reach first)
  stream_everything const streamed;
  check_per_tensor<float8_e4m3fn_t, TestType>();
}

TEMPLATE_TEST_CASE("per-token fp8 quantization: every executor equals the portable one", "[fp8][x86]", float,
                   bfloat16_t) {
  using T = TestType;
  std::vector<qtl::fp8_token_options> opts(4);
  opts[1] = qtl::vllm_per_token_options<float8_e4m3fn_t>();
  opts[2].upper_bound = 0.5f;
  opts[3].nan = qtl::fp8_nan::propagate;
  opts[3].zero_scale = qtl::fp8_zero_scale::reciprocal;
  for (index_t const cols : cols_list) {
    matrix<T> const in = hostile_input<T>(21, cols, 100u + static_cast<std::uint32_t>(cols));
    for (std::size_t k = 0; k < opts.size(); ++k) {
      INFO("cols " << cols << " options " << k);
      check_executors_agree([&] {
        matrix<float8_e4m3fn_t> out(in.rows + 1, cols, 5);
        std::vector<float> scales(static_cast<std::size_t>(in.rows + 1));
        qtl::scaled_fp8_quant_per_token<float8_e4m3fn_t>(in.cview(), out.view(),
                                                         qtl::make_view(scales.data(), in.rows + 1), opts[k]);
        bytes b;
        out.append_to(b);
        append(b, scales.data(), scales.size());
        return b;
      });
    }
  }
}

template <int G, class T>
void check_group(index_t groups) {
  matrix<T> const in = hostile_input<T>(23, G * groups, 200u + static_cast<std::uint32_t>(groups));
  for (bool const pow2 : {false, true}) {
    for (qtl::fp8_scale_op const op : {qtl::fp8_scale_op::divide, qtl::fp8_scale_op::multiply_reciprocal}) {
      for (float const eps : {1e-10f, 0.0f, 1e-42f}) {
        for (auto const layout : {qtl::group_scale_layout::row_major, qtl::group_scale_layout::column_major}) {
          for (qtl::fp8_nan const n : {qtl::fp8_nan::to_max, qtl::fp8_nan::propagate}) {
            INFO("G " << G << " groups " << groups << " pow2 " << pow2 << " op " << int(op) << " eps " << eps
                      << " layout " << int(layout) << " nan " << int(n));
            qtl::fp8_group_options o;
            o.power_of_two_scale = pow2;
            o.op = op;
            o.eps = eps;
            o.layout = layout;
            o.row_align = layout == qtl::group_scale_layout::column_major ? 4 : 1;
            o.nan = n;
            check_executors_agree([&] {
              index_t const rows = in.rows + 2;
              matrix<float8_e4m3fn_t> out(rows, in.cols, 5);
              std::vector<float> scales(
                  static_cast<std::size_t>(qtl::group_scale_storage_size(o.layout, rows, groups, o.row_align)), -1.0f);
              qtl::per_token_group_quant_fp8<G>(in.cview(), out.view(), scales, o);
              if (op == qtl::fp8_scale_op::divide) {  // the UE8M0 multiply shortcut is the division
                for (index_t i = 0; i < in.rows; ++i) {
                  for (index_t j = 0; j < in.cols; ++j) {
                    float const sc = scales[static_cast<std::size_t>(
                        qtl::group_scale_offset(o.layout, i, j / G, rows, groups, o.row_align))];
                    float const x = qtl::to_float(in.cview()(i, j));
                    std::uint8_t const want =
                        n == qtl::fp8_nan::to_max
                            ? qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::to_max,
                                                        qtl::fp8_scale_op::divide>(x, sc, 0.0f)
                            : qtl::fp8_quantize_element<float8_e4m3fn_t, qtl::fp8_nan::propagate,
                                                        qtl::fp8_scale_op::divide>(x, sc, 0.0f);
                    if (out.at(i, j).bits != want) {
                      REQUIRE(int(out.at(i, j).bits) == int(want));
                    }
                  }
                }
              }
              bytes b;
              out.append_to(b);
              append(b, scales.data(), scales.size());
              return b;
            });
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("per-token-group fp8 quantization: every executor equals the portable one", "[fp8][x86]", float,
                   bfloat16_t) {
  // group counts below, at and past the 16-group steps, with a ragged remainder
  for (index_t const groups : {1, 15, 16, 37}) {
    check_group<128, TestType>(groups);
    check_group<32, TestType>(groups);
  }
  check_group<48, TestType>(5);
}

TEST_CASE("requantize_with_max_scale and fp8_all_close: every executor equals the portable one", "[fp8][x86]") {
  std::mt19937 gen(5);
  for (index_t const cols : cols_list) {
    matrix<float8_e4m3fn_t> w(37, cols);
    for (index_t i = 0; i < w.rows; ++i) {
      for (index_t j = 0; j < cols; ++j) {
        w.at(i, j).bits = static_cast<std::uint8_t>(gen());
      }
    }
    std::vector<index_t> const widths = {10, 0, 20, 5};
    std::vector<float> const four = {0.5f, 2.0f, 1e-3f, 7.0f};
    check_executors_agree([&] {
      matrix<float8_e4m3fn_t> v = w;
      float const m = qtl::requantize_with_max_scale(v.view(), {four, false}, widths);
      bytes b;
      v.append_to(b);
      append(b, &m, 1);
      return b;
    });
    // planted differences: one code, two codes, sign flips, NaN/zero pairs, random bytes
    matrix<float8_e4m3fn_t> other = w;
    for (index_t i = 0; i < w.rows; ++i) {
      for (index_t j = 0; j < cols; ++j) {
        std::uint32_t const u = gen() % 8;
        auto& c = other.at(i, j).bits;
        c = static_cast<std::uint8_t>(u == 0 ? c + 1 : u == 1 ? c - 2 : u == 2 ? c ^ 0x80u : u == 3 ? gen() : c);
      }
    }
    auto const report = [](qtl::fp8_compare_report const& r) {
      bytes b;
      index_t const f[] = {r.numel, r.sign_flips, r.differ, r.differ_large, index_t{r.passed}};
      append(b, f, 5);
      return b;
    };
    check_executors_agree([&] { return report(qtl::fp8_all_close<float8_e4m3fn_t>(w.cview(), other.cview())); });
    auto const e5 = [](matrix<float8_e4m3fn_t> const& m) {  // the same bytes as e5m2 codes
      matrix<float8_e5m2_t> r(m.rows, m.cols);
      for (index_t i = 0; i < m.rows; ++i) {
        for (index_t j = 0; j < m.cols; ++j) {
          r.at(i, j).bits = m.cview()(i, j).bits;
        }
      }
      return r;
    };
    matrix<float8_e5m2_t> const w5 = e5(w);
    matrix<float8_e5m2_t> const other5 = e5(other);
    check_executors_agree([&] { return report(qtl::fp8_all_close<float8_e5m2_t>(w5.cview(), other5.cview())); });
  }
}

// The codes of each encoder on `x`, for the three encodings the element functions define.
struct fp8_codes {
  std::vector<std::uint8_t> e4m3, e4m3_nan, e5m2;
  explicit fp8_codes(std::size_t n) : e4m3(n), e4m3_nan(n), e5m2(n) {}
};

// Each x86 form of `fp8_saturate_encode` (SSE2 `fp8_encode4`, AVX2 `fp8_encode8`, AVX-512
// `fp8_encode16`) on the first `x.size() - x.size() % lanes` floats: `Encoder::get<Fp8, Nan>(p, c)`
// encodes the floats at `p` into int32 lanes at `c`.
template <int Lanes, class Encoder>
fp8_codes encode_all(std::vector<float> const& x) {
  std::size_t const n = x.size() - x.size() % Lanes;
  fp8_codes r(n);
  alignas(64) std::int32_t c[Lanes];
  for (std::size_t i = 0; i < n; i += Lanes) {
    auto const put = [&](std::vector<std::uint8_t>& to) {
      for (std::size_t k = 0; k < Lanes; ++k) {
        to[i + k] = static_cast<std::uint8_t>(c[k]);
      }
    };
    Encoder::template get<float8_e4m3fn_t, qtl::fp8_nan::to_max>(x.data() + i, c);
    put(r.e4m3);
    Encoder::template get<float8_e4m3fn_t, qtl::fp8_nan::propagate>(x.data() + i, c);
    put(r.e4m3_nan);
    Encoder::template get<float8_e5m2_t, qtl::fp8_nan::to_max>(x.data() + i, c);
    put(r.e5m2);
  }
  return r;
}

struct sse2_encoder {
  template <class Fp8, qtl::fp8_nan Nan>
  static void get(float const* p, std::int32_t* c) {
    _mm_store_si128(reinterpret_cast<__m128i*>(c), qtl::detail::fp8_encode4<Fp8, Nan>(_mm_loadu_ps(p)));
  }
};
struct avx2_encoder {
  template <class Fp8, qtl::fp8_nan Nan>
  QTL_X86_AVX2 static void get(float const* p, std::int32_t* c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), x86::fp8_encode8<Fp8, Nan>(_mm256_loadu_ps(p)));
  }
};
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"  // see qtl/fp8.hpp
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^
struct avx512_encoder {
  template <class Fp8, qtl::fp8_nan Nan>
  QTL_X86_AVX512_VBMI static void get(float const* p, std::int32_t* c) {
    _mm512_store_si512(c, x86::fp8_encode16<Fp8, Nan>(_mm512_loadu_ps(p)));
  }
};
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ g++ ^^^

// `encode_all`'s codes equal the element functions' on every float of `boundary_floats()`: every
// exponent, both signs, ±0, subnormals, ±Inf, NaNs, ties and their neighbours, saturation.
template <int Lanes, class Encoder>
void check_encoder() {
  std::vector<float> const x = boundary_floats();
  fp8_codes const c = encode_all<Lanes, Encoder>(x);
  for (std::size_t i = 0; i < c.e4m3.size(); ++i) {
    INFO("float bits " << std::hex << qtl::float_to_bits(x[i]));
    REQUIRE(int(c.e4m3[i]) == int(qtl::fp8_saturate_encode<float8_e4m3fn_t>(x[i])));
    REQUIRE(int(c.e4m3_nan[i]) == int(qtl::fp8_saturate_encode<float8_e4m3fn_t, qtl::fp8_nan::propagate>(x[i])));
    REQUIRE(int(c.e5m2[i]) == int(qtl::fp8_saturate_encode<float8_e5m2_t>(x[i])));
  }
}

TEST_CASE("the SSE2 FP8 encoder equals the element functions at every rounding boundary", "[fp8][x86]") {
  check_encoder<4, sse2_encoder>();
}

TEST_CASE("the AVX2 FP8 encoder equals the element functions at every rounding boundary", "[fp8][x86]") {
  if (x86::fp8_cpu_isa() < x86::fp8_isa::avx2) {
    return qtl_test::skip("no AVX2 on this CPU: the 8-lane FP8 encoder cannot run");
  }
  check_encoder<8, avx2_encoder>();
}

TEST_CASE("AVX-512 FP8 encoders equal the element functions at every rounding boundary", "[fp8][x86]") {
  if (x86::fp8_cpu_isa() < x86::fp8_isa::avx512) {
    return qtl_test::skip("no AVX-512 on this CPU: the 16-lane FP8 encoders cannot run");
  }
  check_encoder<16, avx512_encoder>();
}

}  // namespace

#else

TEST_CASE("x86 executors of fp8", "[fp8][x86]") { qtl_test::skip("not an x86-64 GCC/Clang host build: no executor to compare"); }

#endif  // ^^^ QTL_X86 ^^^
