// qtl._sim: the test build's "device" arrays (test/support/cuda_sim: device memory is host memory
// from the simulator's cudaMalloc), so that the device path runs in CI without a GPU. Only the
// test build of the extension (-Dpython_sim=true, python/sim/) has it.
//   from_host(a, device_id=0, bfloat16=False)
//                    a copy of a C-contiguous CPU array in simulated device memory, as a
//                    qtl.DeviceArray on CUDA device `device_id` (ids other than 0 are claimed, not
//                    real: for the wrong-device errors); bfloat16: `a` is the uint16 view of
//                    bfloat16 values (numpy exports no bfloat16)
//   to_host(a)       a numpy copy of a DLPack array on the simulated device (bfloat16 as uint16)
//   transposed(a)    a 2-D DLPack array's transpose: a non-contiguous view of its memory
//   last_stream()    the stream (as an int) of the last kernel the device table launched
//   last_order()     (producer, consumer) streams of the last ordering a DeviceArray's __dlpack__
//                    asked for, as ints ((0, 0) when none since the last call, which clears it)

#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

#include <qtl/error.hpp>

#include "arrays.hpp"
#include "device.hpp"

namespace qtl::py::device {

extern stream_t last_stream;    // device_kernels.cu
extern stream_t last_order[2];  // device_kernels.cu

namespace {

void check(cudaError_t e, char const* what) {
  if (e != cudaSuccess) {
    throw qtl::error(std::string("qtl._sim.") + what + ": " + cudaGetErrorString(e));
  }
}

nb::object from_host(nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> const& a, int device_id, bool bfloat16) {
  auto dtype = a.dtype();
  if (bfloat16) {  // numpy has no bfloat16 DLPack export: its uint16 storage, relabelled
    if (dtype != nb::dtype<std::uint16_t>()) {
      throw qtl::value_error("qtl._sim.from_host: bfloat16=True takes the uint16 view of bfloat16 values");
    }
    dtype = nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  }
  void* p = nullptr;
  std::size_t const n = a.size() * a.itemsize();
  check(cudaMalloc(&p, n == 0 ? 1 : n), "from_host");
  check(cudaMemcpy(p, a.data(), n, cudaMemcpyHostToDevice), "from_host");
  nb::capsule owner(p, [](void* q) noexcept { static_cast<void>(cudaFree(q)); });
  std::vector<std::size_t> shape(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    shape[d] = a.shape(d);
  }
  return nb::cast(device_array{
      nb::ndarray<>(p, shape.size(), shape.data(), owner, nullptr, dtype, nb::device::cuda::value, device_id)});
}

nb::object to_host(nb::ndarray<nb::c_contig> const& a) {
  if (a.device_type() != nb::device::cuda::value) {
    throw qtl::value_error("qtl._sim.to_host: not a CUDA array");
  }
  std::size_t const n = a.size() * a.itemsize();
  auto* buf = new std::uint8_t[n == 0 ? 1 : n];
  nb::capsule owner(buf, [](void* q) noexcept { delete[] static_cast<std::uint8_t*>(q); });
  check(cudaMemcpy(buf, a.data(), n, cudaMemcpyDeviceToHost), "to_host");
  std::vector<std::size_t> shape(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    shape[d] = a.shape(d);
  }
  auto dtype = a.dtype();
  if (dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat)) {
    dtype = nb::dtype<std::uint16_t>();
  }
  return nb::cast(nb::ndarray<nb::numpy>(buf, shape.size(), shape.data(), owner, nullptr, dtype));
}

nb::object transposed(device_array const& a) {
  if (a.nd.ndim() != 2) {
    throw qtl::value_error("qtl._sim.transposed: expected a 2-D array");
  }
  std::size_t const shape[2] = {a.nd.shape(1), a.nd.shape(0)};
  std::int64_t const strides[2] = {a.nd.stride(1), a.nd.stride(0)};
  nb::object owner = nb::cast(a);  // keeps the buffer alive
  return nb::cast(device_array{
      nb::ndarray<>(a.nd.data(), 2, shape, owner, strides, a.nd.dtype(), a.nd.device_type(), a.nd.device_id())});
}

}  // namespace

void bind_sim(void* module) {
  nb::module_ m = nb::borrow<nb::module_>(static_cast<PyObject*>(module));
  nb::module_ sim = m.def_submodule("_sim", "The simulated CUDA device's array producer (test builds only).");
  sim.def("from_host", &from_host, nb::arg("array"), nb::arg("device_id") = 0, nb::arg("bfloat16") = false);
  sim.def("to_host", &to_host, nb::arg("array"));
  sim.def("transposed", &transposed, nb::arg("array"));
  sim.def("last_stream", [] { return reinterpret_cast<std::uintptr_t>(last_stream); });
  sim.def("last_order", [] {
    nb::object pair = nb::make_tuple(reinterpret_cast<std::uintptr_t>(last_order[0]),
                                     reinterpret_cast<std::uintptr_t>(last_order[1]));
    last_order[0] = last_order[1] = nullptr;
    return pair;
  });
}

}  // namespace qtl::py::device
