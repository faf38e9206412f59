#pragma once
// Shared pieces of the qtl tool: its error classes (which decide the exit code), and `op_io`, the
// input file and output tensors of one `qtl op` run.
//
// Exit codes:
//   0  success
//   1  the command line: unknown subcommand or op, a missing or malformed flag, a value outside an
//      enumeration (CLI11's own parse errors, and `usage_error` for checks made after parsing)
//   2  files and data: unreadable or hostile file, missing or wrongly typed tensor, shapes the
//      operation cannot take (every `qtl::error`, `data_error`)

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/io/safetensors.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

#include "lib/errors.hpp"

namespace qtl::tool {

using qtl::io::dtype;
using qtl::io::json;
using qtl::io::tensor_info;

inline constexpr int exit_ok = 0;
inline constexpr int exit_usage = 1;
inline constexpr int exit_data = 2;

/// Text longer than this is abridged by `shown` (real module names are under 200 bytes).
inline constexpr std::size_t shown_limit = 256;
/// A line made of several such texts (a lint problem, an explain decision) is abridged beyond this.
inline constexpr std::size_t shown_line_limit = 4096;

/// Text from a file (a tensor or module name, a config entry, a path) as the tool prints it for a
/// terminal, by qtl::io::printable: printable ASCII as it is; every other byte as \xNN:
/// control bytes (ESC, BEL, CR, LF, ...), DEL, and each byte of a non-ASCII character, so that no
/// escape sequence, bidi override (U+202E) or other invisible character reaches the terminal.
/// Text over `limit` bytes is cut there and marked "...[N more bytes]". Backslashes and quotes
/// stay (a regex rule reads as written), so text made printable already passes unchanged.
std::string shown(std::string_view s, std::size_t limit = shown_limit);

/// A line of JSON with every non-ASCII character written as a \uXXXX escape (UTF-16 surrogate
/// pairs beyond U+FFFF; a byte that is not valid UTF-8 as U+FFFD): the same document, and no
/// bidi override or other invisible character for a terminal to act on. JSON keeps non-ASCII
/// text only in strings, where these escapes are valid.
std::string ascii_json(std::string_view json_text);

/// The floating-point inputs most ops take.
inline constexpr std::initializer_list<dtype> float_types = {dtype::F32, dtype::F16, dtype::BF16};

/// A `--group-size` value: -1 (one group per column) or a positive integer that fits 64 bits.
/// @throws usage_error naming the flag and the text
std::int64_t parse_group_size(std::string const& text);

/// "F32, F16 or BF16"
std::string dtype_list(std::initializer_list<dtype> types);

/// Elements of a tensor as `T`, aligned: a pointer into the file's mapping when the bytes are
/// aligned for `T` (no copy), else an aligned copy.
template <class T>
class typed_tensor {
 public:
  explicit typed_tensor(tensor_info const& t) : info_(&t) {
    auto const* p = t.bytes.data();
    std::size_t const n = t.bytes.size() / sizeof(T);
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0) {
      data_ = reinterpret_cast<T const*>(p);
    } else {
      copy_.resize(n);
      if (n != 0) {
        std::memcpy(copy_.data(), p, n * sizeof(T));
      }
      data_ = copy_.data();
    }
    size_ = static_cast<index_t>(n);
  }
  T const* data() const { return data_; }
  index_t size() const { return size_; }
  tensor_info const& info() const { return *info_; }
  index_t dim(int d) const { return info_->shape[static_cast<std::size_t>(d)]; }
  int rank() const { return static_cast<int>(info_->shape.size()); }
  view1d<T const> view1() const { return make_view(data_, size_); }
  view2d<T const> view2() const { return make_view(data_, dim(0), dim(1)); }
  view3d<T const> view3() const { return make_view(data_, dim(0), dim(1), dim(2)); }

 private:
  tensor_info const* info_;
  std::vector<T> copy_;
  T const* data_ = nullptr;
  index_t size_ = 0;
};

/// The input file and the output tensors of one `qtl op` run.
class op_io {
 public:
  op_io(std::string op, std::filesystem::path in, std::filesystem::path out);

  std::string const& op() const { return op_; }
  qtl::io::safetensors_file const& input() const { return in_; }

  /// The input tensor `name`, checked: one of `types`, and of rank `rank` (or one of `ranks`).
  /// @throws data_error naming the file, the tensor and what the op needs.
  tensor_info const& tensor(std::string_view name, std::initializer_list<dtype> types,
                            std::initializer_list<int> ranks) const;
  /// The input tensor `name` of any dtype and at least `min_rank` dimensions.
  tensor_info const& any_tensor(std::string_view name, int min_rank) const;
  /// Like `tensor`, or nullptr when the file has no tensor `name`.
  tensor_info const* optional_tensor(std::string_view name, std::initializer_list<dtype> types,
                                     std::initializer_list<int> ranks) const;

  /// Adds an output tensor that owns `values` (row-major, `shape`).
  template <class T, class A>
  void emit(std::string name, dtype type, std::vector<std::int64_t> shape, std::vector<T, A> values) {
    auto keep = std::make_shared<std::vector<T, A>>(std::move(values));
    qtl::io::tensor_entry e;
    e.name = std::move(name);
    e.type = type;
    e.shape = std::move(shape);
    e.bytes = std::as_bytes(std::span<T const>(*keep));
    add(std::move(e), std::move(keep));
  }
  /// Adds an output tensor whose bytes are an input's (unchanged data, possibly a new name).
  void emit_input(std::string name, tensor_info const& t);

  /// Writes the outputs atomically (see qtl::io::write_safetensors).
  void write() const;

  /// "IN: tensor 'x'" for messages.
  std::string where(std::string_view tensor) const;

 private:
  void add(qtl::io::tensor_entry e, std::shared_ptr<void const> keep);

  std::string op_;
  std::filesystem::path out_path_;
  qtl::io::safetensors_file in_;
  std::vector<qtl::io::tensor_entry> outputs_;
  std::vector<std::shared_ptr<void const>> keep_;
};

/// Shape as a vector of int64 from extents.
template <class... I>
std::vector<std::int64_t> shape_of(I... extents) {
  return {static_cast<std::int64_t>(extents)...};
}

/// Parses "16,16,9" (non-negative integers) for flags such as --logical-widths.
/// @throws usage_error naming the flag.
std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text);

}  // namespace qtl::tool

namespace qtl::tool {

/// Adds `t` as an output tensor (shape from its extents).
template <class T, int Rank>
void emit(op_io& io, std::string name, dtype type, host_tensor<T, Rank>&& t) {
  std::vector<std::int64_t> shape(Rank);
  for (int d = 0; d < Rank; ++d) {
    shape[static_cast<std::size_t>(d)] = t.extent(d);
  }
  io.emit(std::move(name), type, std::move(shape), std::move(t.storage()));
}

}  // namespace qtl::tool

namespace qtl::tool {

/// Calls `f(std::type_identity<T>{})` with T the storage type of a float dtype (F32 -> float,
/// F16 -> half_t, BF16 -> bfloat16_t); the caller checked the dtype.
template <class F>
decltype(auto) with_float_type(dtype t, F&& f) {
  switch (t) {
    case dtype::F16: return f(std::type_identity<half_t>{});
    case dtype::BF16: return f(std::type_identity<bfloat16_t>{});
    default: return f(std::type_identity<float>{});
  }
}

/// A copy of a 0-dim or 1-element F32 tensor's value.
inline float scalar_value(tensor_info const& t) {
  float v = 0.0f;
  std::memcpy(&v, t.bytes.data(), sizeof v);
  return v;
}

}  // namespace qtl::tool
