// Compile-time checks of the element code of qtl/fp4.hpp (NVFP4, MXFP4, MXFP8): the worked examples
// of docs/spec/blockscale.md §8.4, evaluated by the compiler.
#include <qtl/fp4.hpp>

namespace {

// docs/spec/blockscale.md §8.4: E2M1 ties go to the even code.
static_assert(qtl::e2m1_encode(0.25f) == 0x0 && qtl::e2m1_encode(0.75f) == 0x2 && qtl::e2m1_encode(1.25f) == 0x2);
static_assert(qtl::e2m1_encode(1.75f) == 0x4 && qtl::e2m1_encode(2.5f) == 0x4 && qtl::e2m1_encode(3.5f) == 0x6);
static_assert(qtl::e2m1_encode(5.0f) == 0x6 && qtl::e2m1_encode(5.0001f) == 0x7 && qtl::e2m1_encode(1e9f) == 0x7);
static_assert(qtl::e2m1_encode(-0.01f) == 0x8 && qtl::e2m1_encode(-6.0f) == 0xF);

// docs/spec/blockscale.md §8.4 NVFP4: block max 4.5, gs = fl(2688 / 4.5) -> scale 448 (0x7E), os = 4/3.
constexpr float gs84 = qtl::nvfp4_global_scale_from_amax(4.5f);
static_assert(gs84 == 597.3333129882812f);
static_assert(qtl::block_scale_code<qtl::nvfp4>(4.5f, gs84) == 0x7E);
static_assert(qtl::block_output_scale<qtl::nvfp4>(0x7E, 4.5f, gs84) == 1.3333333730697632f);
static_assert(qtl::block_element_code<qtl::nvfp4>(-4.2f, 1.3333333730697632f) == 0xF);
static_assert(qtl::block_element_code<qtl::nvfp4>(3.7f, 1.3333333730697632f) == 0x6);
// MXFP4: block max 1.3 -> 1.3/6 = 0.21667 -> 2^-2, E8M0 byte 125; os = 4.
static_assert(qtl::block_scale_code<qtl::mxfp4>(1.3f, 1.0f) == 125);
static_assert(qtl::block_output_scale<qtl::mxfp4>(125, 1.3f, 1.0f) == 4.0f);
static_assert(qtl::block_element_code<qtl::mxfp4>(-0.01f, 4.0f) == 0x8);
// MXFP8: block max 448 -> scale 2^0 (127); 449 -> 2^1 (128); all-zero block -> code 0, os 0.
static_assert(qtl::block_scale_code<qtl::mxfp8>(448.0f, 1.0f) == 127);
static_assert(qtl::block_scale_code<qtl::mxfp8>(449.0f, 1.0f) == 128);
static_assert(qtl::block_scale_code<qtl::mxfp8>(0.0f, 1.0f) == 0 && qtl::block_output_scale<qtl::mxfp8>(0, 0.0f, 1.0f) == 0.0f);
static_assert(qtl::e8m0_reciprocal(127) == 1.0f && qtl::e8m0_reciprocal(0) == 0x1p127f &&
              qtl::e8m0_reciprocal(254) == 0x1p-127f);

// the branch-free decoder of NVFP4 block scales agrees with numeric.hpp on every scale code
constexpr bool e4m3_decoders_agree() {
  for (int c = 0; c < 0x7F; ++c) {
    if (qtl::detail::e4m3_decode_nonnegative(static_cast<std::uint8_t>(c)) != qtl::e4m3fn_to_float(static_cast<std::uint8_t>(c))) {
      return false;
    }
  }
  return true;
}
static_assert(e4m3_decoders_agree());
}  // namespace
