// qtl/gptq_checkpoint.hpp: GPTQ checkpoint tensors from row-major W [N, K]. The symmetric rule
// against `quantize_weights` on Wᵀ then `pack_rows` and an F16 cast of its scales (the bytes the
// tool wrote before this op); the asymmetric rule against a per-element walk of GPTQ's quantizer;
// the x86 executor against the portable loop; row slices into output columns; the refusals.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/gptq_checkpoint.hpp>
#include <qtl/pack.hpp>
#include <qtl/quantize.hpp>
#include <qtl/transpose.hpp>
#include <qtl/x86/isa.hpp>

#include "test_data.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::gptq_rule;
using qtl::half_t;
using qtl::index_t;

struct gptq_out {
  std::vector<std::int32_t> qweight;
  std::vector<half_t> scales;
  std::vector<std::int32_t> zeros;
  bool operator==(gptq_out const& o) const {
    bool same = qweight == o.qweight && zeros == o.zeros && scales.size() == o.scales.size();
    for (std::size_t i = 0; same && i < scales.size(); ++i) {
      same = scales[i].bits == o.scales[i].bits;
    }
    return same;
  }
};

/// The op on w [n, k], rows [r0, r1) at a time into their columns of whole outputs.
template <class T>
gptq_out run(std::vector<T> const& w, index_t n, index_t k, qtl::gptq_checkpoint_options opt,
             std::vector<index_t> const& cuts = {}) {
  index_t const pf = 32 / opt.bits;
  index_t const groups = k / opt.group_size;
  gptq_out o{std::vector<std::int32_t>(static_cast<std::size_t>(k / pf * n)),
             std::vector<half_t>(static_cast<std::size_t>(groups * n)),
             std::vector<std::int32_t>(static_cast<std::size_t>(groups * n))};
  std::vector<index_t> at{0};
  at.insert(at.end(), cuts.begin(), cuts.end());
  at.push_back(n);
  for (std::size_t i = 0; i + 1 < at.size(); ++i) {
    index_t const r0 = at[i];
    index_t const c = at[i + 1] - r0;
    auto columns = [&]<class U>(U* whole, index_t rows) {
      return qtl::column_slice(qtl::make_view(whole, rows, n), r0, r0 + c);
    };
    opt.first_row = r0;
    qtl::gptq_checkpoint_quantize(
        qtl::make_view(w.data() + r0 * k, c, k),
        {columns(o.qweight.data(), k / pf), columns(o.scales.data(), groups), columns(o.zeros.data(), groups)}, opt);
  }
  return o;
}

}  // namespace

TEMPLATE_TEST_CASE("gptq_checkpoint_quantize, symmetric: quantize_weights on W transposed, packed, F16 scales",
                   "[gptq]", float, half_t, bfloat16_t) {
  using T = TestType;
  index_t const n = 40;
  for (int bits : {4, 8}) {
    for (index_t gs : {index_t{32}, index_t{128}, index_t{256}}) {
      index_t const k = 256;
      auto w = qtl_test::block_ranged_normal<T>(n, k, static_cast<std::uint32_t>(bits * 1000 + gs), 8);
      for (index_t c = 0; c < 32; ++c) {
        w[static_cast<std::size_t>(3 * k + c)] = qtl::from_float<T>(0.0f);  // an all-zero group: scale 0
      }
      qtl::gptq_checkpoint_options opt;
      opt.bits = bits;
      opt.group_size = gs;
      gptq_out const got = run(w, n, k, opt, {7, 24});
      qtl::quantize_options qo;
      qtl::host_tensor<T, 2> wt({k, n});
      qtl::transpose(qtl::make_view(static_cast<T const*>(w.data()), n, k), wt.view());
      qtl::quantized_weights<T> ref{qtl::host_tensor<T, 2>({k, n}), qtl::host_tensor<std::int32_t, 2>({k, n}),
                                    qtl::host_tensor<T, 2>({k / gs, n}), qtl::host_tensor<std::int32_t, 2>({0, n})};
      if (bits == 4) {
        qtl::quantize_weights<qtl::uint4b8>(qtl::view2d<T const>(wt.view()), gs, ref.views(), qo);
      } else {
        qtl::quantize_weights<qtl::uint8b128>(qtl::view2d<T const>(wt.view()), gs, ref.views(), qo);
      }
      qtl::host_tensor<std::int32_t, 2> packed({k / (32 / bits), n});
      if (bits == 4) {
        qtl::pack_rows<4>(qtl::view2d<std::int32_t const>(ref.w_q.view()), packed.view());
      } else {
        qtl::pack_rows<8>(qtl::view2d<std::int32_t const>(ref.w_q.view()), packed.view());
      }
      CAPTURE(bits, gs);
      CHECK(got.qweight == std::vector<std::int32_t>(packed.view().data, packed.view().data + packed.view().size()));
      for (index_t i = 0; i < ref.w_s.view().size(); ++i) {
        REQUIRE(got.scales[static_cast<std::size_t>(i)].bits ==
                qtl::from_float<half_t>(qtl::to_float(ref.w_s.view().data[i])).bits);
      }
      CHECK(got.zeros == std::vector<std::int32_t>(got.zeros.size(), 1 << (bits - 1)));
      // the all-zero group of row 3: scale 0 and every code the bias (int(NaN) = 0; the CPU
      // reference's qmin + bias = 0 differs on purpose, docs/spec/semantics.md §4)
      index_t const pf = 32 / bits;
      CHECK((got.scales[3].bits == 0) == (gs == 32));
      for (index_t c = 0; c < (gs == 32 ? 32 : 0); ++c) {
        auto const word = static_cast<std::uint32_t>(got.qweight[static_cast<std::size_t>(c / pf * n + 3)]);
        REQUIRE((word >> (bits * (c % pf)) & ((1u << bits) - 1u)) == (1u << (bits - 1)));
      }
    }
  }
}

