// Arrays in and out of the bindings (arrays.hpp), and the qtl.Error hierarchy.

#include "arrays.hpp"

#include <nanobind/stl/string.h>
#include <sys/mman.h>

#include <cstring>
#include <mutex>
#include <utility>

// numpy's C API, for numpy outputs (nanobind's export goes through Python calls: ~1.5 µs a call,
// docs/performance.md); imported on the first numpy output, nanobind's export where it fails.
#define PY_ARRAY_UNIQUE_SYMBOL qtl_py_numpy_api
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

namespace qtl::py {

namespace {

namespace dl = nb::dlpack;

/// A module from sys.modules, or null (never imports: torch is only used when the caller has it).
PyObject* loaded_module(char const* name) {
  static PyObject* const torch_name = PyUnicode_InternFromString("torch");
  PyObject* key = std::strcmp(name, "torch") == 0 ? torch_name : nullptr;
  nb::object other;
  if (key == nullptr) {
    other = nb::str(name);
    key = other.ptr();
  }
  PyObject* m = PyImport_GetModule(key);  // new reference or null
  if (m == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(m);  // sys.modules keeps it
  return m;
}

/// torch.Tensor, once torch is imported (kept for the life of the process).
PyObject* torch_tensor_type() {
  static PyObject* type = nullptr;
  if (type == nullptr) {
    if (PyObject* torch = loaded_module("torch")) {
      type = PyObject_GetAttrString(torch, "Tensor");
      if (type == nullptr) {
        PyErr_Clear();
      }
    }
  }
  return type;
}

bool numpy_api();

bool is_torch(nb::handle h) {
  if (numpy_api() && PyArray_CheckExact(h.ptr())) {
    return false;
  }
  PyObject* t = torch_tensor_type();
  if (t == nullptr) {
    return false;
  }
  if (Py_TYPE(h.ptr()) == reinterpret_cast<PyTypeObject*>(t)) {
    return true;
  }
  int r = PyObject_IsInstance(h.ptr(), t);
  if (r < 0) {
    PyErr_Clear();
  }
  return r == 1;
}

nb::object torch_attr(char const* name) { return nb::borrow(loaded_module("torch")).attr(name); }

/// ml_dtypes, if it can be imported (tried once).
PyObject* ml_dtypes() {
  static bool tried = false;
  static PyObject* m = nullptr;
  if (!tried) {
    tried = true;
    m = PyImport_ImportModule("ml_dtypes");
    if (m == nullptr) {
      PyErr_Clear();
    }
  }
  return m;
}

elem classify(dl::dtype t) {
  if (t.lanes != 1) {
    return elem::other;
  }
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Float: return t.bits == 32 ? elem::f32 : t.bits == 16 ? elem::f16 : elem::other;
    case dl::dtype_code::Bfloat: return t.bits == 16 ? elem::bf16 : elem::other;
    case dl::dtype_code::Int: return t.bits == 32 ? elem::i32 : t.bits == 64 ? elem::i64 : elem::other;
    case dl::dtype_code::UInt: return t.bits == 8 ? elem::u8 : elem::other;
    default: return elem::other;
  }
}

dl::dtype dlpack_of(elem e) {
  switch (e) {
    case elem::f32: return nb::dtype<float>();
    case elem::f16: return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Float), 16, 1};
    case elem::bf16: return dl::dtype{static_cast<std::uint8_t>(dl::dtype_code::Bfloat), 16, 1};
    case elem::i32: return nb::dtype<std::int32_t>();
    case elem::i64: return nb::dtype<std::int64_t>();
    default: return nb::dtype<std::uint8_t>();  // u8 and fp8 codes
  }
}

/// numpy's C API, imported once (false where numpy cannot be imported).
bool numpy_api() {
  static int state = 0;
  if (state == 0) {
    state = _import_array() < 0 ? -1 : 1;
    if (state < 0) {
      PyErr_Clear();
    }
  }
  return state > 0;
}

