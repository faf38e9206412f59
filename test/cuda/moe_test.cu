// <qtl/cuda/moe.cuh> against the host plan of <qtl/moe.hpp>, byte for byte: the four prepared
// tensors of small MoE layers, gated and not, epilogue tiles 128 and 64, and launcher errors. The
// shared main exits 77 (skipped) without a GPU.

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/cuda/moe.cuh>
#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>

namespace {

using qtl::index_t;
using qtl::make_view;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

using qtl_test::device_bytes;

// `in_offset`, `out_offset`: bytes by which the device tensors start past a cudaMalloc (256-byte aligned)
// allocation (not a multiple of 16: the byte-copy paths of the kernels instead of uint4 / uint32).
template <int EpilogueTileM>
void check_moe(index_t h, index_t i, index_t e, bool gated, std::size_t in_offset = 0, std::size_t out_offset = 0) {
  CAPTURE(EpilogueTileM, h, i, e, gated, in_offset, out_offset);
  qtl::trtllm_fp4_moe_shape const shape{.hidden_size = h, .intermediate_size = i, .num_experts = e, .gated = gated};
  index_t const r1 = shape.gemm1_rows();
  std::size_t const sizes[4] = {static_cast<std::size_t>(e * r1 * h / 2), static_cast<std::size_t>(e * r1 * h / 16),
                                static_cast<std::size_t>(e * h * i / 2), static_cast<std::size_t>(e * h * i / 16)};
  std::size_t const total = sizes[0] + sizes[1] + sizes[2] + sizes[3];
  std::vector<std::uint8_t> host_in(total);
  std::mt19937 rng(static_cast<std::uint32_t>(h + i + e));
  for (auto& b : host_in) {
    b = static_cast<std::uint8_t>(rng());
  }
  std::vector<std::uint8_t> host_out(total);
  auto const tensors = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    return qtl::trtllm_fp4_moe_tensors<T, T>{make_view(p, e, r1, h / 2), make_view(p + sizes[0], e, r1, h / 16),
                                             make_view(p + sizes[0] + sizes[1], e, h, i / 2),
                                             make_view(p + sizes[0] + sizes[1] + sizes[2], e, h, i / 16)};
  };
  qtl::trtllm_fp4_moe_plan<EpilogueTileM>(shape).apply(tensors(static_cast<std::uint8_t const*>(host_in.data())),
                                                       tensors(host_out.data()));
  device_bytes in(total);
  device_bytes out(total);
  CUDA_REQUIRE(cudaMemcpy(in.p + in_offset, host_in.data(), total, cudaMemcpyHostToDevice));
  CUDA_REQUIRE(qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe<EpilogueTileM>(
      shape, tensors(static_cast<std::uint8_t const*>(in.p + in_offset)), tensors(out.p + out_offset)));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<std::uint8_t> got(total + 64);
  CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, total + 64, cudaMemcpyDeviceToHost));
  REQUIRE(std::vector<std::uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(out_offset),
                                    got.begin() + static_cast<std::ptrdiff_t>(out_offset + total)) == host_out);
  // The bytes before and after the output keep device_bytes' 0xAB fill.
  for (std::size_t b = 0; b < out_offset; ++b) CHECK(got[b] == 0xAB);
  for (std::size_t b = out_offset + total; b < total + 64; ++b) CHECK(got[b] == 0xAB);
}

}  // namespace

TEST_CASE("device MoE preparation equals the host plan, byte for byte", "[cuda][moe]") {
  check_moe<128>(128, 64, 3, true);
  check_moe<128>(256, 128, 2, false);
  check_moe<128>(384, 192, 5, true);
  check_moe<64>(256, 128, 2, true);
  check_moe<128>(1024, 512, 8, true);
}

