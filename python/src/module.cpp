// qtl._qtl: the module, the qtl.Error hierarchy, qtl.ScalarType / qtl.scalar_types (vLLM's
// fields and ids, from qtl/scalar_type.hpp), and the no-op binding the benchmark compares to.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <qtl/scalar_type.hpp>

#include "arrays.hpp"
#include "bindings.hpp"

namespace qtl::py {
namespace {

nb::object scalar_min(scalar_type const& t) {
  if (t.is_integer()) {
    return nb::int_(t.min_int());
  }
  return nb::float_(t.min());
}
nb::object scalar_max(scalar_type const& t) {
  if (t.is_integer()) {
    return nb::int_(t.max_int());
  }
  return nb::float_(t.max());
}

void bind_scalar_types(nb::module_& m) {
  nb::enum_<nan_repr>(m, "NanRepr", "vLLM's NanRepr: which codes of a float type are NaN.")
      .value("NONE", nan_repr::none)
      .value("IEEE_754", nan_repr::ieee_754)
      .value("EXTD_RANGE_MAX_MIN", nan_repr::extd_range_max_min)
      .value("NEG_ZERO", nan_repr::neg_zero);  // QTL's: float8_e4m3fnuz

  nb::class_<scalar_type>(m, "ScalarType", "vLLM's ScalarType (qtl::scalar_type): same fields, names and ids.")
      .def(nb::init<>())
      .def_static(
          "from_id",
          [](std::uint64_t id) {
            auto t = scalar_type::from_id(id);
            if (!t) {
              throw qtl::value_error("qtl.ScalarType.from_id: " + std::to_string(id) + " is not the id of a named type");
            }
            return *t;
          },
          nb::arg("scalar_type_id"))
      .def_static(
          "from_name",
          [](std::string const& name) {
            auto t = scalar_type::from_name(name);
            if (!t) {
              throw qtl::value_error("qtl.ScalarType.from_name: '" + name + "' is not a named type");
            }
            return *t;
          },
          nb::arg("name"))
      .def_prop_ro("exponent", [](scalar_type const& t) { return int{t.exponent}; })
      .def_prop_ro("mantissa", [](scalar_type const& t) { return int{t.mantissa}; })
      .def_prop_ro("signed", [](scalar_type const& t) { return t.is_signed; })
      .def_prop_ro("bias", [](scalar_type const& t) { return t.bias; })
      .def_prop_ro("_finite_values_only", [](scalar_type const& t) { return t.finite_values_only; })
      .def_prop_ro("nan_repr", [](scalar_type const& t) { return t.nan; })
      .def_prop_ro("size_bits", &scalar_type::size_bits)
      .def_prop_ro("id", &scalar_type::id)
      .def("min", &scalar_min)
      .def("max", &scalar_max)
      .def("is_signed", [](scalar_type const& t) { return t.is_signed; })
      .def("is_floating_point", &scalar_type::is_floating_point)
      .def("is_integer", &scalar_type::is_integer)
      .def("has_bias", &scalar_type::has_bias)
      .def("has_infs", &scalar_type::has_infs)
      .def("has_nans", &scalar_type::has_nans)
      .def("is_ieee_754", &scalar_type::is_ieee_754)
      .def("__str__", [](scalar_type const& t) { return std::string(t.name().view()); })
      .def("__repr__", [](scalar_type const& t) { return "ScalarType." + std::string(t.name().view()); })
      .def("__eq__", [](scalar_type const& a, scalar_type const& b) { return a == b; })
      .def("__hash__", [](scalar_type const& t) { return static_cast<std::size_t>(t.id()); });

  nb::dict named;
  for (scalar_type const& t : named_scalar_types) {
    named[nb::str(t.name().view().data(), t.name().view().size())] = nb::cast(t);
  }
  named["bfloat16"] = nb::cast(qtl::bfloat16);
  named["float16"] = nb::cast(qtl::float16);
  m.attr("_named_scalar_types") = named;
}

}  // namespace

void bind_device(nb::module_& m) {
  device::backend const* table = device::get();
  bind_device_array(m);
  m.def(
      "cuda_available", [table] { return table != nullptr; },
      "True where this build runs the ops on CUDA arrays (built with nvcc), False in the host-only build.");
  m.attr("_device_backend") = table != nullptr ? nb::str(table->name) : nb::none();
  m.def(
      "_set_cuda_stream", [](std::optional<std::uintptr_t> s) { return set_cuda_stream(s); }, nb::arg("stream").none(),
      "Sets this thread's stream for CUDA arrays (a DLPack stream value; None: the producer's); returns the previous.");
  if (table != nullptr && table->bind_extras != nullptr) {
    table->bind_extras(m.ptr());
  }
}

scalar_type scalar_type_of(nb::handle obj, char const* name) {
  scalar_type t;
  if (nb::try_cast(obj, t, false)) {
    return t;
  }
  if (PyUnicode_Check(obj.ptr())) {
    auto s = nb::cast<std::string>(obj);
    if (auto n = scalar_type::from_name(s)) {
      return *n;
    }
    throw qtl::value_error(std::string(name) + ": '" + s + "' is not a named scalar type");
  }
  if (nb::hasattr(obj, "id")) {  // vLLM's / sgl-kernel's ScalarType
    auto id = nb::cast<std::uint64_t>(obj.attr("id"));
    if (auto n = scalar_type::from_id(id)) {
      return *n;
    }
    throw qtl::value_error(std::string(name) + ": id " + std::to_string(id) + " is not a named scalar type");
  }
  throw dtype_error(std::string(name) + ": expected a ScalarType (qtl's, vLLM's or sgl-kernel's) or its name");
}

}  // namespace qtl::py

NB_MODULE(_qtl, m) {
  using namespace qtl::py;
  m.doc() = "QTL's host library: sglang/vLLM weight-quantization utilities (see the qtl package).";
  register_errors(m);
  bind_scalar_types(m);
  m.def(
      "_noop", [](nb::ndarray<nb::ro> const& x) { return x.ndim(); }, nb::arg("x"),
      "Takes any array as a plain nanobind ndarray and returns its rank (the call-overhead baseline).");
  bind_pack(m);
  bind_quantize(m);
  bind_fp8(m);
  bind_layout(m);
  // The rules, block-scaled quantization and the TRT-LLM FP4 MoE preparation.
  bind_rules(m);
  bind_fp4(m);
  bind_moe_prep(m);
  m.def("set_buffer_cache", &set_buffer_cache, nb::arg("max_bytes"),
        "Keep up to max_bytes of freed outputs of 4 MiB and more for reuse (default 256 MiB; 0: none, and "
        "free what is kept); returns the previous limit.");
  bind_marlin(m);
  bind_convert(m);
  bind_w4a8(m);
  bind_device(m);
  bind_dsv4(m);
#ifdef QTL_PY_COMMANDS
  bind_checkpoint(m);
#endif
}