/// The numpy dtype of an output element type (ml_dtypes' for bf16 and fp8 where it is installed,
/// else their storage), kept for the life of the process; null on failure.
PyArray_Descr* numpy_descr(elem e) {
  static PyArray_Descr* cached[8] = {};
  auto& d = cached[static_cast<int>(e)];
  if (d == nullptr) {
    if (e == elem::bf16 || e == elem::fp8_e4m3) {
      if (PyObject* md = ml_dtypes()) {
        nb::object t = nb::borrow(md).attr(e == elem::bf16 ? "bfloat16" : "float8_e4m3fn");
        if (PyArray_DescrConverter(t.ptr(), &d) != NPY_SUCCEED) {
          PyErr_Clear();
          d = nullptr;
        }
      }
      if (d == nullptr) {
        d = PyArray_DescrFromType(e == elem::bf16 ? NPY_UINT16 : NPY_UINT8);
      }
    } else {
      int const type = e == elem::f32   ? NPY_FLOAT32
                       : e == elem::f16 ? NPY_FLOAT16
                       : e == elem::i32 ? NPY_INT32
                       : e == elem::i64 ? NPY_INT64
                                        : NPY_UINT8;
      d = PyArray_DescrFromType(type);
    }
  }
  return d;
}

std::string type_name_of(nb::handle h) { return nb::type_name(h.type()).c_str(); }

/// The dtype's name as Python prints it ("float8_e4m3fn", "torch.float8_e4m3fn"), or "".
std::string dtype_name(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype")) {
    return "";
  }
  nb::object dt = obj.attr("dtype");
  if (nb::hasattr(dt, "name")) {
    return nb::cast<std::string>(nb::str(dt.attr("name")));
  }
  return nb::cast<std::string>(nb::str(dt));
}

}  // namespace

char const* elem_name(elem e) {
  switch (e) {
    case elem::f32: return "float32";
    case elem::f16: return "float16";
    case elem::bf16: return "bfloat16";
    case elem::fp8_e4m3: return "float8_e4m3fn";
    case elem::i32: return "int32";
    case elem::i64: return "int64";
    case elem::u8: return "uint8";
    default: return "an unsupported dtype";
  }
}

std::size_t elem_size(elem e) {
  switch (e) {
    case elem::f32:
    case elem::i32: return 4;
    case elem::f16:
    case elem::bf16: return 2;
    case elem::i64: return 8;
    default: return 1;
  }
}

std::string array_in::shape() const {
  std::vector<index_t> e(nd.ndim());
  for (std::size_t d = 0; d < nd.ndim(); ++d) {
    e[d] = static_cast<index_t>(nd.shape(d));
  }
  return qtl::shape_string(e.data(), static_cast<int>(e.size()));
}

void array_in::check_rank(index_t r) const {
  if (ndim() != r) {
    throw qtl::shape_error(std::string(name) + ": expected " + std::to_string(r) + " dimensions, got shape " + shape());
  }
}

void array_in::check_type(std::initializer_list<elem> ok) const {
  for (elem e : ok) {
    if (type == e) {
      return;
    }
  }
  std::string want;
  for (elem e : ok) {
    want += (want.empty() ? "" : ", ") + std::string(elem_name(e));
  }
  throw dtype_error(std::string(name) + ": dtype " + elem_name(type) + " is not supported here; expected " + want);
}

void array_in::check_contiguous() const {
  index_t s = 1;
  for (index_t d = ndim() - 1; d >= 0; --d) {
    if (dim(d) != 1 && nd.stride(static_cast<std::size_t>(d)) != s) {
      throw qtl::shape_error(std::string(name) + ": must be contiguous (shape " + shape() +
                             "); pass a contiguous copy");
    }
    s *= dim(d);
  }
}

