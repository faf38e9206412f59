#pragma once
/// \file
/// sglang's `normalize_e4m3fn_to_e4m3fnuz(weight, weight_scale, input_scale)` (`fp8_utils.py`;
/// `docs/spec/engines.md` §4) on the host: e4m3fn weights re-read as ROCm's float8_e4m3fnuz, the
/// one byte whose meaning differs (0x80: e4m3fn's -0, fnuz's NaN) set to 0, and the scales doubled
/// (the same byte is worth half as much in fnuz: `qtl/element/fnuz.hpp` has the table).
///
///   normalize_e4m3fn_to_e4m3fnuz(weight, out)   out[i] = weight[i], 0x80 -> 0x00
///   double_scales(scale, out)                   out[i] = scale[i] * 2 in the scale's type
///
/// Both are elementwise over 1-D views of any stride; `out` may be `weight` / `scale` itself (the
/// engine rewrites the weight in place and returns new scales). `qtl/cuda/fnuz.cuh` runs the same
/// element functions on the device.

#include <string>

#include <qtl/element/fnuz.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

namespace detail {
template <class In, class Out>
void check_elementwise(char const* fn, view1d<In> in, view1d<Out> out) {
  if (in.extent[0] < 0 || out.extent[0] != in.extent[0]) {
    throw shape_error(std::string("qtl::") + fn + ": out has " + std::to_string(out.extent[0]) +
                      " elements, the input " + std::to_string(in.extent[0]) + "; they must be equal and not negative");
  }
}
}  // namespace detail

/// The weight bytes of sglang's `normalize_e4m3fn_to_e4m3fnuz`: `out[i]` is `weight[i]`'s byte,
/// but 0x80 becomes 0x00. `out` may be the memory of `weight` (in place).
/// @throws shape_error if the extents differ.
inline void normalize_e4m3fn_to_e4m3fnuz(view1d<float8_e4m3fn_t const> weight, view1d<float8_e4m3fnuz_t> out) {
  detail::check_elementwise("normalize_e4m3fn_to_e4m3fnuz", weight, out);
  for (index_t i = 0; i < out.extent[0]; ++i) {  // (= weight's: out's bound keeps g++'s -Wstringop-overflow quiet)
    out(i) = float8_e4m3fnuz_t{e4m3fn_to_e4m3fnuz_code(weight(i).bits)};
  }
}

/// `weight` normalized into a new contiguous tensor.
inline host_tensor<float8_e4m3fnuz_t, 1> normalize_e4m3fn_to_e4m3fnuz(view1d<float8_e4m3fn_t const> weight) {
  host_tensor<float8_e4m3fnuz_t, 1> out({weight.extent[0] < 0 ? 0 : weight.extent[0]});
  normalize_e4m3fn_to_e4m3fnuz(weight, out.view());
  return out;
}

/// The scales of sglang's `normalize_e4m3fn_to_e4m3fnuz` (`weight_scale * 2.0`,
/// `input_scale * 2.0`): `out[i] = double_scale(scale[i])`. `out` may be the memory of `scale`.
/// @throws shape_error if the extents differ.
template <fnuz_scale T>
void double_scales(view1d<T const> scale, view1d<T> out) {
  detail::check_elementwise("double_scales", scale, out);
  for (index_t i = 0; i < out.extent[0]; ++i) {
    out(i) = double_scale(scale(i));
  }
}

/// `scale` doubled into a new contiguous tensor.
template <fnuz_scale T>
host_tensor<T, 1> double_scales(view1d<T const> scale) {
  host_tensor<T, 1> out({scale.extent[0] < 0 ? 0 : scale.extent[0]});
  double_scales(scale, out.view());
  return out;
}

}  // namespace qtl
