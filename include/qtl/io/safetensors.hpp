#pragma once
/// \file
/// Safetensors I/O that survives hostile files: a memory-mapped reader (`safetensors_file`), a
/// sharded-checkpoint reader (`safetensors_checkpoint`, via `model.safetensors.index.json`) and an
/// atomic streaming writer (`write_safetensors`).
///
/// File layout (all integers little-endian):
///
///   byte 0        8                 8 + N                                         end of file
///        | u64 N  | JSON header (N) | data section: the tensors' bytes, back to back |
///
/// The header is a JSON object: an optional `"__metadata__": {string: string}` and one entry per
/// tensor, `"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}`, offsets
/// relative to the start of the data section. The reader enforces the rules of the format's
/// reference reader, so that a file it accepts can be read without any further check:
///   - the file holds at least the 8-byte length, N <= 100'000'000 and 8 + N <= file size;
///   - the header text has no UTF-8 byte-order mark and no NUL byte (whitespace may pad it);
///   - the header is valid UTF-8 JSON, a JSON object, with no key twice in any object (nlohmann
///     keeps one silently, so keys are checked while parsing) and at most 64 levels deep;
///   - every tensor has a known dtype (`dtype_from_name`), a shape of non-negative integers whose
///     byte count `prod(shape) * dtype_size` fits 64 bits, and `end - begin` equal to that count;
///   - the non-empty tensors, sorted by offset, cover the data section exactly: no gap, no overlap,
///     no trailing byte, whatever order the header lists them in; zero-size tensors may sit at any
///     offset within the data (and share one); 0-dim tensors (`"shape": []`) hold one element.
/// Every violation throws `qtl::format_error` whose message starts with the file's path and names
/// the tensor and the problem. Tensor bytes are not aligned in general: copy them out (`memcpy`)
/// before reading them as wider types.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <qtl/error.hpp>
#include <qtl/io/json_parse.hpp>
#include <qtl/io/regular_file.hpp>
#include <qtl/numeric.hpp>

namespace qtl::io {

using json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------------------------

/// The element types of a safetensors file that QTL reads and writes.
enum class dtype : std::uint8_t {
  F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2, F8_E8M0
};

/// Every dtype, in declaration order.
inline constexpr dtype all_dtypes[] = {dtype::F64,  dtype::F32,     dtype::F16,     dtype::BF16,
                                       dtype::I64,  dtype::I32,     dtype::I16,     dtype::I8,
                                       dtype::U64,  dtype::U32,     dtype::U16,     dtype::U8,
                                       dtype::BOOL, dtype::F8_E4M3, dtype::F8_E5M2, dtype::F8_E8M0};

/// Bytes per element.
constexpr std::size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::F64: case dtype::I64: case dtype::U64: return 8;
    case dtype::F32: case dtype::I32: case dtype::U32: return 4;
    case dtype::F16: case dtype::BF16: case dtype::I16: case dtype::U16: return 2;
    default: return 1;  // I8 U8 BOOL F8_*
  }
}

/// The name the format uses ("F32", "F8_E4M3", ...).
constexpr std::string_view dtype_name(dtype t) {
  constexpr std::string_view names[] = {"F64", "F32",  "F16",     "BF16",    "I64",    "I32",
                                        "I16", "I8",   "U64",     "U32",     "U16",    "U8",
                                        "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0"};
  return names[static_cast<std::size_t>(t)];
}

/// The dtype named `name` (exact, case-sensitive), or nullopt for anything else (e.g. "F4").
constexpr std::optional<dtype> dtype_from_name(std::string_view name) {
  for (dtype t : all_dtypes) {
    if (dtype_name(t) == name) {
      return t;
    }
  }
  return std::nullopt;
}

