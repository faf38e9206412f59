#pragma once
/// \file
/// Arrays in and out of the `qtl._qtl` bindings, and the `qtl.Error` hierarchy they raise.
///
/// In: any CPU array nanobind's `ndarray` takes (numpy through the buffer protocol, torch and every
/// other DLPack producer, zero-copy). Element types that DLPack cannot carry are re-viewed first,
/// without a copy, as their storage integer: torch `float8_e4m3fn` and numpy/ml_dtypes
/// `float8_e4m3fn` as uint8, ml_dtypes `bfloat16` as uint16. Strides are kept (the library's
/// views take any strides, in elements).
///
/// Out: a new buffer on a 64-byte line (as torch's CPU allocator), owned by a capsule, returned as
/// the input's kind: a torch tensor when the input was one (DLPack, no copy), else a numpy array
/// (numpy's C API, the capsule its base). Buffers of 4 MiB and more come from a bounded cache of
/// freed ones (`set_buffer_cache`) before new huge pages.
/// bf16 and fp8 outputs become torch.bfloat16 / torch.float8_e4m3fn for torch, and ml_dtypes'
/// types for numpy where ml_dtypes is installed (else their storage: uint16 / uint8 codes).
///
/// Device arrays (DLPack on a CUDA device, in a build with a device table: device.hpp) must be
/// C-contiguous and on the current device, and every array of one call on that device; the op runs
/// its kernel on the caller's stream (`array_in::stream`) and its outputs are allocated there: by
/// torch.empty for torch tensors (torch's caching allocator), else by cudaMalloc, returned as a
/// DLPack array (nanobind's ndarray; fp8 outputs as their uint8 codes).

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/parallel.hpp>
#include <qtl/view.hpp>

#include "device.hpp"

namespace qtl::py {

namespace nb = nanobind;

/// Element types the bindings read and write.
enum class elem : std::uint8_t { f32, f16, bf16, fp8_e4m3, i32, i64, u8, other };

/// "float32", "float16", "bfloat16", "float8_e4m3fn", "int32", "int64", "uint8".
char const* elem_name(elem e);

/// Thrown by the bindings for an argument of the wrong dtype (Python: qtl.DTypeError, a TypeError).
class dtype_error : public qtl::error {
 public:
  using qtl::error::error;
};

/// Which kind of array the caller passed (and gets back).
enum class kind : std::uint8_t { numpy, torch };

/// An input array: the nanobind view of it, its element type, and the object that owns it.
struct array_in {
  nb::ndarray<nb::ro> nd;  ///< read-only accepted; `check_writable` for in-place ops
  nb::object src;          ///< the object `nd` views (after a storage re-view)
  elem type = elem::other;
  kind from = kind::numpy;
  char const* name = "";              ///< the parameter's name, for messages
  int device = -1;                    ///< the CUDA device of a device array, -1 on the host
  device::stream_t stream = nullptr;  ///< a device array's stream: the op's kernels run on it

  bool on_device() const { return device >= 0; }

  index_t ndim() const { return static_cast<index_t>(nd.ndim()); }
  index_t dim(index_t d) const { return static_cast<index_t>(nd.shape(static_cast<std::size_t>(d))); }
  std::string shape() const;
  /// The extents, outermost first.
  std::vector<index_t> extents() const {
    std::vector<index_t> s;
    for (index_t d = 0; d < ndim(); ++d) {
      s.push_back(dim(d));
    }
    return s;
  }

  /// A view of rank R (the array must have rank R) as `T`, with the array's strides.
  template <class T, int R>
  view<T, R> as_view() const {
    check_rank(R);
    view<T, R> v;
    v.data = static_cast<T*>(const_cast<void*>(nd.data()));
    for (int d = 0; d < R; ++d) {
      v.extent[d] = dim(d);
      v.stride[d] = static_cast<index_t>(nd.stride(static_cast<std::size_t>(d)));
    }
    return v;
  }
  /// 1-D view (rank 1).
  template <class T>
  view1d<T> v1() const {
    return as_view<T, 1>();
  }
  /// 2-D view (rank 2).
  template <class T>
  view2d<T> v2() const {
    return as_view<T, 2>();
  }

