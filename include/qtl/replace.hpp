#pragma once
/// \file
/// Replacing a named weight buffer by a new result, for engines that repack weights at load time
/// (the reference's `update_tensor_inplace` and `replace_parameter`, `docs/spec/semantics.md` §4.10).
///
/// `replace_parameter(params, name, value)`:
///   same dtype and same byte size → the bytes are copied into the existing storage (its address
///     does not change, so pointers handed to kernels stay valid) and the shape becomes value's;
///   otherwise → the storage is re-allocated to value's size and filled (the address changes).
/// torch's `replace_parameter` does the same on `untyped_storage().nbytes()`; its in-place branch
/// then calls `old.copy_(new)`, which needs broadcastable shapes — QTL adopts the new shape
/// instead (vLLM's original re-strided `old`), so a (4, 8) → (8, 4) repack stays in place.
/// `qtl/cuda/replace.cuh` has the device-memory counterpart.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// The dtype tag of element type T, with safetensors' names ("F32", "F16", "BF16", "I32", ...).
template <class T>
constexpr std::string_view dtype_tag() {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, double>) {
    return "F64";
  } else if constexpr (std::is_same_v<U, float>) {
    return "F32";
  } else if constexpr (std::is_same_v<U, half_t>) {
    return "F16";
  } else if constexpr (std::is_same_v<U, bfloat16_t>) {
    return "BF16";
  } else if constexpr (std::is_same_v<U, float8_e4m3fn_t>) {
    return "F8_E4M3";
  } else if constexpr (std::is_same_v<U, float8_e5m2_t>) {
    return "F8_E5M2";
  } else if constexpr (std::is_same_v<U, float8_e8m0fnu_t>) {
    return "F8_E8M0";
  } else if constexpr (std::is_same_v<U, std::int64_t>) {
    return "I64";
  } else if constexpr (std::is_same_v<U, std::int32_t>) {
    return "I32";
  } else if constexpr (std::is_same_v<U, std::int16_t>) {
    return "I16";
  } else if constexpr (std::is_same_v<U, std::int8_t>) {
    return "I8";
  } else if constexpr (std::is_same_v<U, std::uint64_t>) {
    return "U64";
  } else if constexpr (std::is_same_v<U, std::uint32_t>) {
    return "U32";
  } else if constexpr (std::is_same_v<U, std::uint16_t>) {
    return "U16";
  } else if constexpr (std::is_same_v<U, std::uint8_t>) {
    return "U8";
  } else if constexpr (std::is_same_v<U, bool>) {
    return "BOOL";
  } else {
    static_assert(sizeof(U) == 0, "qtl::dtype_tag: no tag for this element type");
  }
}

/// How `replace_parameter` updated a buffer.
enum class replace_result {
  in_place,     ///< same dtype and byte size: copied into the existing storage
  reallocated,  ///< different dtype or byte size: new storage
};

/// An owning, contiguous host buffer with its dtype tag and shape (an engine's parameter).
struct host_parameter {
  std::string dtype;
  std::vector<index_t> shape;
  std::vector<std::byte> storage;

  std::size_t nbytes() const { return storage.size(); }
  void* data() { return storage.data(); }
  void const* data() const { return storage.data(); }
  /// The buffer as a typed 2-D view. @throws value_error for another dtype, shape_error unless 2-D.
  template <class T>
  view2d<T> as_view2d() {
    if (dtype != dtype_tag<T>()) {
      throw value_error("qtl::host_parameter: dtype is " + dtype + ", not " + std::string(dtype_tag<T>()));
    }
    if (shape.size() != 2) {
      throw shape_error("qtl::host_parameter: " + std::to_string(shape.size()) + "-D, not 2-D");
    }
    return make_view(reinterpret_cast<T*>(storage.data()), shape[0], shape[1]);
  }
};