TEST_CASE("device MoE preparation of unaligned tensors equals the host plan, guard bytes untouched", "[cuda][moe]") {
  check_moe<128>(128, 64, 3, true, 1, 3);
  check_moe<128>(256, 128, 2, false, 0, 5);
  check_moe<64>(256, 128, 2, true, 7, 0);
  check_moe<128>(128, 64, 2, true, 16, 36);  // 16-byte aligned input, 4-byte aligned output: mixed paths
}

#if !defined(QTL_CUDA_SIM)
// Full size, on a real device only: 4097 experts of GEMM1 rows 256 are 1,048,832 rows, past the
// row-gather grid's cap of 2^20 blocks, so the last 256 rows are the grid-stride loop's second
// pass at the real cap. About 110 MiB of tensors. Not on the simulated device: some 200 million
// simulated threads (the 17 million of fp8's full-size case take about 5 s there), too slow for
// CI; its capped runs (QTL_CUDA_SIM_GRID_CAP=3) cover the loop past the cap there.
TEST_CASE("device MoE preparation past 2^20 rows (the grid-stride loop at full size)", "[cuda][moe][full]") {
  check_moe<128>(128, 128, 4097, true);
}
#endif  // ^^^ not on the simulated device ^^^

TEST_CASE("device MoE launcher rejects shapes the host plan rejects", "[cuda][moe]") {
  device_bytes buf(1 << 16);
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const in{
      make_view(static_cast<std::uint8_t const*>(buf.p), 1, 128, 64),
      make_view(static_cast<std::uint8_t const*>(buf.p), 1, 128, 8),
      make_view(static_cast<std::uint8_t const*>(buf.p), 1, 128, 32),
      make_view(static_cast<std::uint8_t const*>(buf.p), 1, 128, 4)};
  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const out{
      make_view(buf.p + 20000, 1, 128, 64), make_view(buf.p + 30000, 1, 128, 8), make_view(buf.p + 40000, 1, 128, 32),
      make_view(buf.p + 50000, 1, 128, 4)};
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe(
            {.hidden_size = 96, .intermediate_size = 64, .num_experts = 1}, in, out) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe(
            {.hidden_size = 128, .intermediate_size = 32, .num_experts = 1}, in, out) == cudaErrorInvalidValue);
  auto bad = out;
  bad.gemm2_scales = make_view(buf.p + 50000, 1, 128, 5);
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe(
            {.hidden_size = 128, .intermediate_size = 64, .num_experts = 1}, in, bad) == cudaErrorInvalidValue);
}

// ------------------------------------------------------------------------------------------------
// The FP4 MoE zero padding (align_fp4_moe_weights_for_fi, align_fp4_moe_hidden_dim_for_fi,
// pad_nvfp4_weight_for_cutlass) against the host functions
// ------------------------------------------------------------------------------------------------

namespace {

// One FP4 MoE layer (E, R1, H, I) laid out in one buffer at `offset`, its four tensors' views.
struct moe_layout {
  qtl::fp4_moe_padding x;
  std::size_t sizes[4];
  std::size_t total = 0;