/// `dtype_of<T>`: the dtype whose elements are C++ `T` (arithmetic types and QTL's storage types
/// of qtl/numeric.hpp), nullopt for any other type.
template <class T>
inline constexpr std::optional<dtype> dtype_of = std::nullopt;
template <> inline constexpr std::optional<dtype> dtype_of<double> = dtype::F64;
template <> inline constexpr std::optional<dtype> dtype_of<float> = dtype::F32;
template <> inline constexpr std::optional<dtype> dtype_of<std::int64_t> = dtype::I64;
template <> inline constexpr std::optional<dtype> dtype_of<std::int32_t> = dtype::I32;
template <> inline constexpr std::optional<dtype> dtype_of<std::int16_t> = dtype::I16;
template <> inline constexpr std::optional<dtype> dtype_of<std::int8_t> = dtype::I8;
template <> inline constexpr std::optional<dtype> dtype_of<std::uint64_t> = dtype::U64;
template <> inline constexpr std::optional<dtype> dtype_of<std::uint32_t> = dtype::U32;
template <> inline constexpr std::optional<dtype> dtype_of<std::uint16_t> = dtype::U16;
template <> inline constexpr std::optional<dtype> dtype_of<std::uint8_t> = dtype::U8;
template <> inline constexpr std::optional<dtype> dtype_of<bool> = dtype::BOOL;
template <> inline constexpr std::optional<dtype> dtype_of<half_t> = dtype::F16;
template <> inline constexpr std::optional<dtype> dtype_of<bfloat16_t> = dtype::BF16;
template <> inline constexpr std::optional<dtype> dtype_of<float8_e4m3fn_t> = dtype::F8_E4M3;
template <> inline constexpr std::optional<dtype> dtype_of<float8_e5m2_t> = dtype::F8_E5M2;
template <> inline constexpr std::optional<dtype> dtype_of<float8_e8m0fnu_t> = dtype::F8_E8M0;

/// Limits of the reader (those of the format's reference reader, plus a nesting bound).
inline constexpr std::uint64_t max_header_bytes = 100'000'000;
inline constexpr int max_header_depth = 64;

// ---------------------------------------------------------------------------------------------
// tensors
// ---------------------------------------------------------------------------------------------

/// Shape formatted as torch prints it: "[2, 3]" ("[]" for 0-dim).
inline std::string shape_string(std::span<std::int64_t const> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

/// Element count of `shape`, or nullopt when it would not fit 64 bits or a dimension is negative.
inline std::optional<std::uint64_t> checked_numel(std::span<std::int64_t const> shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      return std::nullopt;
    }
    if (d != 0 && n > UINT64_MAX / static_cast<std::uint64_t>(d)) {
      // Overflow matters only if no later dimension is zero: [2^40, 2^40, 0] has 0 elements.
      if (std::find(shape.begin(), shape.end(), std::int64_t{0}) != shape.end()) {
        return 0;
      }
      return std::nullopt;
    }
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

/// One tensor to write (or the common part of one read): its bytes are not owned.
struct tensor_entry {
  std::string name;
  dtype type = dtype::U8;
  std::vector<std::int64_t> shape;   // empty: a 0-dim tensor of one element
  std::span<std::byte const> bytes;  // prod(shape) * dtype_size(type) bytes, row-major

  /// Number of elements (the shape was validated, so this cannot overflow).
  std::uint64_t numel() const {
    std::uint64_t n = 1;
    for (std::int64_t d : shape) {
      n *= static_cast<std::uint64_t>(d);
    }
    return n;
  }
};

/// A tensor of a file that was read: `bytes` points into the file's mapping.
struct tensor_info : tensor_entry {
  std::uint64_t begin = 0;  // data_offsets, relative to the data section
  std::uint64_t end = 0;
};

/// A (possibly hostile) string made fit for a message: printable ASCII kept, other bytes (and,
/// with `escape_quotes`, `'` and `\\`: for a text put between quotes) escaped as \\xNN, cut
/// after `limit` bytes.
inline std::string printable(std::string_view s, std::size_t limit = 200, bool escape_quotes = true) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && ((c != '\'' && c != '\\') || !escape_quotes)) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > limit) {
    out += "...";
  }
  return out;
}

/// A name quoted for a message: 'name', made printable.
inline std::string quote_name(std::string_view s) { return "'" + printable(s) + "'"; }