void array_in::check_writable() const {
  nb::ndarray<> w;
  if (!nb::try_cast(src, w, false)) {
    throw qtl::value_error(std::string(name) + ": is read-only; this operation writes it in place");
  }
}

namespace {

thread_local std::optional<std::uintptr_t> stream_override;

/// The device part of take(): checks where the array is, picks the stream and has the producer
/// order the array's memory before it (`__dlpack__(stream=...)`, DLPack's protocol).
void take_device(array_in& a, bool device_ok) {
  std::string const name = a.name;
  if (a.nd.device_type() != nb::device::cuda::value) {
    throw qtl::unsupported_error(name + ": is on DLPack device type " + std::to_string(a.nd.device_type()) +
                                 "; qtl takes CPU and CUDA arrays");
  }
  device::backend const* table = device::get();
  if (table == nullptr) {
    throw qtl::unsupported_error(name +
                                 ": is a CUDA array, and this build of qtl is host-only "
                                 "(qtl.cuda_available() is False); install the CUDA build with the CUDA "
                                 "Toolkit's nvcc on PATH: `pip install .` (QTL_CUDA_ARCHS=9.0,10.0 for "
                                 "other GPUs), or pass a CPU array");
  }
  if (!device_ok) {
    throw qtl::unsupported_error(name +
                                 ": is a CUDA array, and this function runs on host arrays only "
                                 "(docs/python.md lists those with a device path); pass a CPU array");
  }
  a.device = static_cast<int>(a.nd.device_id());
  int current = -1;
  if (int const err = table->current_device(&current); err != 0) {
    throw qtl::unsupported_error(
        name + ": is a CUDA array, but the CUDA runtime has no usable device: " + table->error_string(err));
  }
  if (a.device != current) {
    throw qtl::value_error(name + ": is on cuda:" + std::to_string(a.device) + " but the current device is cuda:" +
                           std::to_string(current) + "; call under torch.cuda.device(" + std::to_string(a.device) +
                           ") (or cupy.cuda.Device(...)), or move the array");
  }
  a.check_contiguous();
  std::uintptr_t dl_stream = 1;  // DLPack's legacy default stream
  bool reexport = true;
  if (stream_override) {
    dl_stream = *stream_override;
  } else if (a.from == kind::torch) {
    // torch's current stream: its tensors are ordered on it already, so no new export is needed
    nb::object s = torch_attr("cuda").attr("current_stream")(a.device);
    dl_stream = nb::cast<std::uintptr_t>(s.attr("cuda_stream"));
    reexport = false;
  }
  if (reexport) {
    nb::object capsule = a.src.attr("__dlpack__")(nb::arg("stream") = dl_stream == 0 ? 1 : dl_stream);
    if (!nb::try_cast(capsule, a.nd, false)) {
      throw dtype_error(name + ": its __dlpack__(stream=...) did not return a DLPack capsule");
    }
  }
  // DLPack's 1 and 0 are the legacy default stream (the null handle); 2 is cudaStreamPerThread.
  a.stream = dl_stream <= 1 ? nullptr : reinterpret_cast<device::stream_t>(dl_stream);
}

std::string place_name(array_in const& a) {
  return a.on_device() ? "cuda:" + std::to_string(a.device) : std::string("the host");
}

}  // namespace

std::optional<std::uintptr_t> set_cuda_stream(std::optional<std::uintptr_t> stream) {
  return std::exchange(stream_override, stream);
}

void check_same_place(std::string_view op, array_in const& a, array_in const& b) {
  if (a.device != b.device) {
    throw qtl::value_error(std::string(op) + ": " + a.name + " is on " + place_name(a) + " but " + b.name + " on " +
                           place_name(b) + "; pass every array on one device");
  }
}

void check_scalar_place(std::string_view op, array_in const& a, array_in const& scalar) {
  if (scalar.ndim() > 0 || scalar.on_device()) {
    check_same_place(op, a, scalar);
  }
}

