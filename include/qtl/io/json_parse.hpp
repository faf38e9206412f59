#pragma once
/// \file
/// JSON text to `nlohmann::ordered_json` in time linear in the text. nlohmann's own parser
/// inserts every key with a linear search of the object's earlier keys (ordered_map is a
/// vector), which is quadratic in the keys of one object: a 200k-tensor safetensors header took
/// over a minute, a 100k-entry `packed_modules_mapping` 10 s. This SAX handler appends each key
/// without a search and finds duplicates with a hash set (a linear scan below 16 keys).
///
/// Duplicate keys: `reject` stops at the first one (the safetensors header rule); `last_wins`
/// keeps the key at its first position with the last value, as Python's `json.loads` does (the
/// engines read configs with it). Nesting deeper than `max_depth` containers stops the parse.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace qtl::io {

/// What to do with a key an object already has.
enum class duplicate_keys : std::uint8_t { reject, last_wins };

/// Why `parse_json_linear` failed (`ok()` when it did not).
struct json_parse_status {
  enum class kind : std::uint8_t { ok, syntax, duplicate_key, too_deep } what = kind::ok;
  std::string message;  ///< the parser's message (syntax)
  std::string key;      ///< the duplicate key
  std::size_t depth = 0;  ///< containers open around the duplicate key (1: a top-level key)
  bool ok() const { return what == kind::ok; }
};

namespace detail {

/// Builds an ordered_json from SAX events (see the file comment).
class linear_json_builder {
 public:
  using ojson = nlohmann::ordered_json;
  using object_t = ojson::object_t;

  linear_json_builder(ojson& root, duplicate_keys dup, std::size_t max_depth, json_parse_status& status)
      : root_(root), dup_(dup), max_depth_(max_depth), status_(status) {}

  bool null() { return put(ojson(nullptr)); }
  bool boolean(bool v) { return put(ojson(v)); }
  bool number_integer(ojson::number_integer_t v) { return put(ojson(v)); }
  bool number_unsigned(ojson::number_unsigned_t v) { return put(ojson(v)); }
  bool number_float(ojson::number_float_t v, ojson::string_t const&) { return put(ojson(v)); }
  bool string(ojson::string_t& v) { return put(ojson(std::move(v))); }
  bool binary(ojson::binary_t& v) { return put(ojson(std::move(v))); }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(ojson::string_t& k) {
    frame& f = stack_.back();
    auto& obj = static_cast<object_t::Container&>(*f.value->get_ptr<object_t*>());
    std::size_t existing = npos;
    if (f.keys.empty() && obj.size() < 16) {
      for (std::size_t i = 0; i < obj.size(); ++i) {
        if (obj[i].first == k) {
          existing = i;
          break;
        }
      }
      if (existing == npos && obj.size() == 15) {
        for (std::size_t i = 0; i < obj.size(); ++i) {
          f.keys.emplace(obj[i].first, i);
        }
      }
    } else if (auto const it = f.keys.find(k); it != f.keys.end()) {
      existing = it->second;
    }
    if (existing != npos) {
      if (dup_ == duplicate_keys::reject) {
        status_.what = json_parse_status::kind::duplicate_key;
        status_.key = k;
        status_.depth = stack_.size();
        return false;
      }
      obj[existing].second = nullptr;
      pending_ = &obj[existing].second;
      return true;
    }
    if (!f.keys.empty()) {
      f.keys.emplace(k, obj.size());
    }
    obj.emplace_back(std::move(k), nullptr);
    pending_ = &obj.back().second;
    return true;
  }

  bool parse_error(std::size_t, std::string const&, nlohmann::detail::exception const& e) {
    if (status_.ok()) {
      status_.what = json_parse_status::kind::syntax;
      status_.message = e.what();
    }
    return false;
  }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  struct frame {
    ojson* value;
    std::unordered_map<std::string, std::size_t> keys;  // filled from 16 keys on
  };

  /// Where the next value goes: the root, the array on top, or the slot `key` made.
  ojson* slot() {
    if (stack_.empty()) {
      return &root_;
    }
    ojson* top = stack_.back().value;
    if (top->is_array()) {
      top->get_ptr<ojson::array_t*>()->emplace_back();
      return &top->get_ptr<ojson::array_t*>()->back();
    }
    return pending_;
  }
  bool put(ojson&& v) {
    *slot() = std::move(v);
    return true;
  }
  bool open(ojson&& v) {
    if (stack_.size() >= max_depth_) {
      status_.what = json_parse_status::kind::too_deep;
      return false;
    }
    ojson* s = slot();
    *s = std::move(v);
    stack_.push_back({s, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  ojson& root_;
  duplicate_keys dup_;
  std::size_t max_depth_;
  json_parse_status& status_;
  std::vector<frame> stack_;
  ojson* pending_ = nullptr;
};

}  // namespace detail

/// Parses `text` (one JSON value, nothing but whitespace after it) into `out`, in time linear in
/// its length. Returns the status; `out` is unspecified unless `ok()`.
inline json_parse_status parse_json_linear(std::string_view text, nlohmann::ordered_json& out, duplicate_keys dup,
                                           std::size_t max_depth = 512) {
  json_parse_status status;
  out = nullptr;
  detail::linear_json_builder builder(out, dup, max_depth, status);
  bool const ok = nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder,
                                                    nlohmann::ordered_json::input_format_t::json,
                                                    /*strict=*/true);
  if (!ok && status.ok()) {
    status.what = json_parse_status::kind::syntax;
    status.message = "parse stopped";
  }
  return status;
}

/// Like `parse_json_linear` with Python's duplicate rule; a problem throws `E` with the message
/// prefixed by `what` ("not valid JSON: ...", "nests deeper than 512 levels").
template <class E>
nlohmann::ordered_json parse_json_like_python(std::string_view text, std::string const& what) {
  nlohmann::ordered_json out;
  json_parse_status const s = parse_json_linear(text, out, duplicate_keys::last_wins);
  if (s.what == json_parse_status::kind::syntax) {
    throw E(what + "not valid JSON: " + s.message);
  }
  if (s.what == json_parse_status::kind::too_deep) {
    throw E(what + "JSON nests deeper than 512 levels");
  }
  return out;
}

}  // namespace qtl::io
