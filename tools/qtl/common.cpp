// op_io and the small shared helpers of the qtl tool (see common.hpp).

#include "common.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

namespace qtl::tool {

std::string shown(std::string_view s, std::size_t limit) {
  std::string out = qtl::io::printable(s.substr(0, limit), limit, false);
  if (s.size() > limit) {
    out += "...[" + std::to_string(s.size() - limit) + " more bytes]";
  }
  return out;
}

namespace {

/// The code point of the UTF-8 sequence at s[i] and its length; {0xFFFD, 1} when the bytes there
/// are not valid UTF-8 (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF).
std::pair<char32_t, std::size_t> decode_utf8(std::string_view s, std::size_t i) {
  auto const b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char const c = b(0);
  std::size_t const len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  constexpr std::pair<char32_t, std::size_t> invalid{0xFFFD, 1};
  if (len == 0 || c > 0xF4 || i + len > s.size()) {
    return invalid;
  }
  char32_t cp = c & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) {
      return invalid;
    }
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  constexpr char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return invalid;
  }
  return {cp, len};
}

}  // namespace

std::string ascii_json(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  auto const escape = [&](char32_t unit) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(unit));
    out += buf;
  };
  for (std::size_t i = 0; i < json_text.size();) {
    if (static_cast<unsigned char>(json_text[i]) < 0x80) {
      out += json_text[i++];
      continue;
    }
    auto const [cp, len] = decode_utf8(json_text, i);
    if (cp >= 0x10000) {
      escape(0xD800 + ((cp - 0x10000) >> 10));
      escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      escape(cp);
    }
    i += len;
  }
  return out;
}

std::int64_t parse_group_size(std::string const& text) {
  std::int64_t v = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw usage_error("--group-size " + text + ": too large (a group size is -1 or a positive integer below 2^63)");
  }
  if (ec != std::errc() || end != text.data() + text.size() || (v != -1 && v <= 0)) {
    throw usage_error("--group-size " + text + ": expected -1 (one group per column) or a positive integer");
  }
  return v;
}

std::string dtype_list(std::initializer_list<dtype> types) {
  std::string s;
  std::size_t i = 0;
  for (dtype t : types) {
    if (i > 0) {
      s += i + 1 == types.size() ? " or " : ", ";
    }
    s += qtl::io::dtype_name(t);
    ++i;
  }
  return s;
}

op_io::op_io(std::string op, std::filesystem::path in, std::filesystem::path out)
    : op_(std::move(op)), out_path_(std::move(out)), in_(qtl::io::safetensors_file::open(in)) {}

std::string op_io::where(std::string_view tensor) const {
  return in_.path().string() + ": tensor '" + std::string(tensor) + "'";
}

tensor_info const* op_io::optional_tensor(std::string_view name, std::initializer_list<dtype> types,
                                          std::initializer_list<int> ranks) const {
  tensor_info const* t = in_.find(name);
  if (t == nullptr) {
    return nullptr;
  }
  if (std::find(types.begin(), types.end(), t->type) == types.end()) {
    throw data_error(where(name) + " has dtype " + std::string(qtl::io::dtype_name(t->type)) +
                     "; " + op_ + " needs " + dtype_list(types));
  }
  int const rank = static_cast<int>(t->shape.size());
  if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
    std::string want;
    for (int r : ranks) {
      want += (want.empty() ? "" : " or ") + std::to_string(r);
    }
    throw data_error(where(name) + " has shape " + qtl::io::shape_string(t->shape) + " (" +
                     std::to_string(rank) + " dimensions); " + op_ + " needs " + want +
                     " dimensions");
  }
  return t;
}

tensor_info const& op_io::tensor(std::string_view name, std::initializer_list<dtype> types,
                                 std::initializer_list<int> ranks) const {
  if (tensor_info const* t = optional_tensor(name, types, ranks)) {
    return *t;
  }
  throw data_error(in_.path().string() + ": has no tensor '" + std::string(name) + "', which " +
                   op_ + " needs (" + dtype_list(types) + ")");
}

tensor_info const& op_io::any_tensor(std::string_view name, int min_rank) const {
  tensor_info const* t = in_.find(name);
  if (t == nullptr) {
    throw data_error(in_.path().string() + ": has no tensor '" + std::string(name) + "', which " +
                     op_ + " needs");
  }
  if (static_cast<int>(t->shape.size()) < min_rank) {
    throw data_error(where(name) + " has shape " + qtl::io::shape_string(t->shape) + "; " + op_ +
                     " needs at least " + std::to_string(min_rank) + " dimensions");
  }
  return *t;
}

void op_io::add(qtl::io::tensor_entry e, std::shared_ptr<void const> keep) {
  outputs_.push_back(std::move(e));
  keep_.push_back(std::move(keep));
}

void op_io::emit_input(std::string name, tensor_info const& t) {
  qtl::io::tensor_entry e = t;
  e.name = std::move(name);
  add(std::move(e), nullptr);
}

void op_io::write() const {
  json meta = json::object();
  // Only "format": "pt" (transformers' loader refuses files without it): the safetensors writer
  // orders metadata keys by hash, so a second key would make its bytes differ from ours.
  meta["format"] = "pt";
  qtl::io::write_safetensors(out_path_, outputs_, meta);
}

std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text) {
  std::vector<std::int64_t> out;
  char const* p = text.data();
  char const* const end = p + text.size();
  while (true) {
    std::int64_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec == std::errc::result_out_of_range) {
      throw usage_error(flag + " " + text + ": " + std::string(p, next) + " is too large");
    }
    if (ec != std::errc() || v < 0) {
      throw usage_error(flag + " " + text + ": expected comma-separated non-negative integers");
    }
    out.push_back(v);
    p = next;
    if (p == end) {
      break;
    }
    if (*p != ',') {
      throw usage_error(flag + " " + text + ": expected comma-separated non-negative integers");
    }
    ++p;
  }
  return out;
}

}  // namespace qtl::tool