namespace detail {

/// "<path>: <problem>" as a format_error.
[[noreturn]] inline void fail(std::filesystem::path const& path, std::string const& problem) {
  throw format_error(path.string() + ": " + problem);
}

inline std::string errno_text(int err) { return std::strerror(err); }

/// Parses `text` as JSON, rejecting duplicate keys in any object and nesting deeper than
/// `max_header_depth` (both checked while parsing), in time linear in the text
/// (qtl/io/json_parse.hpp).
inline json parse_json_strict(std::string_view text, std::filesystem::path const& path,
                              char const* what) {
  json out;
  json_parse_status const s = parse_json_linear(text, out, duplicate_keys::reject, static_cast<std::size_t>(max_header_depth));
  switch (s.what) {
    case json_parse_status::kind::ok:
      break;
    case json_parse_status::kind::duplicate_key:
      fail(path, std::string(what) + " has the key " + quote_name(s.key) +
                     (s.depth == 1 ? " (a tensor name)" : "") + " more than once");
    case json_parse_status::kind::too_deep:
      fail(path, std::string(what) + " nests deeper than " + std::to_string(max_header_depth) + " levels");
    case json_parse_status::kind::syntax:
      fail(path, std::string(what) + " is not valid JSON: " + printable(s.message, 400, false));
  }
  return out;
}

/// A non-negative JSON integer, or nullopt (negative, fractional, too large, not a number).
inline std::optional<std::uint64_t> as_u64(json const& j) {
  if (j.is_number_unsigned()) {
    return j.get<std::uint64_t>();
  }
  if (j.is_number_integer()) {  // signed: negative here, since non-negative parse as unsigned
    auto v = j.get<std::int64_t>();
    if (v >= 0) {
      return static_cast<std::uint64_t>(v);
    }
  }
  return std::nullopt;
}

/// Validates a parsed header against a data section of `data_size` bytes, appending the tensors
/// (in header order) and returning the metadata object.
inline json validate_header(json const& header, std::uint64_t data_size,
                            std::filesystem::path const& path, std::vector<tensor_info>& out) {
  if (!header.is_object()) {
    fail(path, std::string("header is a JSON ") + header.type_name() + ", not an object");
  }
  json metadata = json::object();
  for (auto const& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        fail(path, "__metadata__ is not an object");
      }
      for (auto const& [k, v] : entry.items()) {
        if (!v.is_string()) {
          fail(path, "__metadata__ value of " + quote_name(k) + " is a " + v.type_name() +
                         ", not a string");
        }
      }
      metadata = entry;
      continue;
    }
    std::string const who = "tensor " + quote_name(name);
    if (!entry.is_object()) {
      fail(path, who + " is described by a JSON " + entry.type_name() + ", not an object");
    }
    auto const dt = entry.find("dtype");
    auto const sh = entry.find("shape");
    auto const off = entry.find("data_offsets");
    if (dt == entry.end() || sh == entry.end() || off == entry.end()) {
      fail(path, who + " lacks " +
                     (dt == entry.end() ? "dtype" : sh == entry.end() ? "shape" : "data_offsets"));
    }
    if (!dt->is_string()) {
      fail(path, who + ": dtype is not a string");
    }
    auto const type = dtype_from_name(dt->get_ref<json::string_t const&>());
    if (!type) {
      fail(path, who + ": unsupported dtype " + quote_name(dt->get_ref<json::string_t const&>()) +
                     " (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 "
                     "F8_E5M2 F8_E8M0)");
    }
    if (!sh->is_array()) {
      fail(path, who + ": shape is not an array");
    }
    tensor_info t;
    t.name = name;
    t.type = *type;
    t.shape.reserve(sh->size());
    for (auto const& d : *sh) {
      auto v = as_u64(d);
      if (!v || *v > static_cast<std::uint64_t>(INT64_MAX)) {
        fail(path, who + ": shape " + sh->dump() + " has a dimension that is not an integer in "
                         "[0, 2^63)");
      }
      t.shape.push_back(static_cast<std::int64_t>(*v));
    }
    if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0]) || !as_u64((*off)[1])) {
      fail(path, who + ": data_offsets " + off->dump() + " is not [begin, end] of non-negative "
                       "integers");
    }
    t.begin = *as_u64((*off)[0]);
    t.end = *as_u64((*off)[1]);
    auto const numel = checked_numel(t.shape);
    std::size_t const esize = dtype_size(t.type);
    if (!numel || *numel > UINT64_MAX / esize) {
      fail(path, who + ": shape " + shape_string(t.shape) + " of " +
                     std::string(dtype_name(t.type)) + " has more bytes than 64 bits can count");
    }
    std::uint64_t const nbytes = *numel * esize;
    if (t.begin > t.end) {
      fail(path, who + ": data_offsets [" + std::to_string(t.begin) + ", " +
                     std::to_string(t.end) + "] end before they begin");
    }
    if (t.end > data_size) {
      fail(path, who + ": data_offsets [" + std::to_string(t.begin) + ", " +
                     std::to_string(t.end) + "] reach past the data section of " +
                     std::to_string(data_size) + " bytes");
    }
    if (t.end - t.begin != nbytes) {
      fail(path, who + ": data_offsets [" + std::to_string(t.begin) + ", " +
                     std::to_string(t.end) + "] span " + std::to_string(t.end - t.begin) +
                     " bytes, but shape " + shape_string(t.shape) + " of " +
                     std::string(dtype_name(t.type)) + " needs " + std::to_string(nbytes));
    }
    out.push_back(std::move(t));
  }
  // Coverage: the non-empty tensors, in offset order, must tile [0, data_size) exactly.
  std::vector<tensor_info const*> order;
  for (auto const& t : out) {
    if (t.end != t.begin) {
      order.push_back(&t);
    }
  }
  std::sort(order.begin(), order.end(),
            [](tensor_info const* a, tensor_info const* b) { return a->begin < b->begin; });
  std::uint64_t cursor = 0;
  tensor_info const* prev = nullptr;
  for (auto const* t : order) {
    if (t->begin < cursor) {
      fail(path, "tensors " + quote_name(prev->name) + " and " + quote_name(t->name) +
                     " overlap (bytes " + std::to_string(t->begin) + " to " +
                     std::to_string(cursor) + " of the data section)");
    }
    if (t->begin > cursor) {
      fail(path, "gap of " + std::to_string(t->begin - cursor) + " bytes in the data section "
                     "before tensor " + quote_name(t->name) + " (at offset " +
                     std::to_string(cursor) + ")");
    }
    cursor = t->end;
    prev = t;
  }
  if (cursor != data_size) {
    fail(path, std::to_string(data_size - cursor) + " trailing bytes in the data section after "
                   "the last tensor (at offset " + std::to_string(cursor) + ")");
  }
  return metadata;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// reader
