// qtl::transpose against the definition out(c, r) = in(r, c): 2-byte elements (the SSE2 8x8
// blocks and the scalar edges) and 4-byte ones, every shape up to 40x40 with padded row strides,
// plus the shape and stride errors.
#include <qtl/numeric.hpp>
#include <qtl/transpose.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using qtl::index_t;

template <class T, class Make>
void check_all_shapes(Make make) {
  for (index_t rows = 1; rows <= 40; ++rows) {
    for (index_t cols = 1; cols <= 40; ++cols) {
      index_t const in_stride = cols + rows % 3;   // padded rows now and then
      index_t const out_stride = rows + cols % 2;
      std::vector<T> in(static_cast<std::size_t>(rows * in_stride));
      for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = make(static_cast<std::uint32_t>(i));
      }
      T const fill = make(0xFFFFu);
      std::vector<T> out(static_cast<std::size_t>(cols * out_stride), fill);
      qtl::view2d<T const> iv = qtl::make_view(static_cast<T const*>(in.data()), rows, cols);
      iv.stride[0] = in_stride;
      qtl::view2d<T> ov = qtl::make_view(out.data(), cols, rows);
      ov.stride[0] = out_stride;
      qtl::transpose(iv, ov);
      for (index_t c = 0; c < cols; ++c) {
        for (index_t r = 0; r < out_stride; ++r) {
          T const got = out[static_cast<std::size_t>(c * out_stride + r)];
          T const want = r < rows ? in[static_cast<std::size_t>(r * in_stride + c)] : fill;  // padding untouched
          INFO(rows << "x" << cols << ": out(" << c << ", " << r << ")");
          REQUIRE(std::memcmp(&got, &want, sizeof(T)) == 0);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("transpose moves every element to its mirrored place", "[transpose]") {
  SECTION("fp16 (8x8 register blocks and scalar edges)") {
    check_all_shapes<qtl::half_t>([](std::uint32_t i) { return qtl::half_t{static_cast<std::uint16_t>(i * 40503u)}; });
  }
  SECTION("int16") {
    check_all_shapes<std::int16_t>([](std::uint32_t i) { return static_cast<std::int16_t>(i * 2654435761u); });
  }
  SECTION("float (scalar tiles)") {
    check_all_shapes<float>([](std::uint32_t i) { return static_cast<float>(i) * 0.5f - 3.0f; });
  }
}

TEST_CASE("transpose rejects mismatched shapes and strided last dimensions", "[transpose]") {
  std::vector<float> a(12), b(12);
  auto const in = qtl::make_view(static_cast<float const*>(a.data()), 3, 4);
  CHECK_THROWS_AS(qtl::transpose(in, qtl::make_view(b.data(), 3, 4)), qtl::shape_error);
  CHECK_THROWS_WITH(qtl::transpose(in, qtl::make_view(b.data(), 3, 4)),
                    Catch::Contains("out has shape [3, 4], expected [4, 3]"));
  auto strided = qtl::make_view(b.data(), 4, 3);
  strided.stride[1] = 2;
  CHECK_THROWS_AS(qtl::transpose(in, strided), qtl::shape_error);
  CHECK_NOTHROW(qtl::transpose(in, qtl::make_view(b.data(), 4, 3)));
}
