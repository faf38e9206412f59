// <qtl/cuda/quantize.cuh> against the host functions of <qtl/quantize.hpp>, bit for bit (NaNs as
// NaNs): fp32/fp16/bf16 weights, symmetric and zero-point types, group sizes 32, 128, a run-time
// 48, channelwise and none, all-zero and NaN groups, act-order, permute_rows, sort_weights (stable
// CUB radix sort vs the host's stable sort) and per_tensor_dequantize. The shared main exits 77
// (skipped) without a GPU.

#include <qtl/cuda/quantize.cuh>
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <device_compare.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using qtl::index_t;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

/// Equal bits, or both NaN (host and device may differ in a NaN's sign and payload).
template <class T>
bool same(std::vector<T> const& a, T const* b, std::size_t n) {
  if (a.size() != n) {
    return false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    bool const nan_a = std::isnan(qtl::to_float(a[i]));
    bool const nan_b = std::isnan(qtl::to_float(b[i]));
    if (nan_a != nan_b || (!nan_a && std::memcmp(&a[i], &b[i], sizeof(T)) != 0)) {
      return false;
    }
  }
  return true;
}
bool same(std::vector<std::int32_t> const& a, std::int32_t const* b, std::size_t n) {
  return a.size() == n && std::memcmp(a.data(), b, n * sizeof(std::int32_t)) == 0;
}

template <class T>
std::vector<T> weights(index_t k, index_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<T> w(static_cast<std::size_t>(k * n));
  for (auto& x : w) {
    x = qtl::from_float<T>(dist(rng));
  }
  // Column 3 all zero, column 5 with one NaN (in the first group).
  for (index_t i = 0; i < k; ++i) {
    w[static_cast<std::size_t>(i * n + 3)] = qtl::from_float<T>(0.0f);
  }
  w[static_cast<std::size_t>(1 * n + 5)] = qtl::from_float<T>(std::numeric_limits<float>::quiet_NaN());
  return w;
}