  explicit moe_layout(qtl::fp4_moe_padding const& p) : x(p) {
    for (int k = 0; k < 4; ++k) {
      sizes[k] = static_cast<std::size_t>(x.extents[k][0] * x.extents[k][1] * x.extents[k][2]);
      total += sizes[k];
    }
  }
  template <class T>
  qtl::trtllm_fp4_moe_tensors<T, T> views(T* p) const {
    qtl::view3d<T> v[4];
    for (int k = 0; k < 4; ++k) {
      v[k] = make_view(p, x.extents[k][0], x.extents[k][1], x.extents[k][2]);
      p += sizes[k];
    }
    return {v[0], v[1], v[2], v[3]};
  }
};

// hidden: align_fp4_moe_hidden_dim_for_fi, else align_fp4_moe_weights_for_fi with `up` projections.
void check_pad(bool hidden, index_t e, index_t up, index_t h, index_t i, index_t a, std::size_t offset) {
  CAPTURE(hidden, e, up, h, i, a, offset);
  moe_layout const li(qtl::fp4_moe_padding::of(e, up * i, h, i));
  std::vector<std::uint8_t> host_in(li.total);
  std::mt19937 rng(static_cast<std::uint32_t>(h * 7 + i));
  for (auto& b : host_in) {
    b = static_cast<std::uint8_t>(rng());
  }
  auto const in_h = li.views(static_cast<std::uint8_t const*>(host_in.data()));
  moe_layout const lo(hidden ? qtl::align_fp4_moe_hidden_dim_for_fi_padding(in_h, a)
                             : qtl::align_fp4_moe_weights_for_fi_padding(in_h, up == 2, a));
  std::vector<std::uint8_t> want(lo.total);
  if (hidden) {
    qtl::align_fp4_moe_hidden_dim_for_fi(in_h, lo.views(want.data()), a);
  } else {
    qtl::align_fp4_moe_weights_for_fi(in_h, lo.views(want.data()), up == 2, a);
  }
  device_bytes in(li.total + offset);
  device_bytes out(lo.total + offset);
  CUDA_REQUIRE(cudaMemcpy(in.p + offset, host_in.data(), li.total, cudaMemcpyHostToDevice));
  auto const in_d = li.views(static_cast<std::uint8_t const*>(in.p + offset));
  auto const out_d = lo.views(out.p + offset);
  CUDA_REQUIRE(hidden ? qtl::cuda::align_fp4_moe_hidden_dim_for_fi(in_d, out_d, a)
                      : qtl::cuda::align_fp4_moe_weights_for_fi(in_d, out_d, up == 2, a));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<std::uint8_t> got(lo.total);
  CUDA_REQUIRE(cudaMemcpy(got.data(), out.p + offset, lo.total, cudaMemcpyDeviceToHost));
  REQUIRE(got == want);
}

}  // namespace

TEST_CASE("device FP4 MoE padding equals the host functions, byte for byte", "[cuda][moe]") {
  check_pad(false, 2, 2, 64, 176, 64, 0);   // Gemma-4-26B's TP4 shard: I 176 -> 192
  check_pad(false, 3, 1, 32, 48, 128, 3);   // not gated: I 48 -> 128
  check_pad(false, 2, 2, 32, 96, 16, 0);    // aligned: a copy
  check_pad(true, 1, 2, 2880, 32, 256, 5);  // gpt-oss's hidden 2880 -> 3072
  check_pad(true, 3, 1, 160, 48, 256, 0);
}

TEST_CASE("device pad_nvfp4_weight_for_cutlass equals the host function", "[cuda][moe]") {
  for (auto const [n, kb, a] : {std::array<index_t, 3>{100, 40, 32}, {50, 7, 16}, {64, 16, 32}}) {
    CAPTURE(n, kb, a);
    std::vector<std::uint8_t> w(static_cast<std::size_t>(n * kb));
    std::mt19937 rng(static_cast<std::uint32_t>(n + kb));
    for (auto& b : w) {
      b = static_cast<std::uint8_t>(rng());
    }
    auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(n, kb, a);
    std::vector<std::uint8_t> want(static_cast<std::size_t>(p.rows * p.col_bytes));
    qtl::pad_nvfp4_weight_for_cutlass(make_view(static_cast<std::uint8_t const*>(w.data()), n, kb),
                                      make_view(want.data(), p.rows, p.col_bytes), a);
    device_bytes in(w.size());
    device_bytes out(want.size());
    CUDA_REQUIRE(cudaMemcpy(in.p, w.data(), w.size(), cudaMemcpyHostToDevice));
    CUDA_REQUIRE(qtl::cuda::pad_nvfp4_weight_for_cutlass(make_view(static_cast<std::uint8_t const*>(in.p), n, kb),
                                                         make_view(out.p, p.rows, p.col_bytes), a));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<std::uint8_t> got(want.size());
    CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, got.size(), cudaMemcpyDeviceToHost));
    REQUIRE(got == want);
  }
}