array_in take(nb::handle obj, char const* name, bool device_ok) {
  array_in a;
  a.name = name;
  a.from = is_torch(obj) ? kind::torch : kind::numpy;
  elem forced = elem::other;
  nb::object o = nb::borrow(obj);
  // torch exports float8 through DLPack with a code nanobind does not name: re-view it too.
  if (!nb::try_cast(o, a.nd, false) || classify(a.nd.dtype()) == elem::other) {
    // Element types DLPack and the buffer protocol do not carry: re-view as the storage integer.
    std::string dn = dtype_name(o);
    char const* storage = nullptr;
    if (dn == "float8_e4m3fn" || dn == "torch.float8_e4m3fn") {
      forced = elem::fp8_e4m3;
      storage = "uint8";
    } else if (dn == "bfloat16") {  // ml_dtypes (torch's bfloat16 travels by DLPack)
      forced = elem::bf16;
      storage = "uint16";
    }
    bool ok = false;
    if (storage != nullptr) {
      nb::object target = a.from == kind::torch ? torch_attr(storage) : nb::module_::import_("numpy").attr(storage);
      o = o.attr("view")(target);
      ok = nb::try_cast(o, a.nd, false);
    } else {
      ok = a.nd.is_valid();  // an array of a dtype no op takes: the op's check names it
    }
    if (!ok) {
      throw dtype_error(std::string(name) +
                        ": expected a CPU array (numpy, torch or a DLPack producer) of a "
                        "supported dtype, got " +
                        type_name_of(obj) + (dn.empty() ? "" : " of dtype " + dn));
    }
  }
  a.type = forced != elem::other ? forced : classify(a.nd.dtype());
  a.src = std::move(o);
  if (a.nd.device_type() != nb::device::cpu::value) {
    take_device(a, device_ok);
  }
  return a;
}

namespace {

/// Buffers from this size on start on a 2 MiB boundary and ask for transparent huge pages: a new
/// output is written once, and its first-touch page faults (one per 4 KiB page otherwise) cost as
/// much as the operation on a 100 MB output (docs/performance.md).
constexpr std::size_t huge_page = std::size_t{2} << 20;
constexpr std::size_t huge_from = std::size_t{4} << 20;

std::align_val_t alignment_for(std::size_t n) {
  return std::align_val_t{n >= huge_from ? huge_page : buffer_alignment};
}

std::size_t rounded_size(std::size_t n) { return (n + huge_page - 1) / huge_page * huge_page; }

/// Freed huge-page buffers kept for the next output of the same size, up to `limit` bytes in all:
/// a fresh buffer costs its page faults and the kernel's zeroing of every page, as much as the
/// operation itself on a 100 MB output (docs/performance.md); a kept one costs neither.
struct buffer_cache {
  std::mutex mu;
  std::size_t limit = default_buffer_cache_bytes;
  std::size_t held = 0;
  std::vector<std::pair<std::size_t, void*>> buffers;  // (rounded size, buffer)

  void* take(std::size_t rounded) {
    std::lock_guard lock(mu);
    for (auto it = buffers.begin(); it != buffers.end(); ++it) {
      if (it->first == rounded) {
        void* p = it->second;
        held -= rounded;
        buffers.erase(it);
        return p;
      }
    }
    return nullptr;
  }
  void give(void* p, std::size_t rounded) {
    {
      std::lock_guard lock(mu);
      if (held + rounded <= limit) {
        buffers.emplace_back(rounded, p);
        held += rounded;
        return;
      }
    }
    ::operator delete (p, std::align_val_t{huge_page});
  }
  /// Frees buffers until at most `bytes` are held.
  void trim(std::size_t bytes) {
    std::vector<void*> drop;
    {
      std::lock_guard lock(mu);
      while (held > bytes && !buffers.empty()) {
        held -= buffers.front().first;
        drop.push_back(buffers.front().second);
        buffers.erase(buffers.begin());
      }
    }
    for (void* p : drop) {
      ::operator delete (p, std::align_val_t{huge_page});
    }
  }
};

buffer_cache& cache() {
  static buffer_cache* c = new buffer_cache;  // never destroyed: capsules may outlive static destruction
  return *c;
}

void* allocate(std::size_t n) {
  if (n < huge_from) {
    return ::operator new(n == 0 ? 1 : n, alignment_for(n));
  }
  std::size_t const rounded = rounded_size(n);
  if (void* p = cache().take(rounded)) {
    return p;
  }
  void* p = ::operator new(rounded, alignment_for(n));
  madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without THP it changes nothing
  return p;
}

/// The owner of a huge-page buffer (the capsule's pointer): the buffer and its rounded size.
struct huge_buffer {
  void* data;
  std::size_t rounded;
};

}  // namespace