// ---------------------------------------------------------------------------------------------

/// A validated safetensors file, memory-mapped read-only for its lifetime (`open`) or viewing
/// bytes owned by the caller (`view`). Move-only; moving keeps `tensors()` addresses valid.
class safetensors_file {
 public:
  safetensors_file() = default;
  safetensors_file(safetensors_file&& o) noexcept { swap(o); }
  safetensors_file& operator=(safetensors_file&& o) noexcept {
    safetensors_file tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  safetensors_file(safetensors_file const&) = delete;
  safetensors_file& operator=(safetensors_file const&) = delete;
  ~safetensors_file() {
    if (map_ != nullptr) {
      ::munmap(map_, size_);
    }
  }

  /// Maps and validates `path` (see the file comment for the rules).
  /// @throws qtl::format_error naming the file and the problem (also when it cannot be opened).
  static safetensors_file open(std::filesystem::path const& path) {
    safetensors_file f;
    f.path_ = path;
    struct stat st {};
    std::string why;
    int const fd = open_regular_file(path, st, why);  // never blocks (a FIFO is refused)
    if (fd < 0) {
      detail::fail(path, why);
    }
    auto const size = static_cast<std::uint64_t>(st.st_size);
    if (size < 8) {
      ::close(fd);
      detail::fail(path, "file of " + std::to_string(size) +
                             " bytes is too short for the 8-byte header length");
    }
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (map == MAP_FAILED) {
      detail::fail(path, "cannot map: " + detail::errno_text(err));
    }
    f.map_ = map;
    f.size_ = size;
    f.bytes_ = static_cast<unsigned char const*>(map);
    f.parse();
    return f;
  }

  /// Validates `bytes` (a whole file's content) without copying or owning them: the result
  /// refers to them and must not outlive them. `name` stands for the file in error messages.
  /// @throws qtl::format_error as `open` does.
  static safetensors_file view(std::span<std::byte const> bytes, std::filesystem::path name) {
    safetensors_file f;
    f.path_ = std::move(name);
    if (bytes.size() < 8) {
      detail::fail(f.path_, "file of " + std::to_string(bytes.size()) +
                                " bytes is too short for the 8-byte header length");
    }
    f.bytes_ = reinterpret_cast<unsigned char const*>(bytes.data());
    f.size_ = bytes.size();
    f.parse();
    return f;
  }

  /// The path it was opened from.
  std::filesystem::path const& path() const { return path_; }
  /// The tensors, in the order the header lists them.
  std::vector<tensor_info> const& tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  tensor_info const* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  /// The tensor named `name`. @throws qtl::format_error naming the file and the tensor.
  tensor_info const& at(std::string_view name) const {
    if (auto const* t = find(name)) {
      return *t;
    }
    detail::fail(path_, "has no tensor " + quote_name(name));
  }
  /// The `__metadata__` object (string values only; an empty object when absent).
  json const& metadata() const { return metadata_; }
  /// Byte length of the JSON header (N) and the whole file.
  std::uint64_t header_size() const { return header_size_; }
  std::uint64_t file_size() const { return size_; }
  /// The whole file's bytes (the mapping, or the viewed bytes).
  std::span<std::byte const> file_bytes() const {
    return {reinterpret_cast<std::byte const*>(bytes_), static_cast<std::size_t>(size_)};
  }

 private:
  void swap(safetensors_file& o) noexcept {
    std::swap(path_, o.path_);
    std::swap(map_, o.map_);
    std::swap(bytes_, o.bytes_);
    std::swap(size_, o.size_);
    std::swap(header_size_, o.header_size_);
    std::swap(tensors_, o.tensors_);
    std::swap(index_, o.index_);
    std::swap(metadata_, o.metadata_);
  }

  void parse() {
    auto const* bytes = bytes_;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
      n = (n << 8) | bytes[i];
    }
    if (n > max_header_bytes) {
      detail::fail(path_, "header length " + std::to_string(n) + " exceeds the limit of " +
                              std::to_string(max_header_bytes) + " bytes");
    }
    if (n > size_ - 8) {
      detail::fail(path_, "header length " + std::to_string(n) + " reaches past the end of the " +
                              std::to_string(size_) + "-byte file");
    }
    header_size_ = n;
    std::string_view text(reinterpret_cast<char const*>(bytes + 8), n);
    // As the safetensors library's reader (0.8: serde_json on the header text): a byte-order
    // mark and NUL bytes (e.g. NUL padding after the JSON) are errors; whitespace padding is not.
    if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") {
      detail::fail(path_, "header starts with a UTF-8 byte-order mark (the safetensors reader rejects it)");
    }
    if (auto const nul = text.find('\0'); nul != std::string_view::npos) {
      detail::fail(path_, "header holds a NUL byte at offset " + std::to_string(8 + nul) +
                              " (padding must be spaces; the safetensors reader rejects it)");
    }
    std::uint64_t const data_size = size_ - 8 - n;
    try {
      json header = detail::parse_json_strict(text, path_, "header");
      metadata_ = detail::validate_header(header, data_size, path_, tensors_);
    } catch (std::bad_alloc const&) {
      detail::fail(path_, "the " + std::to_string(n) + "-byte header needs more memory than this process may use");
    }
    auto const* data = reinterpret_cast<std::byte const*>(bytes + 8 + n);
    index_.reserve(tensors_.size());
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      auto& t = tensors_[i];
      t.bytes = std::span<std::byte const>(data + t.begin, t.end - t.begin);
      index_.emplace(t.name, i);
    }
  }

  std::filesystem::path path_;
  void* map_ = nullptr;                  // the mapping when opened from a path (owned)
  unsigned char const* bytes_ = nullptr; // the file's bytes (mapped or viewed)
  std::uint64_t size_ = 0;
  std::uint64_t header_size_ = 0;
  std::vector<tensor_info> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  json metadata_ = json::object();
};

