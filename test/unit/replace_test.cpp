// qtl/replace.hpp: a named buffer is replaced in place when dtype and byte size match (its address
// is kept) and re-allocated otherwise, as the reference's replace_parameter.
#include <qtl/quantize.hpp>
#include <qtl/replace.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

TEST_CASE("replace_parameter keeps the storage when dtype and byte size match", "[replace]") {
  qtl::parameter_map params;
  std::vector<std::int32_t> q(4 * 8, 7);
  params.register_parameter("layer.qweight", qtl::make_view(q.data(), 4, 8));
  void const* const before = params.at("layer.qweight").data();

  // A repack to (8, 4) int32: same bytes, new shape, same address.
  std::vector<std::int32_t> repacked(8 * 4);
  for (std::size_t i = 0; i < repacked.size(); ++i) {
    repacked[i] = static_cast<std::int32_t>(i);
  }
  CHECK(qtl::replace_parameter(params, "layer.qweight", qtl::make_view(repacked.data(), 8, 4)) ==
        qtl::replace_result::in_place);
  auto& p = params.at("layer.qweight");
  CHECK(p.data() == before);
  CHECK(p.shape == std::vector<qtl::index_t>{8, 4});
  auto const v = p.as_view2d<std::int32_t>();
  CHECK(v(7, 3) == 31);
  CHECK(v(0, 1) == 1);
}

TEST_CASE("replace_parameter re-allocates for another dtype or byte size", "[replace]") {
  qtl::parameter_map params;
  std::vector<float> w(64, 1.5f);
  params.register_parameter("layer.weight", qtl::make_view(w.data(), 8, 8));
  void const* const before = params.at("layer.weight").data();
  // Quantize the float weight and replace it by the codes: int32 of the same byte size is still a
  // dtype change, so the buffer is re-allocated.
  auto const r = qtl::quantize_weights<qtl::uint4b8, 4>(qtl::make_view(w.data(), 8, 8));
  CHECK(qtl::replace_parameter(params, "layer.weight", r.w_q.view()) == qtl::replace_result::reallocated);
  CHECK(params.at("layer.weight").dtype == "I32");
  CHECK(params.at("layer.weight").as_view2d<std::int32_t>()(3, 3) == r.w_q.view()(3, 3));
  // Scales of half the size: re-allocated, shape and bytes follow.
  qtl::host_tensor<qtl::half_t, 2> s({2, 8});
  CHECK(qtl::replace_parameter(params, "layer.weight", s.view()) == qtl::replace_result::reallocated);
  CHECK(params.at("layer.weight").nbytes() == 2 * 8 * 2);
  CHECK(params.at("layer.weight").shape == std::vector<qtl::index_t>{2, 8});
  (void)before;
  CHECK_THROWS_AS(qtl::replace_parameter(params, "nope", s.view()), qtl::value_error);
}

TEST_CASE("update_tensor_inplace copies strided and self-overlapping values, and checks sizes", "[replace]") {
  qtl::parameter_map params;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  auto& p = params.register_parameter("x", qtl::make_view(a.data(), 2, 3));
  // The transpose of the parameter itself, as a strided view of its own storage.
  float* own = static_cast<float*>(p.data());
  qtl::view2d<float const> t{own, {3, 2}, {1, 3}};
  qtl::update_tensor_inplace(p, t);
  auto const v = p.as_view2d<float>();
  CHECK(p.shape == std::vector<qtl::index_t>{3, 2});
  CHECK(v(0, 1) == 4.0f);
  CHECK(v(2, 0) == 3.0f);
  CHECK(v(2, 1) == 6.0f);
  std::vector<float> small(2);
  CHECK_THROWS_AS(qtl::update_tensor_inplace(p, qtl::make_view(small.data(), 2)), qtl::shape_error);
  std::vector<std::int32_t> other(6);
  CHECK_THROWS_AS(qtl::update_tensor_inplace(p, qtl::make_view(other.data(), 6)), qtl::value_error);
}
