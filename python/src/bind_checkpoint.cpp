// qtl.quantize_checkpoint: the whole-checkpoint job of `qtl quantize`, through the tool's command
// library (tools/qtl/lib/checkpoint.hpp, qtl_commands):
//
//   quantize_checkpoint(src, dst, *, format, bits=None, group_size=None, sym=False, asym=False,
//                       fp8_scheme=None, config=None, threads=None, allow_nonfinite=False,
//                       allow_empty=False, progress=None) -> dict (the run's report)
//
// Keywords are the CLI's flags (`qtl quantize --help`); threads=None is every core. progress, a
// callable, gets (done_bytes, total_bytes) from the worker threads (with the GIL; an exception it
// raises is raised again when the run is over). The GIL is released during the run. Option
// mistakes (the CLI's exit code 1) raise qtl.InvalidValueError; file and data problems qtl.Error.

#include <memory>
#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "lib/checkpoint.hpp"

namespace qtl::py {
namespace {

class callback_sink final : public qtl::tool::progress_sink {
 public:
  explicit callback_sink(nb::object cb) : cb_(std::move(cb)) {}
  void progress(std::uint64_t done, std::uint64_t total) override {
    nb::gil_scoped_acquire gil;
    if (error_) {
      return;
    }
    try {
      cb_(done, total);
    } catch (nb::python_error& e) {
      error_ = std::make_unique<nb::python_error>(e);
    }
  }
  /// Raises the callback's exception, if it raised one (call with the GIL).
  void rethrow() {
    if (error_) {
      throw nb::python_error(*error_);
    }
  }
  ~callback_sink() override {
    nb::gil_scoped_acquire gil;
    error_.reset();
  }

 private:
  nb::object cb_;
  std::unique_ptr<nb::python_error> error_;
};

nb::dict report_dict(qtl::tool::quantize_report const& r) {
  nb::dict d;
  d["format"] = r.format;
  d["variant"] = r.variant;
  d["threads"] = r.threads;
  nb::list layers;
  for (auto const& l : r.layers) {
    layers.append(nb::make_tuple(l.module, l.scheme));
  }
  d["layers"] = layers;
  nb::list kept;
  for (auto const& k : r.kept) {
    kept.append(nb::make_tuple(k.module, k.why));
  }
  d["kept"] = kept;
  d["tensors_copied"] = r.tensors_copied;
  d["bytes_in"] = r.bytes_in;
  d["bytes_out"] = r.bytes_out;
  d["seconds"] = r.seconds;
  nb::list notes;
  for (auto const& n : r.notes) {
    notes.append(n);
  }
  d["notes"] = notes;
  return d;
}

nb::dict quantize_checkpoint(std::string const& src, std::string const& dst, std::string const& format,
                             std::optional<int> bits, std::optional<std::int64_t> group_size, bool sym, bool asym,
                             std::optional<std::string> fp8_scheme, std::optional<std::string> config,
                             std::optional<int> threads, bool allow_nonfinite, bool allow_empty, nb::object progress) {
  qtl::tool::quantize_options o;
  o.format = format;
  o.bits = bits;
  o.group_size = group_size;
  o.sym = sym;
  o.asym = asym;
  o.fp8_scheme = fp8_scheme;
  if (config) {
    o.config = *config;
  }
  o.threads = threads.value_or(0);
  if (o.threads < 0 || o.threads > qtl::tool::max_quantize_threads) {
    throw qtl::value_error("qtl.quantize_checkpoint: threads = " + std::to_string(o.threads) + " is not in [1, " +
                           std::to_string(qtl::tool::max_quantize_threads) + "] (None: every core)");
  }
  o.allow_nonfinite = allow_nonfinite;
  o.allow_empty = allow_empty;
  std::optional<callback_sink> sink;
  if (!progress.is_none()) {
    sink.emplace(progress);
  }
  qtl::tool::quantize_report r;
  try {
    nb::gil_scoped_release nogil;
    r = qtl::tool::quantize_checkpoint(src, dst, o, sink ? &*sink : nullptr);
  } catch (qtl::tool::usage_error const& e) {
    throw qtl::value_error(std::string("qtl.quantize_checkpoint: ") + e.what());
  }
  if (sink) {
    sink->rethrow();
  }
  return report_dict(r);
}

}  // namespace

void bind_checkpoint(nb::module_& m) {
  m.def("quantize_checkpoint", &quantize_checkpoint, nb::arg("src"), nb::arg("dst"), nb::kw_only(), nb::arg("format"),
        nb::arg("bits").none() = nb::none(), nb::arg("group_size").none() = nb::none(), nb::arg("sym") = false,
        nb::arg("asym") = false, nb::arg("fp8_scheme").none() = nb::none(), nb::arg("config").none() = nb::none(),
        nb::arg("threads").none() = nb::none(), nb::arg("allow_nonfinite") = false, nb::arg("allow_empty") = false,
        nb::arg("progress").none() = nb::none());
}

}  // namespace qtl::py