  void check_rank(index_t r) const;
  /// Throws dtype_error unless the type is one of `ok`.
  void check_type(std::initializer_list<elem> ok) const;
  /// Throws unless the memory is C-contiguous (for ops whose contract needs it).
  void check_contiguous() const;
  /// Throws unless writable (in-place ops).
  void check_writable() const;
};

/// Converts `obj` (the argument `name`) into an `array_in`; raises qtl.DTypeError (TypeError) for a
/// non-array; for a device array, qtl.UnsupportedError in a host-only build or for a device other
/// than CUDA's, qtl.InvalidValueError for a device other than the current one, qtl.ShapeError for a
/// non-contiguous one. Only a binding with a device path passes `device_ok`: elsewhere a CUDA array
/// raises qtl.UnsupportedError (the host loops must never read device memory).
array_in take(nb::handle obj, char const* name, bool device_ok = false);

/// Throws qtl.InvalidValueError unless `b` lives where `a` does (both on the host, or both on one
/// device): "<op>: w is on cuda:0 but g_idx on the host; pass every array on one device".
void check_same_place(std::string_view op, array_in const& a, array_in const& b);

/// As check_same_place for a scale beside `a`, except that a 0-dim host scalar goes with a device
/// array (as in torch).
void check_scalar_place(std::string_view op, array_in const& a, array_in const& scalar);

/// The stream device arrays are exported on and kernels run on, as a DLPack stream value (1: the
/// legacy default stream), or none (the producer's: torch's current stream, else the legacy default).
std::optional<std::uintptr_t> set_cuda_stream(std::optional<std::uintptr_t> stream);

/// A CUDA array qtl made for a producer without an allocator of its own (anything but torch), and
/// the simulated device's arrays (qtl._sim): Python's qtl.DeviceArray, a DLPack producer
/// (`__dlpack__`, `__dlpack_device__`) that `torch.from_dlpack` / `cupy.from_dlpack` view without a
/// copy. It owns its cudaMalloc buffer through `nd`. Its `__dlpack__(stream=s)` orders the
/// consumer's stream `s` (DLPack's values: None and 1 the legacy default stream, 2 the per-thread
/// one, -1 no ordering) after `stream`, the stream its contents were written on.
struct device_array {
  nb::ndarray<> nd;
  device::stream_t stream = nullptr;
};

/// Registers qtl.DeviceArray.
void bind_device_array(nb::module_& m);

/// A new uninitialised output buffer of `shape`, element type `type`, on a 64-byte line (2 MiB
/// and transparent huge pages from 4 MiB on).
class array_out {
 public:
  array_out(elem type, std::vector<index_t> shape);
  /// An output where `like` lives: on the host as above, or on `like`'s device (torch.empty for a
  /// torch tensor, else cudaMalloc).
  array_out(elem type, std::vector<index_t> shape, array_in const& like);
  array_out(array_out&&) noexcept;
  array_out& operator=(array_out&&) = delete;
  array_out(array_out const&) = delete;
  ~array_out();

  template <class T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  template <class T>
  view1d<T> v1() const {
    return make_view(data<T>(), shape_.at(0));
  }
  template <class T>
  view2d<T> v2() const {
    return make_view(data<T>(), shape_.at(0), shape_.at(1));
  }
  template <class T>
  view3d<T> v3() const {
    return make_view(data<T>(), shape_.at(0), shape_.at(1), shape_.at(2));
  }
  index_t size() const;
  std::size_t bytes() const;

  /// The Python array (numpy, or torch for `k == torch`; a device output: the torch tensor, or a
  /// DLPack array over the cudaMalloc buffer); the buffer is handed over.
  nb::object release(kind k);

 private:
  nb::object release_device();