namespace {
std::size_t checked_bytes(elem type, std::vector<index_t> const& shape) {
  std::size_t n = elem_size(type);
  for (index_t e : shape) {
    if (e < 0) {
      throw qtl::shape_error("qtl: negative output extent " + std::to_string(e));
    }
    n *= static_cast<std::size_t>(e);
  }
  return n;
}
}  // namespace

array_out::array_out(elem type, std::vector<index_t> shape) : type_(type), shape_(std::move(shape)) {
  data_ = allocate(checked_bytes(type_, shape_));
}

array_out::array_out(elem type, std::vector<index_t> shape, array_in const& like)
    : type_(type), shape_(std::move(shape)) {
  if (!like.on_device()) {
    data_ = allocate(checked_bytes(type_, shape_));
    return;
  }
  std::size_t const n = checked_bytes(type_, shape_);
  device_ = like.device;
  stream_ = like.stream;
  if (like.from == kind::torch) {
    // torch's caching allocator, on the tensor's device and torch's current stream
    nb::object dt = torch_attr(type_ == elem::fp8_e4m3 ? "float8_e4m3fn" : elem_name(type_));
    nb::list dims;
    for (index_t e : shape_) {
      dims.append(e);
    }
    tensor_ = torch_attr("empty")(nb::tuple(dims), nb::arg("dtype") = dt, nb::arg("device") = like.src.attr("device"));
    data_ = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(tensor_.attr("data_ptr")()));
    return;
  }
  device::backend const& table = *device::get();
  if (int const err = table.malloc(&data_, n); err != 0) {
    data_ = nullptr;
    throw qtl::error("qtl: cudaMalloc of " + std::to_string(n) + " bytes failed: " + table.error_string(err));
  }
}

array_out::array_out(array_out&& o) noexcept
    : type_(o.type_),
      shape_(std::move(o.shape_)),
      data_(o.data_),
      device_(o.device_),
      stream_(o.stream_),
      tensor_(std::move(o.tensor_)) {
  o.data_ = nullptr;
}

array_out::~array_out() {
  if (device_ >= 0) {
    if (data_ != nullptr && !tensor_.is_valid()) {
      device::get()->free(data_);
    }
    return;
  }
  if (data_ != nullptr) {
    if (bytes() >= huge_from) {
      cache().give(data_, rounded_size(bytes()));
    } else {
      ::operator delete(data_, alignment_for(bytes()));
    }
  }
}

std::size_t set_buffer_cache(std::size_t max_bytes) {
  buffer_cache& c = cache();
  std::size_t previous;
  {
    std::lock_guard lock(c.mu);
    previous = c.limit;
    c.limit = max_bytes;
  }
  c.trim(max_bytes);
  return previous;
}

std::size_t array_out::bytes() const { return static_cast<std::size_t>(size()) * elem_size(type_); }

index_t array_out::size() const {
  index_t n = 1;
  for (index_t e : shape_) {
    n *= e;
  }
  return n;
}

