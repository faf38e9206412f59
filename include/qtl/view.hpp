#pragma once
/// \file
/// `qtl::view<T, Rank>`: a small non-owning row-major view (pointer, extents, strides in elements)
/// usable in host and device code; `qtl::host_tensor<T, Rank>`: an owning host buffer with a view,
/// its elements on 64-byte cache lines (`qtl::aligned_vector`).
///
/// Shapes follow torch: `view2d<T>` of extents {rows, cols} has element (i, j) at
/// `data[i * stride[0] + j * stride[1]]`; contiguous views have strides {cols, 1}.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/macros.hpp>

namespace qtl {

using index_t = std::int64_t;

/// Non-owning strided view of `Rank` dimensions (1 to 3).
template <class T, int Rank>
struct view {
  static_assert(Rank >= 1 && Rank <= 3, "qtl::view: Rank must be 1, 2 or 3");
  using element_type = T;

  T* data = nullptr;
  index_t extent[Rank] = {};
  index_t stride[Rank] = {};

  QTL_HOST_DEVICE constexpr index_t size() const {
    index_t n = 1;
    for (int d = 0; d < Rank; ++d) {
      n *= extent[d];
    }
    return n;
  }
  QTL_HOST_DEVICE constexpr index_t rows() const requires(Rank >= 2) { return extent[Rank - 2]; }
  QTL_HOST_DEVICE constexpr index_t cols() const requires(Rank >= 2) { return extent[Rank - 1]; }
  QTL_HOST_DEVICE constexpr bool is_contiguous() const {
    index_t s = 1;
    for (int d = Rank - 1; d >= 0; --d) {
      if (extent[d] != 1 && stride[d] != s) {
        return false;
      }
      s *= extent[d];
    }
    return true;
  }

  QTL_HOST_DEVICE constexpr T& operator()(index_t i) const requires(Rank == 1) { return data[i * stride[0]]; }
  QTL_HOST_DEVICE constexpr T& operator()(index_t i, index_t j) const requires(Rank == 2) {
    return data[i * stride[0] + j * stride[1]];
  }
  QTL_HOST_DEVICE constexpr T& operator()(index_t b, index_t i, index_t j) const requires(Rank == 3) {
    return data[b * stride[0] + i * stride[1] + j * stride[2]];
  }