TEST_CASE("device FP4 MoE padding launchers reject what the host functions reject", "[cuda][moe]") {
  device_bytes buf(1 << 16);
  moe_layout const li(qtl::fp4_moe_padding::of(1, 96, 32, 48));
  auto const in = li.views(static_cast<std::uint8_t const*>(buf.p));
  moe_layout const lo(qtl::fp4_moe_padding::of(1, 128, 32, 64));
  auto const out = lo.views(buf.p + 20000);
  CHECK(qtl::cuda::align_fp4_moe_weights_for_fi(in, out, true, 64) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(qtl::cuda::align_fp4_moe_weights_for_fi(in, out, true, 0) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::align_fp4_moe_weights_for_fi(in, out, true, 128) == cudaErrorInvalidValue);  // out too small
  CHECK(qtl::cuda::align_fp4_moe_weights_for_fi(in, out, false, 64) == cudaErrorInvalidValue);  // w13 has 2I rows
  auto const overlap = li.views(buf.p);
  CHECK(qtl::cuda::align_fp4_moe_weights_for_fi(in, overlap, true, 16) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::pad_nvfp4_weight_for_cutlass(make_view(static_cast<std::uint8_t const*>(buf.p), 10, 3),
                                                make_view(buf.p + 1000, 32, 8), 32) == cudaErrorInvalidValue);
}

TEST_CASE("device CuteDSL row orders equal the host functions", "[cuda][moe]") {
  for (auto const [e, rows, cols, group] : {std::array<index_t, 4>{2, 256, 48, 64}, {3, 128, 5, 64}, {1, 40, 3, 4}}) {
    CAPTURE(e, rows, cols, group);
    std::vector<std::uint8_t> x(static_cast<std::size_t>(e * rows * cols));
    std::mt19937 rng(static_cast<std::uint32_t>(rows + cols));
    for (auto& b : x) {
      b = static_cast<std::uint8_t>(rng());
    }
    auto const hin = make_view(static_cast<std::uint8_t const*>(x.data()), e, rows, cols);
    std::vector<std::uint8_t> want(x.size()), want_w(x.size()), want_s(x.size());
    qtl::interleave_linear_and_gate(hin, make_view(want.data(), e, rows, cols), group);
    bool const oai = cols % 2 == 1;  // both forms of the reorder across the cases
    qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(oai, hin, hin, make_view(want_w.data(), e, rows, cols),
                                                   make_view(want_s.data(), e, rows, cols));
    device_bytes in(x.size());
    device_bytes out(3 * x.size());
    CUDA_REQUIRE(cudaMemcpy(in.p, x.data(), x.size(), cudaMemcpyHostToDevice));
    auto const din = make_view(static_cast<std::uint8_t const*>(in.p), e, rows, cols);
    CUDA_REQUIRE(qtl::cuda::interleave_linear_and_gate(din, make_view(out.p, e, rows, cols), group));
    CUDA_REQUIRE(qtl::cuda::reorder_w13_to_w31_for_flashinfer_cutedsl(
        oai, din, din, make_view(out.p + x.size(), e, rows, cols), make_view(out.p + 2 * x.size(), e, rows, cols)));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<std::uint8_t> got(3 * x.size());
    CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, got.size(), cudaMemcpyDeviceToHost));
    auto const part = [&](int k) {
      return std::vector<std::uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(k * x.size()),
                                       got.begin() + static_cast<std::ptrdiff_t>((k + 1) * x.size()));
    };
    CHECK(part(0) == want);
    CHECK(part(1) == want_w);
    CHECK(part(2) == want_s);
    CHECK(qtl::cuda::interleave_linear_and_gate(din, make_view(out.p, e, rows, cols), rows) == cudaErrorInvalidValue);
  }
}

