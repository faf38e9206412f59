// The golden quantize-weights cases again, with qtl/quantize.hpp compiled for x86-64-v3 (AVX2,
// FMA, F16C) and -ffp-contract=fast, as a consumer building with `-march=native` in a GNU mode
// would: bit-exactness must not depend on contraction (docs/spec/README.md). The build compiles every unit test
// with the same flags, so this file switches them for the header itself with GCC's target and
// optimize pragmas, and first proves that contraction really happens in that region.
#include <qtl/io/safetensors.hpp>
#include <qtl/numeric.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <golden.hpp>

#include "native_region.hpp"

namespace {

template <class T>
bool same_bytes(qtl::host_tensor<T, 2> const& mine, qtl::io::safetensors_file const& f, char const* name) {
  auto const& want = f.at(name);
  return want.bytes.size() == mine.storage().size() * sizeof(T) &&
         std::memcmp(want.bytes.data(), mine.data(), want.bytes.size()) == 0;
}

}  // namespace

TEST_CASE("quantize_weights is bit-exact with AVX2/FMA code and -ffp-contract=fast", "[quantize][native]") {
  if (!native::have_cpu()) {
    return qtl_test::skip("not GCC on an x86-64-v3 CPU: no contracted code to check");
  }
  // The region contracts: (1 + 2^-12)^2 - 1 is 2^-11 rounded, 2^-11 + 2^-24 fused.
  volatile float a = 1.0f + 0x1p-12f;
  volatile float c = 1.0f;
#if defined(__SANITIZE_ADDRESS__)
  // Sanitizer builds (-O1 with instrumentation) may not contract at all; the checks below still run.
  if (native::mul_sub<float>(a, a, c) != 0x1p-11f + 0x1p-24f) {
    WARN("this sanitizer build does not contract here: the comparisons run without a fused a*b - c");
  }
#else
  REQUIRE(native::mul_sub<float>(a, a, c) == 0x1p-11f + 0x1p-24f);
#endif

  int cases = 0;
  for (auto const& gc : qtl::test::golden_cases("quantize-weights")) {
    auto const gs_it = gc.params.find("group-size");
    if (gs_it == gc.params.end() || gs_it->is_null()) {
      continue;  // no arithmetic beyond rounding there
    }
    INFO(gc.name << " " << gc.params.dump());
    qtl::index_t const k = gc.shape[0];
    qtl::index_t const n = gc.shape[1];
    qtl::index_t const gs = gs_it->get<qtl::index_t>();
    qtl::index_t const g = (gs == -1 || gs >= k) ? k : gs;
    qtl::quantize_options opt;
    opt.zero_points = gc.params.value("zero-points", false);
    opt.ref_zero_points_after_scales = gc.params.value("ref-zero-points-after-scales", false);
    auto run = [&]<class T>() {
      auto const w = qtl::test::tensor_values<T>(gc.in, "w");
      qtl::quantized_weights<T> r{qtl::host_tensor<T, 2>({k, n}), qtl::host_tensor<std::int32_t, 2>({k, n}),
                                  qtl::host_tensor<T, 2>({k / g, n}),
                                  qtl::host_tensor<std::int32_t, 2>({opt.zero_points ? k / g : 0, n})};
      auto const type = gc.params.at("type").get<std::string>();
      auto const wv = qtl::make_view(w.data(), k, n);
      if (type == "uint4b8") {
        qtl::quantize_weights<qtl::uint4b8>(wv, gs, r.views(), opt);
      } else if (type == "uint8b128") {
        qtl::quantize_weights<qtl::uint8b128>(wv, gs, r.views(), opt);
      } else if (type == "int4") {
        qtl::quantize_weights<qtl::int4>(wv, gs, r.views(), opt);
      } else if (type == "int8") {
        qtl::quantize_weights<qtl::int8>(wv, gs, r.views(), opt);
      } else if (type == "uint4") {
        qtl::quantize_weights<qtl::uint4>(wv, gs, r.views(), opt);
      } else {
        REQUIRE(type == "uint8");
        qtl::quantize_weights<qtl::uint8>(wv, gs, r.views(), opt);
      }
      CHECK(same_bytes(r.w_ref, gc.expected, "w_ref"));
      CHECK(same_bytes(r.w_q, gc.expected, "w_q"));
      CHECK(same_bytes(r.w_s, gc.expected, "w_s"));
      if (opt.zero_points) {
        CHECK(same_bytes(r.w_zp, gc.expected, "w_zp"));
      }
    };
    switch (gc.in.at("w").type) {
      case qtl::io::dtype::F32: run.operator()<float>(); break;
      case qtl::io::dtype::F16: run.operator()<qtl::half_t>(); break;
      default: run.operator()<qtl::bfloat16_t>(); break;
    }
    ++cases;
  }
  CHECK(cases > 40);
}