// ---------------------------------------------------------------------------------------------
// sharded checkpoints
// ---------------------------------------------------------------------------------------------

/// A checkpoint of one or more safetensors files: a single `.safetensors` file, a
/// `*.safetensors.index.json` (`{"metadata": {...}, "weight_map": {tensor: shard file}}`), or a
/// directory holding `model.safetensors.index.json` or `model.safetensors`.
/// The index must be a JSON object (no duplicate keys) whose `weight_map` maps each tensor to a
/// plain file name in the index's folder (no path separators, not "." or ".."); every listed tensor
/// must be in its shard, and every tensor of a shard must be listed there.
class safetensors_checkpoint {
 public:
  /// A tensor and the shard (index into `shards()`) that holds it.
  struct entry {
    tensor_info const* tensor;
    std::size_t shard;
  };

  /// @throws qtl::format_error naming the index or shard file and the problem.
  static safetensors_checkpoint open(std::filesystem::path const& path) {
    namespace fs = std::filesystem;
    safetensors_checkpoint c;
    std::error_code ec;
    fs::path p = path;
    if (fs::is_directory(p, ec)) {
      // symlink_status: a dangling or looping link is opened, and named for what it is
      if (fs::exists(fs::symlink_status(p / "model.safetensors.index.json", ec))) {
        p = p / "model.safetensors.index.json";
      } else if (fs::exists(fs::symlink_status(p / "model.safetensors", ec))) {
        p = p / "model.safetensors";
      } else {
        detail::fail(path, "directory holds neither model.safetensors.index.json nor "
                           "model.safetensors");
      }
    }
    std::string const fname = p.filename().string();
    if (fname.size() < 5 || fname.compare(fname.size() - 5, 5, ".json") != 0) {
      c.shards_.push_back(safetensors_file::open(p));
      for (auto const& t : c.shards_[0].tensors()) {
        c.entries_.push_back({&t, 0});
      }
      c.metadata_ = c.shards_[0].metadata();
    } else {
      c.open_index(p);
    }
    for (std::size_t i = 0; i < c.entries_.size(); ++i) {
      c.index_.emplace(c.entries_[i].tensor->name, i);
    }
    return c;
  }