TEST_CASE("device half swaps equal swap_w13_to_w31 and reorder_w1w3_to_w3w1 along any dimension", "[cuda][moe]") {
  for (auto const [outer, rows, inner] : {std::array<index_t, 3>{2, 256, 48}, {1, 6, 1}, {3, 40, 7}}) {
    CAPTURE(outer, rows, inner);
    std::vector<std::uint8_t> x(static_cast<std::size_t>(outer * rows * inner));
    std::mt19937 rng(static_cast<std::uint32_t>(rows + inner));
    for (auto& b : x) {
      b = static_cast<std::uint8_t>(rng());
    }
    auto const hin = make_view(static_cast<std::uint8_t const*>(x.data()), outer, rows, inner);
    std::vector<std::uint8_t> want(x.size());
    qtl::swap_w13_to_w31(hin, make_view(want.data(), outer, rows, inner));
    device_bytes in(x.size());
    device_bytes out(x.size());
    CUDA_REQUIRE(cudaMemcpy(in.p, x.data(), x.size(), cudaMemcpyHostToDevice));
    auto const din = make_view(static_cast<std::uint8_t const*>(in.p), outer, rows, inner);
    CUDA_REQUIRE(qtl::cuda::swap_halves(din, make_view(out.p, outer, rows, inner)));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<std::uint8_t> got(x.size());
    CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, got.size(), cudaMemcpyDeviceToHost));
    CHECK(got == want);
    // an odd split, a wrong output shape, the input itself as output
    CHECK(qtl::cuda::swap_halves(make_view(static_cast<std::uint8_t const*>(in.p), outer, rows - 1, inner),
                                 make_view(out.p, outer, rows - 1, inner)) == cudaErrorInvalidValue);
    CHECK(qtl::cuda::swap_halves(din, make_view(out.p, outer, rows / 2, inner)) == cudaErrorInvalidValue);
    CHECK(qtl::cuda::swap_halves(din, make_view(in.p, outer, rows, inner)) == cudaErrorInvalidValue);
  }
}

namespace {

// One MXINT4 layer in one buffer: gemm1 weights, gemm2 weights, gemm1 scales, gemm2 scales (the
// scales 2-byte words), from byte `base` on (an odd `base`: the kernels' byte paths).
struct mxint4_buffer {
  index_t e, h, i;
  std::size_t w1() const { return static_cast<std::size_t>(e * 2 * i * h / 2); }
  std::size_t w2() const { return static_cast<std::size_t>(e * h * i / 2); }
  std::size_t s1() const { return static_cast<std::size_t>(e * 2 * i * h / 32); }
  std::size_t s2() const { return static_cast<std::size_t>(e * h * i / 32); }
  std::size_t total() const { return w1() + w2() + 2 * (s1() + s2()); }
  template <class B>
  auto views(B* p) const {
    using S = std::conditional_t<std::is_const_v<B>, std::uint16_t const, std::uint16_t>;
    auto* const s = reinterpret_cast<S*>(p + w1() + w2());
    return qtl::trtllm_fp4_moe_tensors<B, S>{make_view(p, e, 2 * i, h / 2), make_view(s, e, 2 * i, h / 32),
                                             make_view(p + w1(), e, h, i / 2), make_view(s + s1(), e, h, i / 32)};
  }
};

}  // namespace