  /// The same memory as a view of `T const` (a template, so that `view<T const>` declares no
  /// conversion to itself, which nvcc warns about even when it is constrained away).
  template <class U>
  requires(std::is_same_v<U, T const> && !std::is_const_v<T>) QTL_HOST_DEVICE constexpr operator view<U, Rank>() const {
    view<U, Rank> v;
    v.data = data;
    for (int d = 0; d < Rank; ++d) {
      v.extent[d] = extent[d];
      v.stride[d] = stride[d];
    }
    return v;
  }
};

template <class T>
using view1d = view<T, 1>;
template <class T>
using view2d = view<T, 2>;
template <class T>
using view3d = view<T, 3>;

/// Whether `a` and `b` may touch the same byte: the address ranges from the lowest to the highest
/// byte of any of their elements intersect (an empty view touches nothing). Conservative: two
/// interleaved column views of one matrix share no element but count as overlapping, which is
/// the answer an op that refuses aliased arguments needs. Negative strides are allowed.
template <class A, int RA, class B, int RB>
bool views_overlap(view<A, RA> const& a, view<B, RB> const& b) {
  struct byte_range {
    std::uintptr_t begin, end;  // [begin, end)
  };
  auto const range_of = [](auto const& v, int rank) {
    index_t lo = 0, hi = 0;  // element offsets of the lowest and the highest element
    for (int d = 0; d < rank; ++d) {
      index_t const reach = (v.extent[d] - 1) * v.stride[d];
      (reach < 0 ? lo : hi) += reach;
    }
    using element = std::remove_cv_t<std::remove_reference_t<decltype(*v.data)>>;
    auto const base = reinterpret_cast<std::uintptr_t>(v.data);
    auto const bytes = static_cast<std::intptr_t>(sizeof(element));
    return byte_range{base + static_cast<std::uintptr_t>(lo * bytes),
                      base + static_cast<std::uintptr_t>(hi * bytes + bytes)};
  };
  if (a.size() == 0 || b.size() == 0) {
    return false;
  }
  byte_range const ra = range_of(a, RA), rb = range_of(b, RB);
  return ra.begin < rb.end && rb.begin < ra.end;
}

/// A contiguous 1-D view of `n` elements.
template <class T>
QTL_HOST_DEVICE constexpr view1d<T> make_view(T* data, index_t n) {
  view1d<T> v;
  v.data = data;
  v.extent[0] = n;
  v.stride[0] = 1;
  return v;
}
/// A contiguous row-major [rows, cols] view.
template <class T>
QTL_HOST_DEVICE constexpr view2d<T> make_view(T* data, index_t rows, index_t cols) {
  view2d<T> v;
  v.data = data;
  v.extent[0] = rows;
  v.extent[1] = cols;
  v.stride[0] = cols;
  v.stride[1] = 1;
  return v;
}
/// A contiguous row-major [batch, rows, cols] view.
template <class T>
QTL_HOST_DEVICE constexpr view3d<T> make_view(T* data, index_t batch, index_t rows, index_t cols) {
  view3d<T> v;
  v.data = data;
  v.extent[0] = batch;
  v.extent[1] = rows;
  v.extent[2] = cols;
  v.stride[0] = rows * cols;
  v.stride[1] = cols;
  v.stride[2] = 1;
  return v;
}
/// Matrix `i` of the batch `v` (an expert of a stack, a slice around a packed dimension): the
/// [rows, cols] view at v(i, 0, 0) with v's row and column strides.
template <class T>
QTL_HOST_DEVICE constexpr view2d<T> batch_item(view3d<T> v, index_t i) {
  view2d<T> r;
  r.data = v.data + i * v.stride[0];
  r.extent[0] = v.extent[1];
  r.extent[1] = v.extent[2];
  r.stride[0] = v.stride[1];
  r.stride[1] = v.stride[2];
  return r;
}

/// Columns [lo, hi) of `v` (0 <= lo <= hi <= its extent 1): the [rows, hi - lo] view at v(0, lo)
/// with v's strides, as where a slice of W's rows is quantized into its columns of a transposed
/// output.
template <class T>
QTL_HOST_DEVICE constexpr view2d<T> column_slice(view2d<T> v, index_t lo, index_t hi) {
  if (hi > lo) {
    v.data += lo * v.stride[1];
  }
  v.extent[1] = hi - lo;
  return v;
}

/// "[e0, e1, ...]": the extents of a view, for error messages (torch prints shapes alike).
inline std::string shape_string(index_t const* extents, int rank) {
  // Appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on `"[" + std::string`.
  std::string s = "[";
  for (int d = 0; d < rank; ++d) {
    if (d > 0) {
      s += ", ";
    }
    s += std::to_string(extents[d]);
  }
  s += "]";
  return s;
}
/// "[rows, cols]".
inline std::string shape_string(index_t rows, index_t cols) {
  index_t const e[2] = {rows, cols};
  return shape_string(e, 2);
}

/// Alignment of `aligned_vector` buffers: a cache line. PyTorch's CPU allocator aligns to 64 bytes
/// as well; the host executors stream whole lines from there (a `std::vector` buffer of more than
/// 128 KiB starts 16 bytes past a page with glibc, which costs them about a quarter).
inline constexpr std::size_t buffer_alignment = 64;

/// `std::allocator` on `buffer_alignment` boundaries.
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() = default;
  template <class U>
  constexpr aligned_allocator(aligned_allocator<U> const&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{buffer_alignment}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete (p, std::align_val_t{buffer_alignment}); }
  friend constexpr bool operator==(aligned_allocator, aligned_allocator) noexcept { return true; }
};

/// A `std::vector` whose buffer starts on a cache line: `host_tensor`'s storage.
template <class T>
using aligned_vector = std::vector<T, aligned_allocator<T>>;

/// An `aligned_vector` equals a `std::vector` (of any other allocator) holding the same elements.
template <class T, class A>
requires(!std::is_same_v<A, aligned_allocator<T>>) bool operator==(aligned_vector<T> const& a,
                                                                   std::vector<T, A> const& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

/// An owning, contiguous, row-major host tensor; `view()` lends it to the operations. Its elements
/// start on a 64-byte boundary (`buffer_alignment`).
template <class T, int Rank>
class host_tensor {
 public:
  host_tensor() = default;
  /// Allocates `extents` (all ≥ 0) value-initialised elements.
  explicit host_tensor(index_t const (&extents)[Rank]) {
    index_t n = 1;
    for (int d = 0; d < Rank; ++d) {
      if (extents[d] < 0) {
        throw shape_error("qtl::host_tensor: extent " + std::to_string(d) + " is negative (" +
                          std::to_string(extents[d]) + ")");
      }
      extent_[d] = extents[d];
      n *= extents[d];
    }
    data_.assign(static_cast<std::size_t>(n), T{});
  }

  T* data() { return data_.data(); }
  T const* data() const { return data_.data(); }
  index_t size() const { return static_cast<index_t>(data_.size()); }
  index_t extent(int d) const { return extent_[d]; }
  aligned_vector<T>& storage() { return data_; }
  aligned_vector<T> const& storage() const { return data_; }

  qtl::view<T, Rank> view() { return make(data_.data()); }
  qtl::view<T const, Rank> view() const { return make(data_.data()); }

 private:
  template <class U>
  qtl::view<U, Rank> make(U* p) const {
    qtl::view<U, Rank> v;
    v.data = p;
    index_t s = 1;
    for (int d = Rank - 1; d >= 0; --d) {
      v.extent[d] = extent_[d];
      v.stride[d] = s;
      s *= extent_[d];
    }
    return v;
  }

  aligned_vector<T> data_;
  index_t extent_[Rank] = {};
};

}  // namespace qtl