  std::vector<safetensors_file> const& shards() const { return shards_; }
  /// Every tensor: shard by shard (in the order the index first names them), header order inside.
  std::vector<entry> const& tensors() const { return entries_; }
  tensor_info const* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : entries_[it->second].tensor;
  }
  /// The index's `metadata` object (a single file's `__metadata__`).
  json const& metadata() const { return metadata_; }

 private:
  void open_index(std::filesystem::path const& p) {
    std::string text;
    std::string why;
    if (!read_regular_file(p, max_header_bytes, text, why)) {  // never blocks (a FIFO is refused)
      detail::fail(p, why);
    }
    json index = detail::parse_json_strict(text, p, "index");
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      detail::fail(p, "is not a JSON object with a \"weight_map\" object");
    }
    if (index.contains("metadata")) {
      if (!index["metadata"].is_object()) {
        detail::fail(p, "\"metadata\" is not an object");
      }
      metadata_ = index["metadata"];
    }
    std::vector<std::string> shard_names;
    std::unordered_map<std::string, std::size_t> shard_of;
    std::vector<std::pair<std::string, std::size_t>> listed;  // (tensor, shard)
    for (auto const& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        detail::fail(p, "weight_map entry of tensor " + quote_name(tensor) + " is not a string");
      }
      auto const& f = file.get_ref<json::string_t const&>();
      if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
          f.find('\0') != std::string::npos) {
        detail::fail(p, "weight_map names shard " + quote_name(f) + " for tensor " +
                            quote_name(tensor) + ", which is not a plain file name");
      }
      auto [it, fresh] = shard_of.emplace(f, shard_names.size());
      if (fresh) {
        shard_names.push_back(f);
      }
      listed.emplace_back(tensor, it->second);
    }
    auto const dir = p.parent_path();
    for (auto const& name : shard_names) {
      shards_.push_back(safetensors_file::open(dir / name));
    }
    std::vector<std::size_t> listed_count(shards_.size(), 0);
    for (auto const& [tensor, s] : listed) {
      if (shards_[s].find(tensor) == nullptr) {
        detail::fail(p, "weight_map puts tensor " + quote_name(tensor) + " in " +
                            quote_name(shard_names[s]) + ", which does not hold it");
      }
      ++listed_count[s];
    }
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      if (listed_count[s] != shards_[s].tensors().size()) {
        std::unordered_map<std::string_view, std::size_t> where;  // tensor -> shard, as listed
        for (auto const& [tensor, shard] : listed) {
          where.emplace(tensor, shard);
        }
        for (auto const& t : shards_[s].tensors()) {
          auto it = where.find(t.name);
          if (it == where.end() || it->second != s) {
            detail::fail(p, "shard " + quote_name(shard_names[s]) + " holds tensor " +
                                quote_name(t.name) + ", which weight_map does not put there");
          }
        }
      }
      for (auto const& t : shards_[s].tensors()) {
        entries_.push_back({&t, s});
      }
    }
  }

  std::vector<safetensors_file> shards_;  // a vector of move-only files: tensor_info addresses
                                          // stay valid because each file owns its vector
  std::vector<entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
  json metadata_ = json::object();
};