TEST_CASE("device MXINT4 MoE preparation and its inverse equal the host functions", "[cuda][moe]") {
  for (auto const [e, h, i, base] : {std::array<index_t, 4>{2, 512, 256, 0}, {1, 256, 768, 16}, {3, 256, 256, 2}}) {
    for (bool const uint4b8 : {true, false}) {
      CAPTURE(e, h, i, base, uint4b8);
      qtl::trtllm_mxint4_moe_shape const shape{
          .hidden_size = h, .intermediate_size = i, .num_experts = e, .uint4b8 = uint4b8};
      mxint4_buffer const l{e, h, i};
      std::size_t const n = l.total();
      auto const off = static_cast<std::size_t>(base);
      std::vector<std::uint8_t> host(n + off), want(n + off), back(n + off);
      std::mt19937 rng(static_cast<std::uint32_t>(h + i + e));
      for (auto& b : host) {
        b = static_cast<std::uint8_t>(rng());
      }
      qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, l.views(std::as_const(host).data() + off),
                                                        l.views(want.data() + off));
      device_bytes in(n + off);
      device_bytes out(n + off);
      device_bytes round(n + off);
      CUDA_REQUIRE(cudaMemcpy(in.p, host.data(), n + off, cudaMemcpyHostToDevice));
      CUDA_REQUIRE(qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(
          shape, l.views(static_cast<std::uint8_t const*>(in.p + off)), l.views(out.p + off)));
      CUDA_REQUIRE(qtl::cuda::unprepare_static_weights_for_trtllm_mxint4_moe(
          shape, l.views(static_cast<std::uint8_t const*>(out.p + off)), l.views(round.p + off)));
      CUDA_REQUIRE(cudaDeviceSynchronize());
      std::vector<std::uint8_t> got(n + off);
      CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, n + off, cudaMemcpyDeviceToHost));
      CUDA_REQUIRE(cudaMemcpy(back.data(), round.p, n + off, cudaMemcpyDeviceToHost));
      CHECK(std::vector<std::uint8_t>(got.begin() + base, got.end()) ==
            std::vector<std::uint8_t>(want.begin() + base, want.end()));
      CHECK(std::vector<std::uint8_t>(back.begin() + base, back.end()) ==
            std::vector<std::uint8_t>(host.begin() + base, host.end()));
    }
  }
}

TEST_CASE("device MXINT4 MoE launchers reject what the host function rejects", "[cuda][moe]") {
  mxint4_buffer const l{1, 256, 256};
  device_bytes buf(3 * l.total());
  auto const in = l.views(static_cast<std::uint8_t const*>(buf.p));
  auto const out = l.views(buf.p + l.total());
  qtl::trtllm_mxint4_moe_shape shape{.hidden_size = 128, .intermediate_size = 256, .num_experts = 1};
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(shape, in, out) == cudaErrorInvalidValue);
  shape.hidden_size = 256;
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(shape, in, l.views(buf.p)) == cudaErrorInvalidValue);
  auto strided = out;
  strided.gemm2_weights.stride[1] = 2 * 128;  // the prepared buffer must be flat
  strided.gemm2_weights.stride[0] = 256 * 2 * 128;
  strided.gemm2_weights.data = buf.p + 2 * l.total();
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(shape, in, strided) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::unprepare_static_weights_for_trtllm_mxint4_moe(
            shape, l.views(static_cast<std::uint8_t const*>(buf.p + l.total())), l.views(buf.p + l.total())) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe(shape, in, out) == cudaSuccess);
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

