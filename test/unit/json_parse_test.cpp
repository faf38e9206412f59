// qtl/io/json_parse.hpp: the linear-time parser gives nlohmann's document (key order kept), the two
// duplicate-key rules (reject: the key and its depth; last_wins: the first position with the last
// value, as Python's json.loads), the depth limit, syntax errors, and linear time on 200k keys.
#include <qtl/io/json_parse.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

namespace {

using qtl::io::duplicate_keys;
using qtl::io::json_parse_status;
using qtl::io::parse_json_linear;

}  // namespace

TEST_CASE("parse_json_linear gives nlohmann's document with the keys in file order", "[io][json]") {
  std::string const text = R"({"z": 1, "a": [true, null, 2.5, "s\u00e9"], "m": {"y": {}, "b": []}})";
  nlohmann::ordered_json got;
  REQUIRE(parse_json_linear(text, got, duplicate_keys::reject).ok());
  CHECK(got == nlohmann::ordered_json::parse(text));
  CHECK(got.dump() == R"({"z":1,"a":[true,null,2.5,"sé"],"m":{"y":{},"b":[]}})");
}

TEST_CASE("duplicate keys: reject names the key and its depth; last_wins keeps the first place", "[io][json]") {
  std::string const text = R"({"a": 1, "b": {"k": 1, "k": 2}, "a": 3})";
  nlohmann::ordered_json got;
  json_parse_status const s = parse_json_linear(text, got, duplicate_keys::reject);
  CHECK(s.what == json_parse_status::kind::duplicate_key);
  CHECK(s.key == "k");
  CHECK(s.depth == 2);
  REQUIRE(parse_json_linear(text, got, duplicate_keys::last_wins).ok());
  CHECK(got.dump() == R"({"a":3,"b":{"k":2}})");  // json.loads: {'a': 3, 'b': {'k': 2}}
  // a key that recurs past the short-object scan (16 keys) is found by the hash set too
  std::string many = "{";
  for (int i = 0; i != 40; ++i) {
    many += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  }
  many += "\"k7\": -1}";
  CHECK(parse_json_linear(many, got, duplicate_keys::reject).key == "k7");
  REQUIRE(parse_json_linear(many, got, duplicate_keys::last_wins).ok());
  CHECK(got.size() == 40);
  CHECK(got["k7"] == -1);
  CHECK(got.begin().key() == "k0");
}

TEST_CASE("depth limit and syntax errors", "[io][json]") {
  nlohmann::ordered_json got;
  std::string const deep = std::string(600, '[') + std::string(600, ']');
  CHECK(parse_json_linear(deep, got, duplicate_keys::reject).what == json_parse_status::kind::too_deep);
  CHECK(parse_json_linear(deep, got, duplicate_keys::reject, 600).ok());
  for (char const* bad : {"", "{", "{\"a\" 1}", "[1,]", "{} x", "nan", "\"\\x\""}) {
    INFO("text '" << bad << "'");
    json_parse_status const s = parse_json_linear(bad, got, duplicate_keys::reject);
    CHECK(s.what == json_parse_status::kind::syntax);
    CHECK_FALSE(s.message.empty());
  }
  CHECK_THROWS_WITH(qtl::io::parse_json_like_python<std::runtime_error>("[1,", "cfg.json: "),
                    Catch::StartsWith("cfg.json: not valid JSON: "));
  CHECK_THROWS_WITH(qtl::io::parse_json_like_python<std::runtime_error>(deep, "cfg.json: "),
                    "cfg.json: JSON nests deeper than 512 levels");
}

TEST_CASE("200k keys in one object parse in linear time", "[io][json]") {
  std::string text = "{";
  for (int i = 0; i != 200000; ++i) {
    text += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
  }
  text += "}";
  auto const t0 = std::chrono::steady_clock::now();
  nlohmann::ordered_json got;
  REQUIRE(parse_json_linear(text, got, duplicate_keys::reject).ok());
  double const s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(got.size() == 200000);
  CHECK(got["t199999"] == 199999);
  CHECK(s < 20.0);  // nlohmann's own insertion took over a minute (quadratic); linear is well under 1 s
}