// ---------------------------------------------------------------------------------------------
// writer
// ---------------------------------------------------------------------------------------------

namespace detail {

/// Writes all of `data` to `fd`, retrying short writes and EINTR; false on error (errno set).
inline bool write_all(int fd, void const* data, std::size_t size) {
  auto const* p = static_cast<char const*>(data);
  while (size > 0) {
    std::size_t chunk = std::min<std::size_t>(size, std::size_t{1} << 30);
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    p += w;
    size -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace detail

/// The header `write_safetensors` writes for `tensors` (offsets assigned back to back in the
/// given order; `__metadata__` first when `metadata` is a non-empty object), padded with spaces
/// to a multiple of 8 bytes so that the data section starts 8-aligned.
/// @throws qtl::value_error for a duplicate or reserved (`__metadata__`) name, a byte count that does not
///         match dtype and shape, a negative dimension, or metadata that is not {string: string}.
inline std::string safetensors_header(std::span<tensor_entry const> tensors,
                                      json const& metadata = json::object()) {
  json header = json::object();
  if (!metadata.is_null() && !(metadata.is_object() && metadata.empty())) {
    if (!metadata.is_object()) {
      throw value_error("safetensors metadata must be an object of strings, not a " +
                        std::string(metadata.type_name()));
    }
    for (auto const& [k, v] : metadata.items()) {
      if (!v.is_string()) {
        throw value_error("safetensors metadata value of " + quote_name(k) +
                          " is not a string");
      }
    }
    header["__metadata__"] = metadata;
  }
  std::unordered_set<std::string_view> names;
  std::uint64_t offset = 0;
  for (auto const& t : tensors) {
    std::string const who = "tensor " + quote_name(t.name);
    if (t.name == "__metadata__") {
      throw value_error("cannot write a tensor named " + quote_name(t.name));
    }
    if (!names.insert(t.name).second) {
      throw value_error("cannot write " + who + " twice");
    }
    auto numel = checked_numel(t.shape);
    if (!numel || *numel > UINT64_MAX / dtype_size(t.type) ||
        *numel * dtype_size(t.type) != t.bytes.size()) {
      throw value_error(who + ": " + std::to_string(t.bytes.size()) + " bytes do not hold shape " +
                        shape_string(t.shape) + " of " + std::string(dtype_name(t.type)));
    }
    json e = json::object();
    e["dtype"] = std::string(dtype_name(t.type));
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + t.bytes.size()};
    header[t.name] = std::move(e);
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (json::exception const& e) {
    throw value_error(std::string("tensor names and metadata must be valid UTF-8: ") + e.what());
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

/// Writes `tensors` (in this order) and `metadata` to `path` atomically: the bytes go to a new
/// temporary file in the same folder, which is flushed to disk (fsync) and renamed over `path`
/// only when complete, so `path` never holds a partial file; on error the temporary is removed.
/// @throws qtl::value_error for bad tensors or metadata (see `safetensors_header`),
///         qtl::format_error naming the file when it cannot be written.
inline void write_safetensors(std::filesystem::path const& path,
                              std::span<tensor_entry const> tensors,
                              json const& metadata = json::object()) {
  std::string const header = safetensors_header(tensors, metadata);
  static std::atomic<unsigned> counter{0};
  auto dir = path.parent_path();
  if (dir.empty()) {
    dir = ".";
  }
  std::filesystem::path tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = dir / ("." + path.filename().string() + ".qtl-tmp-" + std::to_string(::getpid()) + "-" +
                 std::to_string(counter++));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100)) {
      detail::fail(path, "cannot create a temporary file in " + dir.string() + ": " +
                             detail::errno_text(errno));
    }
  }
  auto abandon = [&](char const* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    detail::fail(path, std::string(what) + ": " + detail::errno_text(err));
  };
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) {
    len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  }
  if (!detail::write_all(fd, len, 8) || !detail::write_all(fd, header.data(), header.size())) {
    abandon("cannot write");
  }
  for (auto const& t : tensors) {
    if (!detail::write_all(fd, t.bytes.data(), t.bytes.size())) {
      abandon("cannot write");
    }
  }
  if (::fsync(fd) != 0) {
    abandon("cannot flush");
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    detail::fail(path, "cannot close: " + detail::errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    detail::fail(path, "cannot rename the temporary file into place: " + detail::errno_text(err));
  }
  // Make the rename itself durable (best effort: some file systems refuse fsync on folders).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

/// Convenience overload for a vector or braced list of entries.
inline void write_safetensors(std::filesystem::path const& path,
                              std::vector<tensor_entry> const& tensors,
                              json const& metadata = json::object()) {
  write_safetensors(path, std::span<tensor_entry const>(tensors), metadata);
}

// ---------------------------------------------------------------------------------------------
// typed access
// ---------------------------------------------------------------------------------------------

/// The elements of `t` copied into a vector of `T` (the copy also aligns them).
/// @throws qtl::format_error when `T` is not the tensor's dtype: `dtype_of<T>` must equal it, or,
///         when `dtype_of<T>` is unknown (a storage type such as a half), `as` must be given and
///         equal it, with sizeof(T) == dtype_size.
template <class T>
std::vector<T> tensor_values(tensor_info const& t, std::optional<dtype> as = std::nullopt) {
  static_assert(std::is_trivially_copyable_v<T>, "tensor_values<T>: T must be trivially copyable");
  auto const want = as ? as : dtype_of<T>;
  if (!want || *want != t.type || sizeof(T) != dtype_size(t.type)) {
    throw format_error("tensor " + quote_name(t.name) + " has dtype " +
                       std::string(dtype_name(t.type)) + ", not " +
                       (want ? std::string(dtype_name(*want)) : "the requested element type") +
                       " of " + std::to_string(sizeof(T)) + " bytes");
  }
  std::vector<T> v(t.bytes.size() / sizeof(T));
  if (!v.empty()) {
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  }
  return v;
}

}  // namespace qtl::io