nb::object array_out::release(kind k) {
  if (device_ >= 0) {
    return release_device();
  }
  nb::capsule owner;
  if (bytes() >= huge_from) {
    auto* hb = new huge_buffer{data_, rounded_size(bytes())};
    owner = nb::capsule(hb, [](void* p) noexcept {
      auto* b = static_cast<huge_buffer*>(p);
      cache().give(b->data, b->rounded);
      delete b;
    });
  } else {
    owner = nb::capsule(data_, [](void* p) noexcept { ::operator delete (p, std::align_val_t{buffer_alignment}); });
  }
  void* p = data_;
  data_ = nullptr;
  bool const torch_out = k == kind::torch && loaded_module("torch") != nullptr;
  if (!torch_out && numpy_api()) {
    // numpy's C API: the array over the buffer, the capsule its base.
    if (PyArray_Descr* descr = numpy_descr(type_)) {
      npy_intp dims[NPY_MAXDIMS];
      int const nd = static_cast<int>(shape_.size());
      for (int d = 0; d < nd; ++d) {
        dims[d] = static_cast<npy_intp>(shape_[static_cast<std::size_t>(d)]);
      }
      Py_INCREF(descr);  // PyArray_NewFromDescr steals it
      PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr, p, NPY_ARRAY_CARRAY, nullptr);
      if (arr == nullptr) {
        throw nb::python_error();  // `owner` frees the buffer
      }
      if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), owner.release().ptr()) < 0) {
        Py_DECREF(arr);
        throw nb::python_error();
      }
      return nb::steal(arr);
    }
  }
  std::vector<std::size_t> shape(shape_.begin(), shape_.end());
  // bf16 for numpy, fp8 for both, travel as their storage and are re-viewed below.
  elem storage = type_;
  if (type_ == elem::fp8_e4m3 || (type_ == elem::bf16 && !torch_out)) {
    storage = type_ == elem::bf16 ? elem::other : elem::u8;
  }
  dl::dtype dt = storage == elem::other ? nb::dtype<std::uint16_t>() : dlpack_of(storage);
  nb::object out;
  if (torch_out) {
    out = nb::cast(nb::ndarray<nb::pytorch>(p, shape.size(), shape.data(), owner, nullptr, dt));
    if (type_ == elem::fp8_e4m3) {
      out = out.attr("view")(torch_attr("float8_e4m3fn"));
    }
  } else {
    out = nb::cast(nb::ndarray<nb::numpy>(p, shape.size(), shape.data(), owner, nullptr, dt));
    if (type_ == elem::fp8_e4m3 || type_ == elem::bf16) {
      if (PyObject* md = ml_dtypes()) {
        out = out.attr("view")(nb::borrow(md).attr(type_ == elem::bf16 ? "bfloat16" : "float8_e4m3fn"));
      }
    }
  }
  return out;
}

nb::object array_out::release_device() {
  if (tensor_.is_valid()) {
    data_ = nullptr;
    return std::move(tensor_);
  }
  void* p = std::exchange(data_, nullptr);
  nb::capsule owner(p, [](void* q) noexcept { device::get()->free(q); });
  std::vector<std::size_t> shape(shape_.begin(), shape_.end());
  // fp8 as its uint8 codes (DLPack producers other than torch have no common fp8 code)
  return nb::cast(device_array{
      nb::ndarray<>(p, shape.size(), shape.data(), owner, nullptr, dlpack_of(type_), nb::device::cuda::value, device_),
      stream_});
}