template <class T, qtl::scalar_type Q>
void compare_grouped(index_t k, index_t n, index_t gs, qtl::quantize_options opt) {
  INFO("K " << k << " N " << n << " group " << gs << " zp " << opt.zero_points << " after "
            << opt.ref_zero_points_after_scales << " dtype size " << sizeof(T));
  auto const w = weights<T>(k, n, static_cast<std::uint32_t>(k + n + gs));
  index_t const g = (gs == -1 || gs >= k) ? k : gs;
  qtl::quantized_weights<T> host{qtl::host_tensor<T, 2>({k, n}), qtl::host_tensor<std::int32_t, 2>({k, n}),
                                 qtl::host_tensor<T, 2>({k / g, n}),
                                 qtl::host_tensor<std::int32_t, 2>({opt.zero_points ? k / g : 0, n})};
  qtl::quantize_weights<Q>(qtl::make_view(w.data(), k, n), gs, host.views(), opt);
  qtl_test::device_buffer<T> dw(w);
  qtl_test::device_buffer<T> ref(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> q(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<T> s(static_cast<std::size_t>(k / g * n));
  qtl_test::device_buffer<std::int32_t> zp(static_cast<std::size_t>(opt.zero_points ? k / g * n : 0));
  qtl::quantize_outputs<T> out{ref.view(k, n), q.view(k, n), s.view(k / g, n),
                               zp.view(opt.zero_points ? k / g : 0, n)};
  CUDA_REQUIRE(qtl::cuda::quantize_weights<Q>(qtl::view2d<T const>(dw.view(k, n)), gs, out, opt, nullptr));
  CHECK(same(ref.get(), host.w_ref.data(), host.w_ref.storage().size()));
  CHECK(same(q.get(), host.w_q.data(), host.w_q.storage().size()));
  CHECK(same(s.get(), host.w_s.data(), host.w_s.storage().size()));
  if (opt.zero_points) {
    CHECK(same(zp.get(), host.w_zp.data(), host.w_zp.storage().size()));
  }
}

// A view of rows x cols inside a buffer whose rows are `stride` elements apart (padded rows).
template <class T>
qtl::view2d<T> padded(T* p, index_t rows, index_t cols, index_t stride) {
  qtl::view2d<T> v = qtl::make_view(p, rows, cols);
  v.stride[0] = stride;
  return v;
}

/// `rows * stride` elements whose bytes are all 0xA5, qtl_test::device_fill (so host and device
/// buffers start equal, padding included).
template <class T>
std::vector<T> filled(index_t rows, index_t stride) {
  std::vector<T> v(static_cast<std::size_t>(rows * stride));
  std::memset(static_cast<void*>(v.data()), qtl_test::device_fill, v.size() * sizeof(T));
  return v;
}

/// True when element `cols` .. `stride - 1` of every row still hold 0xA5 bytes (never written).
template <class T>
bool padding_untouched(std::vector<T> const& v, index_t rows, index_t cols, index_t stride) {
  for (index_t r = 0; r < rows; ++r) {
    auto const* b = reinterpret_cast<unsigned char const*>(v.data() + r * stride + cols);
    for (std::size_t i = 0; i < static_cast<std::size_t>(stride - cols) * sizeof(T); ++i) {
      if (b[i] != 0xA5) {
        return false;
      }
    }
  }
  return true;
}

// Grouped quantization with zero points, ungrouped quantization and per_tensor_dequantize of
// views whose rows are padded, every view with its own row stride (w n + 3, w_ref n + 5, w_q n + 2,
// w_s n + 1, w_zp n + 4): the kernels index by the strides, equal the host over the whole buffers,
// and never write the padding (it keeps its 0xA5 fill).
template <class T>
void padded_quantize(index_t k, index_t n, index_t gs) {
  INFO("K " << k << " N " << n << " group " << gs << " dtype size " << sizeof(T));
  index_t const g = gs == -1 ? k : gs;
  index_t const ws = n + 3, rs = n + 5, qs = n + 2, ss = n + 1, zs = n + 4;
  auto const w = weights<T>(k, ws, static_cast<std::uint32_t>(k * n + gs));
  auto const hw = padded(w.data(), k, n, ws);
  auto h_ref = filled<T>(k, rs);
  auto h_q = filled<std::int32_t>(k, qs);
  auto h_s = filled<T>(k / g, ss);
  auto h_zp = filled<std::int32_t>(k / g, zs);
  qtl::quantize_weights<qtl::uint4>(hw, gs,
                                    qtl::quantize_outputs<T>{padded(h_ref.data(), k, n, rs), padded(h_q.data(), k, n, qs),
                                                             padded(h_s.data(), k / g, n, ss),
                                                             padded(h_zp.data(), k / g, n, zs)},
                                    {.zero_points = true});
  qtl_test::device_buffer<T> dw(w);
  qtl_test::device_buffer<T> ref(h_ref.size());
  qtl_test::device_buffer<std::int32_t> q(h_q.size());
  qtl_test::device_buffer<T> s(h_s.size());
  qtl_test::device_buffer<std::int32_t> zp(h_zp.size());
  CUDA_REQUIRE(qtl::cuda::quantize_weights<qtl::uint4>(
      qtl::view2d<T const>(padded(dw.ptr, k, n, ws)), gs,
      qtl::quantize_outputs<T>{padded(ref.ptr, k, n, rs), padded(q.ptr, k, n, qs), padded(s.ptr, k / g, n, ss),
                               padded(zp.ptr, k / g, n, zs)},
      {.zero_points = true}, nullptr));
  CHECK(same(ref.get(), h_ref.data(), h_ref.size()));
  CHECK(same(q.get(), h_q.data(), h_q.size()));
  CHECK(same(s.get(), h_s.data(), h_s.size()));
  CHECK(same(zp.get(), h_zp.data(), h_zp.size()));
  CHECK(padding_untouched(ref.get(), k, n, rs));
  CHECK(padding_untouched(q.get(), k, n, qs));
  CHECK(padding_untouched(s.get(), k / g, n, ss));
  CHECK(padding_untouched(zp.get(), k / g, n, zs));

  // Ungrouped (float w_ref).
  auto u_ref = filled<float>(k, rs);
  auto u_q = filled<std::int32_t>(k, qs);
  qtl::quantize_weights<qtl::int8, qtl::group_none>(
      hw, qtl::quantize_outputs<float>{padded(u_ref.data(), k, n, rs), padded(u_q.data(), k, n, qs), {}, {}});
  qtl_test::device_buffer<float> du_ref(u_ref.size());
  qtl_test::device_buffer<std::int32_t> du_q(u_q.size());
  CUDA_REQUIRE(qtl::cuda::quantize_weights<qtl::int8>(
      qtl::view2d<T const>(padded(dw.ptr, k, n, ws)), std::nullopt,
      qtl::quantize_outputs<float>{padded(du_ref.ptr, k, n, rs), padded(du_q.ptr, k, n, qs), {}, {}}, {}, nullptr));
  CHECK(same(du_ref.get(), u_ref.data(), u_ref.size()));
  CHECK(same(du_q.get(), u_q.data(), u_q.size()));
  CHECK(padding_untouched(du_ref.get(), k, n, rs));

  // per_tensor_dequantize of padded fp8 codes into padded float (T float) or half_t.
  using O = std::conditional_t<std::is_same_v<T, float>, float, qtl::half_t>;
  std::vector<qtl::float8_e4m3fn_t> codes(static_cast<std::size_t>(k * ws));
  for (std::size_t i = 0; i < codes.size(); ++i) {
    codes[i].bits = static_cast<std::uint8_t>(i * 37);
  }
  auto h_dq = filled<O>(k, rs);
  qtl::per_tensor_dequantize(padded(codes.data(), k, n, ws), 0.0173f, padded(h_dq.data(), k, n, rs));
  qtl_test::device_buffer<qtl::float8_e4m3fn_t> dcodes(codes);
  qtl_test::device_buffer<O> d_dq(h_dq.size());
  CUDA_REQUIRE(
      qtl::cuda::per_tensor_dequantize(padded(dcodes.ptr, k, n, ws), 0.0173f, padded(d_dq.ptr, k, n, rs), nullptr));
  CHECK(same(d_dq.get(), h_dq.data(), h_dq.size()));
  CHECK(padding_untouched(d_dq.get(), k, n, rs));
}

}  // namespace

TEMPLATE_TEST_CASE("device quantize_weights equals the host bit for bit", "[quantize][cuda]", float, qtl::half_t,
                   qtl::bfloat16_t) {
  for (index_t gs : {index_t{32}, index_t{128}, index_t{48}, index_t{-1}}) {
    compare_grouped<TestType, qtl::uint4b8>(384, 100, gs, {});
    compare_grouped<TestType, qtl::uint8b128>(384, 64, gs, {});
    compare_grouped<TestType, qtl::uint4>(384, 70, gs, {.zero_points = true});
    compare_grouped<TestType, qtl::uint8>(384, 33, gs, {.zero_points = true, .ref_zero_points_after_scales = true});
  }
  compare_grouped<TestType, qtl::int4>(4, 40, 2, {});  // groups smaller than the row slices
  compare_grouped<TestType, qtl::int8>(2048, 40, -1, {});
}

TEMPLATE_TEST_CASE("device ungrouped quantize_weights equals the host", "[quantize][cuda]", float, qtl::half_t,
                   qtl::bfloat16_t) {
  index_t const k = 64;
  index_t const n = 50;
  std::vector<TestType> w = weights<TestType>(k, n, 3);
  for (auto& x : w) {
    x = qtl::from_float<TestType>(qtl::to_float(x) * 400.0f);
  }
  auto const host = qtl::quantize_weights<qtl::int8, qtl::group_none>(qtl::make_view(w.data(), k, n));
  qtl_test::device_buffer<TestType> dw(w);
  qtl_test::device_buffer<float> ref(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> q(static_cast<std::size_t>(k * n));
  CUDA_REQUIRE(qtl::cuda::quantize_weights<qtl::int8>(qtl::view2d<TestType const>(dw.view(k, n)), std::nullopt,
                                                       qtl::quantize_outputs<float>{ref.view(k, n), q.view(k, n), {}, {}},
                                                       {}, nullptr));
  CHECK(same(ref.get(), host.w_ref.data(), host.w_ref.storage().size()));
  CHECK(same(q.get(), host.w_q.data(), host.w_q.storage().size()));
}

TEMPLATE_TEST_CASE("device quantization of padded rows equals the host; padding untouched", "[quantize][cuda]", float,
                   qtl::half_t, qtl::bfloat16_t) {
  padded_quantize<TestType>(256, 40, 64);
  padded_quantize<TestType>(96, 33, -1);  // channelwise
  padded_quantize<TestType>(48, 7, 48);
}

#if !defined(__SANITIZE_ADDRESS__)
// Full size, so not under AddressSanitizer (the capped runs of every size keep the loop covered
// there): one block row per group up to grid.y's cap of 65535, so groups 65535.. are the
// grid-stride loop's second pass at the device's real cap.
TEST_CASE("device quantize_weights past 65535 groups (the grid-stride loop at full size)", "[quantize][cuda][full]") {
  if (qtl_test::grid_caps_lowered()) {
    return;  // a capped run: the small cases already run the loop past the (lowered) cap
  }
  compare_grouped<qtl::bfloat16_t, qtl::uint4>(2 * (65535 + 65), 5, 2, {.zero_points = true});
}
#endif  // ^^^ not under AddressSanitizer ^^^

TEST_CASE("device act-order, permute_rows and sort_weights equal the host", "[quantize][cuda]") {
  index_t const k = 256;
  index_t const n = 24;
  auto const w = weights<qtl::half_t>(k, n, 8);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(k));
  qtl::random_permutation(5, qtl::make_view(perm.data(), k));
  // Host GPTQ with act-order.
  qtl::host_tensor<qtl::half_t, 2> h_ref({k, n});
  qtl::host_tensor<std::int32_t, 2> h_q({k, n});
  qtl::host_tensor<qtl::half_t, 2> h_s({k / 64, n});
  std::vector<std::int32_t> h_g(static_cast<std::size_t>(k));
  std::vector<std::int64_t> h_p(static_cast<std::size_t>(k));
  qtl::gptq_options opt;
  opt.act_order = true;
  opt.perm = qtl::make_view(static_cast<std::int64_t const*>(perm.data()), k);
  qtl::gptq_quantize_weights<qtl::uint4b8, 64>(
      qtl::make_view(w.data(), k, n),
      qtl::gptq_outputs<qtl::half_t>{h_ref.view(), h_q.view(), h_s.view(), qtl::make_view(h_g.data(), k),
                                     qtl::make_view(h_p.data(), k)},
      opt);
  // Device GPTQ.
  qtl_test::device_buffer<qtl::half_t> dw(w);
  qtl_test::device_buffer<std::int64_t> dperm(perm);
  qtl_test::device_buffer<qtl::half_t> d_ref(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> d_q(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<qtl::half_t> d_s(static_cast<std::size_t>(k / 64 * n));
  qtl_test::device_buffer<std::int32_t> d_g(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int64_t> d_p(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int32_t> scratch(static_cast<std::size_t>(k));
  CUDA_REQUIRE((qtl::cuda::gptq_quantize_weights<qtl::uint4b8>(
      qtl::view2d<qtl::half_t const>(dw.view(k, n)), 64,
      qtl::gptq_outputs<qtl::half_t>{d_ref.view(k, n), d_q.view(k, n), d_s.view(k / 64, n), qtl::make_view(d_g.ptr, k),
                                     qtl::make_view(d_p.ptr, k)},
      dperm.ptr, scratch.ptr, nullptr)));
  CHECK(same(d_ref.get(), h_ref.data(), h_ref.storage().size()));
  CHECK(same(d_q.get(), h_q.data(), h_q.storage().size()));
  CHECK(same(d_s.get(), h_s.data(), h_s.storage().size()));
  CHECK(d_g.get() == h_g);
  CHECK(d_p.get() == h_p);

  // permute_rows of the plain quantization equals act-order's output.
  auto const plain = qtl::quantize_weights<qtl::uint4b8, 64>(qtl::make_view(w.data(), k, n));
  qtl_test::device_buffer<std::int32_t> pq(plain.w_q.storage());
  qtl_test::device_buffer<qtl::half_t> pref(plain.w_ref.storage());
  qtl_test::device_buffer<qtl::half_t> o_ref(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> o_q(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> o_g(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int64_t> o_p(static_cast<std::size_t>(k));
  CUDA_REQUIRE(qtl::cuda::permute_rows(pq.view(k, n), pref.view(k, n), 64, dperm.ptr,
                                       qtl::permute_rows_outputs<qtl::half_t>{o_ref.view(k, n), o_q.view(k, n),
                                                                              qtl::make_view(o_g.ptr, k),
                                                                              qtl::make_view(o_p.ptr, k)},
                                       nullptr));
  CHECK(same(o_q.get(), h_q.data(), h_q.storage().size()));
  CHECK(same(o_ref.get(), h_ref.data(), h_ref.storage().size()));
  CHECK(o_g.get() == h_g);
  CHECK(o_p.get() == h_p);

  // sort_weights: stable on the device as on the host (g_idx has many ties).
  qtl::host_tensor<std::int32_t, 2> s_q({k, n});
  std::vector<std::int32_t> s_g(static_cast<std::size_t>(k));
  std::vector<std::int32_t> s_i(static_cast<std::size_t>(k));
  qtl::sort_weights(h_q.view(), qtl::make_view(h_g.data(), k),
                    qtl::sort_weights_outputs{s_q.view(), qtl::make_view(s_g.data(), k), qtl::make_view(s_i.data(), k)});
  qtl_test::device_buffer<std::int32_t> sq(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> sg(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int32_t> si(static_cast<std::size_t>(k));
  qtl::sort_weights_outputs const dout{sq.view(k, n), qtl::make_view(sg.ptr, k), qtl::make_view(si.ptr, k)};
  std::size_t bytes = 0;
  CUDA_REQUIRE(qtl::cuda::sort_weights(nullptr, bytes, o_q.view(k, n), o_g.ptr, dout, nullptr));
  qtl_test::device_buffer<std::byte> ws(bytes);
  CUDA_REQUIRE(qtl::cuda::sort_weights(ws.ptr, bytes, o_q.view(k, n), o_g.ptr, dout, nullptr));
  CHECK(si.get() == s_i);
  CHECK(sg.get() == s_g);
  CHECK(same(sq.get(), s_q.data(), s_q.storage().size()));
}

TEST_CASE("device per_tensor_dequantize equals the host; launchers reject what the host rejects", "[quantize][cuda]") {
  std::vector<qtl::float8_e4m3fn_t> t(256);
  for (std::size_t i = 0; i < t.size(); ++i) {
    t[i].bits = static_cast<std::uint8_t>(i);
  }
  qtl::host_tensor<qtl::half_t, 2> h({16, 16});
  qtl::per_tensor_dequantize(qtl::make_view(t.data(), 16, 16), 0.0173f, h.view());
  qtl_test::device_buffer<qtl::float8_e4m3fn_t> dt(t);
  qtl_test::device_buffer<qtl::half_t> dh(256);
  CUDA_REQUIRE(qtl::cuda::per_tensor_dequantize(dt.view(16, 16), 0.0173f, dh.view(16, 16), nullptr));
  CHECK(same(dh.get(), h.data(), 256));
  // the float output (a 1-element scale)
  qtl::host_tensor<float, 2> hf({16, 16});
  qtl::per_tensor_dequantize(qtl::make_view(t.data(), 16, 16), 0.0173f, hf.view());
  qtl_test::device_buffer<float> df(256);
  CUDA_REQUIRE(qtl::cuda::per_tensor_dequantize(dt.view(16, 16), 0.0173f, df.view(16, 16), nullptr));
  CHECK(same(df.get(), hf.data(), 256));

  qtl_test::device_buffer<float> w(6 * 4);
  qtl_test::device_buffer<float> ref(6 * 4);
  qtl_test::device_buffer<std::int32_t> q(6 * 4);
  qtl_test::device_buffer<float> s(3 * 4);
  qtl::quantize_outputs<float> out{ref.view(6, 4), q.view(6, 4), s.view(3, 4), {}};
  CHECK(qtl::cuda::quantize_weights<qtl::uint4b8>(qtl::view2d<float const>(w.view(6, 4)), 4, out, {}, nullptr) ==
        cudaErrorInvalidValue);  // 4 does not divide 6
  CHECK(qtl::cuda::quantize_weights<qtl::int4>(qtl::view2d<float const>(w.view(6, 4)), 2, out, {.zero_points = true},
                                               nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("device launchers return their own status and check everything before they enqueue", "[quantize][cuda]") {
  // An unrelated earlier error (cudaFree of memory that is not a device allocation) stays for
  // cudaGetLastError; a launcher neither returns nor clears it (they returned cudaGetLastError()).
  int not_device = 0;
  CHECK(cudaFree(&not_device) != cudaSuccess);
  std::vector<qtl::float8_e4m3fn_t> t(16);
  qtl_test::device_buffer<qtl::float8_e4m3fn_t> dt(t);
  qtl_test::device_buffer<qtl::half_t> dh(16);
  CHECK(qtl::cuda::per_tensor_dequantize(dt.view(4, 4), 1.0f, dh.view(4, 4), nullptr) == cudaSuccess);
  CHECK(cudaGetLastError() != cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);

  // gptq with act-order and a g_idx of the wrong length: rejected before inverse_kernel writes
  // the scratch (it was enqueued before the check)
  index_t const k = 128;
  index_t const n = 8;
  std::vector<std::int64_t> perm(static_cast<std::size_t>(k));
  for (index_t i = 0; i < k; ++i) {
    perm[static_cast<std::size_t>(i)] = k - 1 - i;
  }
  qtl_test::device_buffer<float> w(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int64_t> dperm(perm);
  qtl_test::device_buffer<float> ref(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<std::int32_t> q(static_cast<std::size_t>(k * n));
  qtl_test::device_buffer<float> s(static_cast<std::size_t>(k / 32 * n));
  qtl_test::device_buffer<std::int32_t> g(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int64_t> p(static_cast<std::size_t>(k));
  qtl_test::device_buffer<std::int32_t> scratch(static_cast<std::size_t>(k));
  auto const before = scratch.get();
  CHECK(qtl::cuda::gptq_quantize_weights<qtl::uint4b8>(
            qtl::view2d<float const>(w.view(k, n)), 32,
            qtl::gptq_outputs<float>{ref.view(k, n), q.view(k, n), s.view(k / 32, n), qtl::make_view(g.ptr, k - 1),
                                     qtl::make_view(p.ptr, k)},
            dperm.ptr, scratch.ptr, nullptr) == cudaErrorInvalidValue);
  CHECK(scratch.get() == before);
}