namespace detail::replace {

template <class T, int R>
std::vector<index_t> shape_of(view<T, R> v) {
  return std::vector<index_t>(v.extent, v.extent + R);
}
/// Copies a (possibly strided) view into contiguous bytes at `dst` (memmove semantics for the
/// contiguous case, so a value viewing the destination itself is fine).
template <class T, int R>
void copy_to(view<T, R> v, std::byte* dst) {
  using U = std::remove_const_t<T>;
  auto const n = static_cast<std::size_t>(v.size());
  if (v.is_contiguous()) {
    if (n > 0) {
      std::memmove(dst, v.data, n * sizeof(U));
    }
    return;
  }
  std::vector<U> tmp;  // a strided source may overlap the destination: gather first
  tmp.reserve(n);
  if constexpr (R == 1) {
    for (index_t i = 0; i < v.extent[0]; ++i) {
      tmp.push_back(v(i));
    }
  } else if constexpr (R == 2) {
    for (index_t i = 0; i < v.extent[0]; ++i) {
      for (index_t j = 0; j < v.extent[1]; ++j) {
        tmp.push_back(v(i, j));
      }
    }
  } else {
    for (index_t b = 0; b < v.extent[0]; ++b) {
      for (index_t i = 0; i < v.extent[1]; ++i) {
        for (index_t j = 0; j < v.extent[2]; ++j) {
          tmp.push_back(v(b, i, j));
        }
      }
    }
  }
  std::memcpy(dst, tmp.data(), n * sizeof(U));
}

}  // namespace detail::replace

/// `update_tensor_inplace(old, new)`: copies `value` into `old`'s storage, which keeps its address.
/// @throws value_error when the dtype differs; shape_error when the element counts differ.
template <class T, int R>
void update_tensor_inplace(host_parameter& old, view<T, R> value) {
  if (old.dtype != dtype_tag<T>()) {
    throw value_error("qtl::update_tensor_inplace: dtype " + std::string(dtype_tag<T>()) + " into a " + old.dtype +
                      " buffer");
  }
  std::size_t const bytes = static_cast<std::size_t>(value.size()) * sizeof(T);
  if (bytes != old.nbytes()) {
    throw shape_error("qtl::update_tensor_inplace: " + std::to_string(bytes) + " bytes into a buffer of " +
                      std::to_string(old.nbytes()));
  }
  detail::replace::copy_to(value, old.storage.data());
  old.shape = detail::replace::shape_of(value);
}

/// Named host parameters, as a module holds them.
class parameter_map {
 public:
  /// Adds (or overwrites) `name` with a copy of `value`.
  template <class T, int R>
  host_parameter& register_parameter(std::string const& name, view<T, R> value) {
    host_parameter p;
    p.dtype = std::string(dtype_tag<T>());
    p.shape = detail::replace::shape_of(value);
    p.storage.resize(static_cast<std::size_t>(value.size()) * sizeof(std::remove_const_t<T>));
    detail::replace::copy_to(value, p.storage.data());
    return params_[name] = std::move(p);
  }
  /// The parameter `name`. @throws value_error when there is none.
  host_parameter& at(std::string_view name) {
    auto const it = params_.find(name);
    if (it == params_.end()) {
      throw value_error("qtl::parameter_map: no parameter named '" + std::string(name) + "'");
    }
    return it->second;
  }
  host_parameter const* find(std::string_view name) const {
    auto const it = params_.find(name);
    return it == params_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return params_.size(); }

 private:
  std::map<std::string, host_parameter, std::less<>> params_;
};

/// `replace_parameter(mod, name, new)`: in place when dtype and byte size match, else the
/// buffer is re-allocated (see the file comment). @throws value_error for an unknown name.
template <class T, int R>
replace_result replace_parameter(parameter_map& params, std::string_view name, view<T, R> value) {
  host_parameter& old = params.at(name);
  std::size_t const bytes = static_cast<std::size_t>(value.size()) * sizeof(std::remove_const_t<T>);
  if (old.dtype == dtype_tag<T>() && old.nbytes() == bytes) {
    update_tensor_inplace(old, value);
    return replace_result::in_place;
  }
  std::vector<std::byte> fresh(bytes);
  detail::replace::copy_to(value, fresh.data());  // value may view the old buffer: copy first
  old.storage = std::move(fresh);
  old.dtype = std::string(dtype_tag<T>());
  old.shape = detail::replace::shape_of(value);
  return replace_result::reallocated;
}

}  // namespace qtl