void bind_device_array(nb::module_& m) {
  nb::class_<device_array>(m, "DeviceArray",
                           "A CUDA array made by qtl (DLPack: torch.from_dlpack / cupy.from_dlpack view it).")
      .def(
          "__dlpack__",
          [](device_array const& a, nb::handle stream, nb::handle /*max_version*/, nb::handle /*dl_device*/,
             nb::handle /*copy*/) {
            // DLPack: None and 1 name the legacy default stream, 2 the per-thread default one, -1
            // asks for no ordering, 0 is ambiguous and refused, others are cudaStream_t handles.
            std::intptr_t s = 1;
            if (!stream.is_none()) {
              if (!nb::try_cast(stream, s, false)) {
                throw dtype_error("DeviceArray.__dlpack__: stream must be an int or None");
              }
              if (s == 0 || s < -1) {
                throw qtl::value_error("DeviceArray.__dlpack__: stream " + std::to_string(s) +
                                       " is not a CUDA stream value (DLPack: None, -1, 1, 2 or a handle)");
              }
            }
            auto const consumer = s == 1 ? nullptr : reinterpret_cast<device::stream_t>(s);
            if (s != -1 && consumer != a.stream) {
              device::backend const& table = *device::get();
              if (int const err = table.order_after(a.stream, consumer); err != 0) {
                throw qtl::error(std::string("DeviceArray.__dlpack__: ordering the consumer's stream failed: ") +
                                 table.error_string(err));
              }
            }
            return nb::cast(a.nd);
          },
          nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
          nb::arg("copy") = nb::none())
      .def("__dlpack_device__",
           [](device_array const& a) { return nb::make_tuple(a.nd.device_type(), a.nd.device_id()); })
      .def_prop_ro("shape",
                   [](device_array const& a) {
                     nb::list l;
                     for (std::size_t d = 0; d < a.nd.ndim(); ++d) {
                       l.append(a.nd.shape(d));
                     }
                     return nb::tuple(l);
                   })
      .def_prop_ro("dtype", [](device_array const& a) { return std::string(elem_name(classify(a.nd.dtype()))); });
}

view3d<std::uint8_t const> split_bytes(array_in const& a, index_t d) {
  index_t outer = 1;
  index_t inner = static_cast<index_t>(elem_size(a.type));
  for (index_t k = 0; k < a.ndim(); ++k) {
    if (k < d) {
      outer *= a.dim(k);
    } else if (k > d) {
      inner *= a.dim(k);
    }
  }
  return make_view(static_cast<std::uint8_t const*>(a.nd.data()), outer, a.dim(d), inner);
}

void copy_to_device(array_in const& like, void* dst, void const* src, std::size_t bytes) {
  device::backend const& table = *device::get();
  if (int const err = table.copy_to_device(dst, src, bytes, like.stream); err != 0) {
    throw qtl::error(std::string(like.name) + ": copying to its device failed: " + table.error_string(err));
  }
}

float scalar_float(nb::handle obj, char const* name) {
  if (PyFloat_Check(obj.ptr()) || PyLong_Check(obj.ptr())) {
    return static_cast<float>(nb::cast<double>(obj));
  }
  array_in a = take(obj, name, true);  // a device scalar is read back below
  a.check_type({elem::f32});
  if (a.nd.size() != 1) {
    throw qtl::shape_error(std::string(name) + ": expected one value (0-dim or [1]), got shape " + a.shape());
  }
  float v;
  if (a.on_device()) {
    device::backend const& table = *device::get();
    if (int const err = table.copy_to_host(&v, a.nd.data(), sizeof v, a.stream); err != 0) {
      throw qtl::error(std::string(name) + ": reading it from the device failed: " + table.error_string(err));
    }
  } else {
    std::memcpy(&v, a.nd.data(), sizeof v);
  }
  return v;
}

std::vector<index_t> int_list(nb::handle obj, char const* name) {
  std::vector<index_t> out;
  try {
    for (nb::handle h : obj) {
      out.push_back(nb::cast<index_t>(h));
    }
  } catch (nb::cast_error const&) {
    throw dtype_error(std::string(name) + ": expected a sequence of ints");
  }
  return out;
}

std::string dtype_arg_name(nb::handle obj) {
  // numpy scalar types (np.float16) by __name__; np.dtype, torch dtypes and names by str()
  std::string s = PyType_Check(obj.ptr()) && nb::hasattr(obj, "__name__") ? nb::cast<std::string>(obj.attr("__name__"))
                                                                          : nb::cast<std::string>(nb::str(obj));
  if (s.starts_with("torch.")) {
    s.erase(0, 6);
  }
  return s;
}