TEMPLATE_TEST_CASE("gptq_checkpoint_quantize, asymmetric: GPTQ's quantizer element by element", "[gptq]", float, half_t,
                   bfloat16_t) {
  using T = TestType;
  index_t const n = 24;
  index_t const k = 384;
  auto w = qtl_test::block_ranged_normal<T>(n, k, 5, 8);
  for (index_t c = 0; c < k; ++c) {  // row 2 of one sign: the range widened to hold 0
    w[static_cast<std::size_t>(2 * k + c)] = qtl::from_float<T>(0.4f + 0.001f * static_cast<float>(c % 97));
  }
  for (int bits : {4, 8}) {
    index_t const gs = 128;
    qtl::gptq_checkpoint_options opt;
    opt.bits = bits;
    opt.group_size = gs;
    opt.rule = gptq_rule::asymmetric;
    gptq_out const got = run(w, n, k, opt, {5});
    index_t const pf = 32 / bits;
    for (index_t r = 0; r < n; ++r) {
      for (index_t g = 0; g < k / gs; ++g) {
        float mx = -INFINITY;
        float mn = INFINITY;
        for (index_t c = g * gs; c < (g + 1) * gs; ++c) {
          mx = std::max(mx, qtl::to_float(w[static_cast<std::size_t>(r * k + c)]));
          mn = std::min(mn, qtl::to_float(w[static_cast<std::size_t>(r * k + c)]));
        }
        auto const p = qtl::gptq_asym_group_params(mx, mn, bits);
        half_t const h = qtl::from_float<half_t>(p.s);
        REQUIRE(got.scales[static_cast<std::size_t>(g * n + r)].bits == h.bits);
        REQUIRE(got.zeros[static_cast<std::size_t>(g * n + r)] == static_cast<std::int32_t>(p.zp));
        for (index_t c = g * gs; c < (g + 1) * gs; ++c) {
          std::int32_t const want =
              qtl::gptq_asym_code(qtl::to_float(w[static_cast<std::size_t>(r * k + c)]), qtl::to_float(h), p.zp, bits);
          std::int32_t const word = got.qweight[static_cast<std::size_t>(c / pf * n + r)];
          CAPTURE(bits, r, c);
          REQUIRE(((static_cast<std::uint32_t>(word) >> (bits * (c % pf))) & ((1u << bits) - 1u)) ==
                  static_cast<std::uint32_t>(want));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("gptq_checkpoint_quantize: the x86 executor equals the portable loop", "[gptq]", float, half_t,
                   bfloat16_t) {
  using T = TestType;
  index_t const n = 16;
  index_t const k = 512;
  auto const w = qtl_test::block_ranged_normal<T>(n, k, 17, 8);
  for (gptq_rule rule : {gptq_rule::symmetric, gptq_rule::asymmetric}) {
    for (int bits : {4, 8}) {
      qtl::gptq_checkpoint_options opt;
      opt.bits = bits;
      opt.group_size = 64;
      opt.rule = rule;
      gptq_out const fast = run(w, n, k, opt);
      qtl::x86::scoped_level_cap const cap(qtl::x86::level::portable);
      CHECK(run(w, n, k, opt) == fast);
    }
  }
}

TEST_CASE("gptq_checkpoint_quantize refuses NaN/Inf, F16 scales out of range and bad arguments", "[gptq]") {
  index_t const n = 4;
  index_t const k = 64;
  std::vector<bfloat16_t> w(static_cast<std::size_t>(n * k), qtl::from_float<bfloat16_t>(0.5f));
  qtl::gptq_checkpoint_options opt;
  opt.group_size = 32;
  opt.first_row = 100;
  auto const fails_with = [&](std::vector<bfloat16_t> const& x, qtl::gptq_checkpoint_options const& o,
                              std::string const& text) { CHECK_THROWS_WITH(run(x, n, k, o), Catch::Contains(text)); };
  auto nan = w;
  nan[static_cast<std::size_t>(2 * k + 40)] = qtl::from_float<bfloat16_t>(std::nanf(""));
  fails_with(nan, opt, "element [2, 40] is NaN");
  auto allowed = opt;
  allowed.allow_nonfinite = true;
  CHECK_NOTHROW(run(nan, n, k, allowed));
  for (gptq_rule rule : {gptq_rule::symmetric, gptq_rule::asymmetric}) {
    opt.rule = rule;
    auto big = w;
    big[static_cast<std::size_t>(k + 3)] = qtl::from_float<bfloat16_t>(1e6f);  // scale 1e6 / 7 or / 15
    fails_with(big, opt, "the GPTQ scale of row 1, columns 0..31 is");
    fails_with(big, opt, "it overflows to Inf");
    std::vector<bfloat16_t> tiny(w.size(), qtl::from_float<bfloat16_t>(1e-30f));
    fails_with(tiny, opt, "it rounds to 0 and the group dequantizes to 0");
  }
  opt.rule = gptq_rule::symmetric;
  std::vector<bfloat16_t> zeros(w.size(), qtl::from_float<bfloat16_t>(0.0f));
  CHECK_NOTHROW(run(zeros, n, k, opt));  // a scale of 0 in an all-zero group is stored
  auto bad = opt;
  bad.bits = 3;
  CHECK_THROWS_AS(run(w, n, k, bad), qtl::value_error);
  bad = opt;
  bad.group_size = 48;  // does not divide K
  CHECK_THROWS_AS(run(w, n, k, bad), qtl::shape_error);
  bad.group_size = 4;  // not a multiple of 8 codes a word
  CHECK_THROWS_AS(run(w, n, k, bad), qtl::shape_error);
}