  elem type_;
  std::vector<index_t> shape_;
  void* data_ = nullptr;
  int device_ = -1;                    // a device buffer's device
  device::stream_t stream_ = nullptr;  // a device buffer's stream, where the op writes it
  nb::object tensor_;                  // a torch device output: the tensor that owns data_
};

/// Runs an op where its arrays live, without the GIL: `host()` on the host; for device arrays
/// `kernel(table, stream)`, the launcher's status, on `lead`'s stream. A failed launch raises
/// qtl.Error "<op>: CUDA: <the runtime's message>".
template <class Host, class Kernel>
void run_on(array_in const& lead, std::string_view op, Host&& host, Kernel&& kernel) {
  if (!lead.on_device()) {
    nb::gil_scoped_release nogil;
    host();
    return;
  }
  device::backend const& table = *device::get();  // take() refuses device arrays where it is null
  int err;
  {
    nb::gil_scoped_release nogil;
    err = kernel(table, lead.stream);
  }
  if (err != 0) {
    throw qtl::error(std::string(op) + ": CUDA: " + table.error_string(err));
  }
}

/// A host copy of an array's elements (C-contiguous), read from the device on its stream for a
/// device array: for the host's checks of index arrays, which the kernels do not check.
template <class T>
std::vector<T> host_copy(array_in const& a) {
  std::vector<T> h(static_cast<std::size_t>(a.nd.size()));
  if (h.empty()) {
    return h;
  }
  if (!a.on_device()) {
    std::memcpy(h.data(), a.nd.data(), h.size() * sizeof(T));
    return h;
  }
  device::backend const& table = *device::get();
  if (int const err = table.copy_to_host(h.data(), a.nd.data(), h.size() * sizeof(T), a.stream); err != 0) {
    throw qtl::error(std::string(a.name) + ": reading it from the device failed: " + table.error_string(err));
  }
  return h;
}

/// A C-contiguous array as bytes [outer, shape[d], inner * element size] (`d` in [0, rank)): the
/// view of a tensor split along dimension `d` that the byte-moving kernels take.
view3d<std::uint8_t const> split_bytes(array_in const& a, index_t d);

/// Copies `bytes` from the host to `dst`, an output on `like`'s device, ordered on its stream.
void copy_to_device(array_in const& like, void* dst, void const* src, std::size_t bytes);

/// Bytes of freed outputs of 4 MiB and more kept for reuse by default (`qtl.set_buffer_cache`).
inline constexpr std::size_t default_buffer_cache_bytes = std::size_t{256} << 20;

/// Sets how many bytes of freed large outputs are kept for reuse (0: none; the excess is freed
/// now); returns the previous limit.
std::size_t set_buffer_cache(std::size_t max_bytes);

/// The element size in bytes.
std::size_t elem_size(elem e);

/// Calls `f(std::type_identity<T>{})` with T = float, half_t or bfloat16_t for a float element.
template <class F>
decltype(auto) with_float(array_in const& a, F&& f) {
  a.check_type({elem::f32, elem::f16, elem::bf16});
  switch (a.type) {
    case elem::f16: return f(std::type_identity<half_t>{});
    case elem::bf16: return f(std::type_identity<bfloat16_t>{});
    default: return f(std::type_identity<float>{});
  }
}

/// The device table's float_type of a float element type (f32 for any other).
inline device::float_type float_type_of(elem e) {
  return e == elem::f16    ? device::float_type::f16
         : e == elem::bf16 ? device::float_type::bf16
                           : device::float_type::f32;
}

/// The C++ type of an element type.
template <class T>
constexpr elem elem_of() {
  if constexpr (std::is_same_v<T, float>) {
    return elem::f32;
  } else if constexpr (std::is_same_v<T, half_t>) {
    return elem::f16;
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return elem::bf16;
  } else if constexpr (std::is_same_v<T, float8_e4m3fn_t>) {
    return elem::fp8_e4m3;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return elem::i32;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return elem::i64;
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return elem::u8;
  } else {
    static_assert(sizeof(T) == 0, "qtl::py::elem_of: no element type");
  }
}

/// The float value of a Python float/int or of a 1-element float32 array (0-dim or [1]).
float scalar_float(nb::handle obj, char const* name);

/// A list of Python ints.
std::vector<index_t> int_list(nb::handle obj, char const* name);

/// The `threads=` keyword: None -> one per core (std::thread::hardware_concurrency); else >= 1.
int thread_count(std::optional<int> threads);

/// The name of a `dtype=` argument: a dtype object's (torch.float16 -> "float16", np.float16,
/// np.dtype("float16"), ml_dtypes.float8_e4m3fnuz) or the string itself.
std::string dtype_arg_name(nb::handle obj);

/// A float `dtype=` argument as one of `allowed`: a name ("float32", "float", "f32", "float16",
/// "half", "f16", "bfloat16", "bf16"), a dtype object (torch.float16, np.float16,
/// np.dtype("float16"), ml_dtypes.bfloat16) or None, which is `if_none` when given.
/// @throws dtype_error "<what>: dtype 'x' is not one of float32, bfloat16"
elem float_dtype_arg(std::string_view what, nb::handle obj, std::initializer_list<elem> allowed,
                     std::optional<elem> if_none = std::nullopt);

/// Registers the qtl.Error hierarchy on `m` and its exception translator.
void register_errors(nb::module_& m);

}  // namespace qtl::py