TEST_CASE("device FP8, BF16 and MXFP8 trtllm-gen weight layouts equal the host functions", "[cuda][moe]") {
  index_t const e = 2;
  index_t const r1 = 256, k1 = 128, r2 = 128, k2 = 256;  // w13 [E, 256, 128], w2 [E, 128, 256] bytes
  std::size_t const n1 = static_cast<std::size_t>(e * r1 * k1), n2 = static_cast<std::size_t>(e * r2 * k2);
  std::size_t const ns1 = n1 / 32, ns2 = n2 / 32;
  std::size_t const total = n1 + n2 + ns1 + ns2;
  std::vector<std::uint8_t> host(total);
  std::mt19937 rng(2552);
  for (auto& b : host) {
    b = static_cast<std::uint8_t>(rng());
  }
  device_bytes in(total);
  device_bytes out(total);
  CUDA_REQUIRE(cudaMemcpy(in.p, host.data(), total, cudaMemcpyHostToDevice));
  auto const v = [&](auto* p) {
    return qtl::trtllm_fp4_moe_tensors<std::remove_pointer_t<decltype(p)>, std::remove_pointer_t<decltype(p)>>{
        make_view(p, e, r1, k1), make_view(p + n1 + n2, e, r1, k1 / 32), make_view(p + n1, e, r2, k2),
        make_view(p + n1 + n2 + ns1, e, r2, k2 / 32)};
  };
  auto const hin = v(std::as_const(host).data());
  auto const din = v(static_cast<std::uint8_t const*>(in.p));
  auto const dout = v(out.p);
  std::vector<std::uint8_t> want(total), got(total);
  auto const hout = v(want.data());
  auto const compare = [&] {
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaMemcpy(got.data(), out.p, total, cudaMemcpyDeviceToHost));
    CHECK(std::vector<std::uint8_t>(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(n1 + n2)) ==
          std::vector<std::uint8_t>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(n1 + n2)));
  };
  qtl::shuffle_deepseek_fp8_moe_weights(hin.gemm1_weights, hin.gemm2_weights, hout.gemm1_weights, hout.gemm2_weights);
  CUDA_REQUIRE(qtl::cuda::shuffle_deepseek_fp8_moe_weights(din.gemm1_weights, din.gemm2_weights, dout.gemm1_weights,
                                                           dout.gemm2_weights));
  compare();
  for (bool const gated : {true, false}) {
    CAPTURE(gated);
    qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(hin.gemm1_weights, hin.gemm2_weights, gated,
                                                         hout.gemm1_weights, hout.gemm2_weights);
    CUDA_REQUIRE(qtl::cuda::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(din.gemm1_weights, din.gemm2_weights, gated,
                                                                            dout.gemm1_weights, dout.gemm2_weights));
    compare();
    qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout(hin.gemm1_weights, hin.gemm2_weights, gated,
                                                               hout.gemm1_weights, hout.gemm2_weights);
    CUDA_REQUIRE(qtl::cuda::convert_moe_weights_to_flashinfer_trtllm_block_layout(
        din.gemm1_weights, din.gemm2_weights, gated, dout.gemm1_weights, dout.gemm2_weights));
    compare();
    qtl::shuffle_mxfp8_moe_weights(hin, hout, gated);
    CUDA_REQUIRE(qtl::cuda::shuffle_mxfp8_moe_weights(din, dout, gated));
    compare();
    CHECK(got == want);        // the scales too
    device_bytes back(total);  // QTL's inverse on the device: the checkpoint's bytes again
    CUDA_REQUIRE(qtl::cuda::unshuffle_mxfp8_moe_weights(v(static_cast<std::uint8_t const*>(out.p)), v(back.p), gated));
    CUDA_REQUIRE(cudaDeviceSynchronize());
    std::vector<std::uint8_t> again(total);
    CUDA_REQUIRE(cudaMemcpy(again.data(), back.p, total, cudaMemcpyDeviceToHost));
    CHECK(again == host);
  }
  // what the host functions refuse: 40 rows (not whole shuffle blocks), an overlapping output
  auto const odd = make_view(static_cast<std::uint8_t const*>(in.p), e, index_t{40}, k1);
  CHECK(qtl::cuda::shuffle_deepseek_fp8_moe_weights(odd, din.gemm2_weights, make_view(out.p, e, index_t{40}, k1),
                                                    dout.gemm2_weights) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(din.gemm1_weights, din.gemm2_weights, true,
                                                                   v(in.p).gemm1_weights,
                                                                   dout.gemm2_weights) == cudaErrorInvalidValue);
  auto bad = dout;
  bad.gemm2_scales.extent[1] = 64;
  CHECK(qtl::cuda::shuffle_mxfp8_moe_weights(din, bad, true) == cudaErrorInvalidValue);
}