elem float_dtype_arg(std::string_view what, nb::handle obj, std::initializer_list<elem> allowed,
                     std::optional<elem> if_none) {
  if (obj.is_none() && if_none) {
    return *if_none;
  }
  std::string const s = dtype_arg_name(obj);
  elem e = elem::other;
  if (s == "float32" || s == "float" || s == "f32") {
    e = elem::f32;
  } else if (s == "float16" || s == "half" || s == "f16") {
    e = elem::f16;
  } else if (s == "bfloat16" || s == "bf16") {
    e = elem::bf16;
  }
  std::string names;
  for (elem const a : allowed) {
    if (a == e) {
      return e;
    }
    names += (names.empty() ? "" : ", ") + std::string(elem_name(a));
  }
  throw dtype_error(std::string(what) + ": dtype '" + s + "' is not one of " + names);
}

int thread_count(std::optional<int> threads) {
  if (!threads) {
    return qtl::resolve_threads(0);
  }
  if (*threads < 1) {
    throw qtl::value_error("threads: must be at least 1 (or None: one per core), got " + std::to_string(*threads));
  }
  return *threads;
}

namespace {

struct error_types {
  PyObject* base = nullptr;
  PyObject* shape = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* config = nullptr;
  PyObject* format = nullptr;
  PyObject* regex = nullptr;
  PyObject* value = nullptr;
  PyObject* dtype = nullptr;
};
error_types errors;

PyObject* new_error(nb::module_& m, char const* name, PyObject* bases, char const* doc) {
  std::string full = std::string("qtl.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr);
  if (t == nullptr) {
    throw nb::python_error();
  }
  m.attr(name) = nb::handle(t);
  return t;
}

}  // namespace

void register_errors(nb::module_& m) {
  errors.base = new_error(m, "Error", PyExc_ValueError, "Base of every error qtl raises (qtl::error).");
  PyObject* b = errors.base;
  errors.shape = new_error(m, "ShapeError", b, "A shape or extent the operation cannot take (qtl::shape_error).");
  errors.unsupported = new_error(m, "UnsupportedError", b,
                                 "A value outside the supported set, or a device array (qtl::unsupported_error).");
  errors.config = new_error(m, "ConfigError", b, "A malformed or unknown quantization-config field.");
  errors.format = new_error(m, "FormatError", b, "A file whose bytes do not follow its format.");
  errors.regex = new_error(m, "RegexError", b, "A regular expression qtl cannot parse or does not support.");
  errors.value = new_error(m, "InvalidValueError", b, "A value outside the range an operation accepts.");
  nb::object dtype_bases = nb::make_tuple(nb::handle(b), nb::handle(PyExc_TypeError));
  errors.dtype =
      new_error(m, "DTypeError", dtype_bases.ptr(), "An argument of the wrong dtype or kind (also a TypeError).");
  nb::register_exception_translator([](std::exception_ptr const& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (dtype_error const& e) {
      PyErr_SetString(errors.dtype, e.what());
    } catch (qtl::shape_error const& e) {
      PyErr_SetString(errors.shape, e.what());
    } catch (qtl::unsupported_error const& e) {
      PyErr_SetString(errors.unsupported, e.what());
    } catch (qtl::config_error const& e) {
      PyErr_SetString(errors.config, e.what());
    } catch (qtl::format_error const& e) {
      PyErr_SetString(errors.format, e.what());
    } catch (qtl::regex_error const& e) {
      PyErr_SetString(errors.regex, e.what());
    } catch (qtl::value_error const& e) {
      PyErr_SetString(errors.value, e.what());
    } catch (qtl::error const& e) {
      PyErr_SetString(errors.base, e.what());
    }
  });
}

}  // namespace qtl::py
