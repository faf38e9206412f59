// qtl/io/safetensors.hpp: dtypes, the reader's validation of hostile files, the atomic writer,
// byte-identical round trips of every dtype, sharded checkpoints, and the golden-case loader.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>
#include <qtl/io/safetensors.hpp>

namespace fs = std::filesystem;
using qtl::io::dtype;
using qtl::io::json;
using Catch::Matchers::Contains;

namespace {

/// A fresh, empty folder under the system temp dir, removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("qtl_safetensors_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (auto const& e : fs::directory_iterator(path)) {
      names.push_back(e.path().filename().string());
    }
    return names;
  }
};

std::string read_bytes(fs::path const& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// Writes `header` (verbatim) with a length prefix `len` (default: its size) and `data`.
fs::path write_raw(fs::path const& p, std::string const& header, std::string const& data = "",
                   std::optional<std::uint64_t> len = std::nullopt) {
  std::uint64_t n = len.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>(n >> (8 * i));
  }
  bytes += header + data;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string tensor_json(std::string const& name, std::string const& dt, std::string const& shape,
                        std::uint64_t b, std::uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dt + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
}

std::span<std::byte const> as_bytes(std::string const& s) {
  return {reinterpret_cast<std::byte const*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE("dtype names, sizes and parsing agree for every dtype") {
  std::size_t const sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 8, 4, 2, 1, 1, 1, 1, 1};
  std::size_t i = 0;
  for (dtype t : qtl::io::all_dtypes) {
    CHECK(qtl::io::dtype_size(t) == sizes[i++]);
    CHECK(qtl::io::dtype_from_name(qtl::io::dtype_name(t)) == t);
  }
  CHECK(qtl::io::dtype_name(dtype::F8_E4M3) == "F8_E4M3");
  CHECK_FALSE(qtl::io::dtype_from_name("F4").has_value());
  CHECK_FALSE(qtl::io::dtype_from_name("f32").has_value());
  CHECK_FALSE(qtl::io::dtype_from_name("").has_value());
  STATIC_REQUIRE(qtl::io::dtype_of<float> == dtype::F32);
  STATIC_REQUIRE(qtl::io::dtype_of<std::int64_t> == dtype::I64);
  STATIC_REQUIRE(qtl::io::dtype_of<qtl::float8_e4m3fn_t> == dtype::F8_E4M3);
  STATIC_REQUIRE_FALSE(qtl::io::dtype_of<char const*>.has_value());
}

TEST_CASE("checked_numel: negative dimensions and 64-bit overflow, unless a dimension is zero") {
  using v = std::vector<std::int64_t>;
  CHECK(qtl::io::checked_numel(v{}) == 1u);
  CHECK(qtl::io::checked_numel(v{2, 3, 4}) == 24u);
  CHECK(qtl::io::checked_numel(v{1ll << 40, 1ll << 40}) == std::nullopt);
  CHECK(qtl::io::checked_numel(v{1ll << 40, 1ll << 40, 0}) == 0u);
  CHECK(qtl::io::checked_numel(v{2, -1}) == std::nullopt);
}

TEST_CASE("every dtype survives write -> read -> write byte-identically") {
  temp_dir dir;
  std::mt19937_64 rng(7);
  std::vector<std::string> storage;
  std::vector<qtl::io::tensor_entry> entries;
  std::vector<std::vector<std::int64_t>> const shapes = {{3, 5}, {}, {0, 4}, {2, 1, 3}};
  for (dtype t : qtl::io::all_dtypes) {
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      qtl::io::tensor_entry e;
      e.name = std::string(qtl::io::dtype_name(t)) + "." + std::to_string(s);
      e.type = t;
      e.shape = shapes[s];
      std::string bytes(e.numel() * qtl::io::dtype_size(t), '\0');
      for (auto& c : bytes) {
        c = static_cast<char>(rng());
      }
      storage.push_back(std::move(bytes));
      entries.push_back(std::move(e));
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].bytes = as_bytes(storage[i]);
  }
  json const meta = {{"format", "pt"}, {"note", "round trip"}};
  fs::path const a = dir.path / "a.safetensors";
  fs::path const b = dir.path / "b.safetensors";
  qtl::io::write_safetensors(a, entries, meta);

  auto const fa = qtl::io::safetensors_file::open(a);
  REQUIRE(fa.tensors().size() == entries.size());
  CHECK(fa.metadata() == meta);
  CHECK((8 + fa.header_size()) % 8 == 0);  // data section 8-aligned
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto const& t = fa.tensors()[i];
    INFO(t.name);
    CHECK(t.name == entries[i].name);  // header order kept
    CHECK(t.type == entries[i].type);
    CHECK(t.shape == entries[i].shape);
    CHECK(std::string(reinterpret_cast<char const*>(t.bytes.data()), t.bytes.size()) ==
          storage[i]);
    CHECK(fa.find(t.name) == &t);
  }
  std::vector<qtl::io::tensor_entry> again(fa.tensors().begin(), fa.tensors().end());
  qtl::io::write_safetensors(b, again, fa.metadata());
  CHECK(read_bytes(a) == read_bytes(b));
  CHECK(dir.files().size() == 2);  // no temporary left behind
}

TEST_CASE("tensor_values copies elements and checks the dtype") {
  temp_dir dir;
  std::vector<float> const f = {1.5f, -2.0f, 3.25f};
  std::vector<std::uint16_t> const h = {0x3c00, 0xc000};
  std::vector<qtl::io::tensor_entry> entries = {
      {"f", dtype::F32, {3}, std::as_bytes(std::span(f))},
      {"h", dtype::BF16, {2}, std::as_bytes(std::span(h))}};
  qtl::io::write_safetensors(dir.path / "t.safetensors", entries);
  auto const file = qtl::io::safetensors_file::open(dir.path / "t.safetensors");
  CHECK(qtl::test::tensor_values<float>(file, "f") == f);
  CHECK(qtl::test::tensor_values<std::uint16_t>(file, "h", dtype::BF16) == h);
  auto const hb = qtl::test::tensor_values<qtl::bfloat16_t>(file, "h");
  CHECK((hb.size() == 2 && hb[0].bits == 0x3c00 && hb[1].bits == 0xc000));
  CHECK_THROWS_AS(qtl::test::tensor_values<qtl::half_t>(file, "h"), qtl::format_error);
  CHECK_THROWS_AS(qtl::test::tensor_values<std::int32_t>(file, "f"), qtl::format_error);
  CHECK_THROWS_WITH(qtl::test::tensor_values<std::uint16_t>(file, "h"),
                    Contains("'h'") && Contains("BF16"));
  CHECK_THROWS_WITH(qtl::test::tensor_values<std::uint16_t>(file, "h", dtype::F16),
                    Contains("not F16"));
  CHECK_THROWS_WITH(qtl::test::tensor_values<float>(file, "nope"),
                    Contains("t.safetensors") && Contains("no tensor 'nope'"));
}

TEST_CASE("accepted: key order, zero-size tensors sharing offsets, 0-dim, padding, no tensors") {
  temp_dir dir;
  auto p = dir.path / "ok.safetensors";
  SECTION("offsets listed out of order") {
    write_raw(p, "{" + tensor_json("b", "U8", "[2]", 2, 4) + "," + tensor_json("a", "U8", "[2]", 0, 2) + "}",
              "abcd");
    auto f = qtl::io::safetensors_file::open(p);
    CHECK(f.tensors()[0].name == "b");
    CHECK(qtl::test::tensor_values<std::uint8_t>(f, "b") == std::vector<std::uint8_t>{'c', 'd'});
  }
  SECTION("zero-size tensors at shared offsets, including the end of the data") {
    write_raw(p, "{" + tensor_json("z1", "F32", "[0,3]", 0, 0) + "," +
                     tensor_json("z2", "I64", "[0]", 0, 0) + "," + tensor_json("a", "U8", "[4]", 0, 4) +
                     "," + tensor_json("z3", "F16", "[5,0]", 4, 4) + "}",
              "abcd");
    auto f = qtl::io::safetensors_file::open(p);
    CHECK(f.tensors().size() == 4);
    CHECK(f.at("z3").bytes.empty());
  }
  SECTION("a 0-dim tensor holds one element") {
    write_raw(p, "{" + tensor_json("s", "F32", "[]", 0, 4) + "}   ", std::string("\x00\x00\x80\x3f", 4));
    auto f = qtl::io::safetensors_file::open(p);
    CHECK(qtl::test::tensor_values<float>(f, "s") == std::vector<float>{1.0f});
    CHECK(f.at("s").shape.empty());
  }
  SECTION("only metadata") {
    write_raw(p, R"({"__metadata__":{"k":"v"}})");
    auto f = qtl::io::safetensors_file::open(p);
    CHECK(f.tensors().empty());
    CHECK(f.metadata()["k"] == "v");
  }
  SECTION("an empty header object") {
    write_raw(p, "{}");
    CHECK(qtl::io::safetensors_file::open(p).tensors().empty());
  }
}

TEST_CASE("hostile files are rejected with a format_error naming the file and the problem") {
  temp_dir dir;
  auto const p = dir.path / "bad.safetensors";
  auto const ok = "{" + tensor_json("a", "F32", "[2]", 0, 8) + "}";
  std::string const data8(8, 'x');
  struct hostile {
    char const* what;
    std::string header;
    std::string data;
    std::optional<std::uint64_t> len;
    char const* message;
  };
  std::vector<hostile> const cases = {
      {"header length past the end", ok, data8, 1000, "reaches past the end"},
      {"huge header length", ok, data8, 0xffffffffffffffffull, "exceeds the limit"},
      {"header length 100 MB + 1", ok, data8, 100'000'001, "exceeds the limit"},
      {"invalid JSON", "{\"a\": ", "", std::nullopt, "not valid JSON"},
      {"trailing garbage after JSON", ok + "x", data8, std::nullopt, "not valid JSON"},
      {"invalid UTF-8", "{\"\xff\":1}", "", std::nullopt, "not valid JSON"},
      {"header is an array", "[]", "", std::nullopt, "array, not an object"},
      {"header is a number", "12", "", std::nullopt, "number, not an object"},
      {"duplicate tensor name",
       "{" + tensor_json("a", "U8", "[1]", 0, 1) + "," + tensor_json("a", "U8", "[1]", 1, 2) + "}",
       "xy", std::nullopt, "key 'a' (a tensor name) more than once"},
      {"duplicate field", R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
       "x", std::nullopt, "key 'dtype' more than once"},
      {"deep nesting", std::string(100, '[') + std::string(100, ']'), "", std::nullopt,
       "nests deeper"},
      {"tensor not an object", R"({"a":[1,2]})", "", std::nullopt, "tensor 'a' is described by"},
      {"missing dtype", R"({"a":{"shape":[1],"data_offsets":[0,1]}})", "x", std::nullopt,
       "lacks dtype"},
      {"missing shape", R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", "x", std::nullopt,
       "lacks shape"},
      {"missing offsets", R"({"a":{"dtype":"U8","shape":[1]}})", "x", std::nullopt,
       "lacks data_offsets"},
      {"unsupported dtype", "{" + tensor_json("a", "F4", "[2]", 0, 1) + "}", "x", std::nullopt,
       "unsupported dtype 'F4'"},
      {"dtype not a string", R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", "x",
       std::nullopt, "dtype is not a string"},
      {"negative dimension", "{" + tensor_json("a", "U8", "[-1]", 0, 0) + "}", "", std::nullopt,
       "not an integer in [0, 2^63)"},
      {"fractional dimension", "{" + tensor_json("a", "U8", "[1.5]", 0, 1) + "}", "x",
       std::nullopt, "not an integer"},
      {"dimension too large", "{" + tensor_json("a", "U8", "[18446744073709551616]", 0, 1) + "}",
       "x", std::nullopt, "not an integer"},
      {"shape overflows 64 bits", "{" + tensor_json("a", "F32", "[4294967296,4294967296]", 0, 4) + "}",
       "xxxx", std::nullopt, "more bytes than 64 bits"},
      {"shape times dtype overflows", "{" + tensor_json("a", "F64", "[4611686018427387904]", 0, 8) + "}",
       "xxxxxxxx", std::nullopt, "more bytes than 64 bits"},
      {"shape not an array", R"({"a":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", "x",
       std::nullopt, "shape is not an array"},
      {"offsets of three", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "x",
       std::nullopt, "is not [begin, end]"},
      {"negative offset", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "x",
       std::nullopt, "is not [begin, end]"},
      {"reversed offsets", "{" + tensor_json("a", "U8", "[0]", 1, 0) + "}", "x", std::nullopt,
       "end before they begin"},
      {"offsets past the data", "{" + tensor_json("a", "F32", "[2]", 0, 8) + "}", "xxxx",
       std::nullopt, "reach past the data section of 4 bytes"},
      {"shape/dtype mismatch", "{" + tensor_json("a", "F32", "[2]", 0, 4) + "}", "xxxx",
       std::nullopt, "needs 8"},
      {"overlapping tensors",
       "{" + tensor_json("a", "U8", "[4]", 0, 4) + "," + tensor_json("b", "U8", "[4]", 2, 6) + "}",
       "xxxxxx", std::nullopt, "overlap"},
      {"identical offsets", "{" + tensor_json("a", "U8", "[4]", 0, 4) + "," + tensor_json("b", "U8", "[4]", 0, 4) + "}",
       "xxxx", std::nullopt, "overlap"},
      {"gap", "{" + tensor_json("a", "U8", "[2]", 0, 2) + "," + tensor_json("b", "U8", "[2]", 4, 6) + "}",
       "xxxxxx", std::nullopt, "gap of 2 bytes"},
      {"gap at the start", "{" + tensor_json("a", "U8", "[2]", 2, 4) + "}", "xxxx", std::nullopt,
       "gap of 2 bytes"},
      {"trailing bytes", ok, data8 + "yz", std::nullopt, "2 trailing bytes"},
      {"data but no tensors", "{}", "x", std::nullopt, "1 trailing bytes"},
      {"metadata not an object", R"({"__metadata__":[1]})", "", std::nullopt,
       "__metadata__ is not an object"},
      {"metadata value not a string", R"({"__metadata__":{"k":1}})", "", std::nullopt,
       "not a string"},
  };
  for (auto const& c : cases) {
    INFO(c.what);
    write_raw(p, c.header, c.data, c.len);
    CHECK_THROWS_AS(qtl::io::safetensors_file::open(p), qtl::format_error);
    CHECK_THROWS_WITH(qtl::io::safetensors_file::open(p),
                      Contains(p.string() + ": ") && Contains(c.message));
    try {
      qtl::io::safetensors_file::open(p);
    } catch (qtl::format_error const& e) {
      std::string const what = e.what();
      // Hostile bytes never reach a terminal raw: messages are printable ASCII.
      CHECK(std::all_of(what.begin(), what.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; }));
    }
  }
  SECTION("files too short, absent, or not files") {
    for (std::string bytes : {std::string(), std::string("\x02\x00\x00", 3), std::string(7, '\0')}) {
      std::ofstream(p, std::ios::binary) << bytes;
      CHECK_THROWS_WITH(qtl::io::safetensors_file::open(p), Contains("too short"));
    }
    CHECK_THROWS_WITH(qtl::io::safetensors_file::open(dir.path / "absent.safetensors"),
                      Contains("absent.safetensors: cannot open"));
    CHECK_THROWS_WITH(qtl::io::safetensors_file::open(dir.path), Contains("is a directory"));
  }
  SECTION("every truncation of a valid file is rejected") {
    std::vector<std::int32_t> v = {1, 2, 3};
    std::vector<qtl::io::tensor_entry> entries = {{"v", dtype::I32, {3}, std::as_bytes(std::span(v))}};
    auto const good = dir.path / "good.safetensors";
    qtl::io::write_safetensors(good, entries);
    std::string const bytes = read_bytes(good);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      INFO(n);
      std::ofstream(p, std::ios::binary) << bytes.substr(0, n);
      CHECK_THROWS_AS(qtl::io::safetensors_file::open(p), qtl::format_error);
    }
  }
}

TEST_CASE("the writer rejects bad tensors and never leaves a partial file") {
  temp_dir dir;
  std::vector<std::int32_t> v = {1, 2, 3};
  auto const bytes = std::as_bytes(std::span(v));
  auto const p = dir.path / "out.safetensors";
  using entries = std::vector<qtl::io::tensor_entry>;
  CHECK_THROWS_WITH(qtl::io::write_safetensors(p, entries{{"a", dtype::I32, {2}, bytes}}),
                    Contains("12 bytes do not hold shape [2] of I32"));
  CHECK_THROWS_WITH(qtl::io::write_safetensors(p, entries{{"a", dtype::I32, {3}, bytes},
                                                          {"a", dtype::I32, {3}, bytes}}),
                    Contains("'a' twice"));
  CHECK_THROWS_AS(qtl::io::write_safetensors(p, entries{{"__metadata__", dtype::I32, {3}, bytes}}),
                  qtl::value_error);
  CHECK_THROWS_AS(qtl::io::write_safetensors(p, entries{{"a", dtype::I32, {-3}, bytes}}),
                  qtl::value_error);
  CHECK_THROWS_WITH(qtl::io::write_safetensors(p, entries{}, json{{"k", 1}}),
                    Contains("not a string"));
  CHECK_THROWS_AS(qtl::io::write_safetensors(p, entries{{"\xff", dtype::I32, {3}, bytes}}),
                  qtl::value_error);
  CHECK(dir.files().empty());
  CHECK_THROWS_WITH(qtl::io::write_safetensors(dir.path / "no" / "such.safetensors",
                                               entries{{"a", dtype::I32, {3}, bytes}}),
                    Contains("such.safetensors: cannot create a temporary file"));
  // Replacing an existing file: the new content or nothing.
  std::ofstream(p) << "old";
  qtl::io::write_safetensors(p, entries{{"a", dtype::I32, {3}, bytes}});
  CHECK(qtl::io::safetensors_file::open(p).at("a").shape == std::vector<std::int64_t>{3});
  CHECK(dir.files() == std::vector<std::string>{"out.safetensors"});
}

TEST_CASE("sharded checkpoints through model.safetensors.index.json") {
  temp_dir dir;
  std::vector<float> a = {1, 2}, b = {3}, c = {4, 5, 6};
  using entries = std::vector<qtl::io::tensor_entry>;
  qtl::io::write_safetensors(dir.path / "model-00001-of-00002.safetensors",
                             entries{{"a", dtype::F32, {2}, std::as_bytes(std::span(a))},
                                     {"b", dtype::F32, {1}, std::as_bytes(std::span(b))}});
  qtl::io::write_safetensors(dir.path / "model-00002-of-00002.safetensors",
                             entries{{"c", dtype::F32, {3}, std::as_bytes(std::span(c))}});
  auto const index = dir.path / "model.safetensors.index.json";
  auto write_index = [&](std::string const& text) { std::ofstream(index) << text; };
  write_index(R"({"metadata":{"total_size":24},"weight_map":{
      "c":"model-00002-of-00002.safetensors","a":"model-00001-of-00002.safetensors",
      "b":"model-00001-of-00002.safetensors"}})");
  for (auto const& path : {dir.path, index}) {
    auto ck = qtl::io::safetensors_checkpoint::open(path);
    REQUIRE(ck.shards().size() == 2);
    REQUIRE(ck.tensors().size() == 3);
    CHECK(ck.tensors()[0].tensor->name == "c");  // shard order of first mention
    CHECK(ck.tensors()[0].shard == 0);
    CHECK(qtl::io::tensor_values<float>(*ck.find("a")) == a);
    CHECK(ck.metadata()["total_size"] == 24);
    CHECK(ck.find("zz") == nullptr);
  }
  auto single = qtl::io::safetensors_checkpoint::open(dir.path / "model-00002-of-00002.safetensors");
  CHECK(single.tensors().size() == 1);

  write_index(R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index), Contains("does not hold it"));
  write_index(R"({"weight_map":{"a":"model-00001-of-00002.safetensors"}})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index),
                    Contains("holds tensor 'b', which weight_map does not put there"));
  write_index(R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index), Contains("not a plain file name"));
  write_index(R"({"weight_map":{"a":"x.safetensors","a":"y.safetensors"}})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index), Contains("more than once"));
  write_index(R"({"weight_map":{"a":"missing.safetensors"}})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index),
                    Contains("missing.safetensors: cannot open"));
  write_index(R"({"weight_map":[]})");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index), Contains("weight_map"));
  write_index("{");
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(index), Contains("not valid JSON"));
  fs::remove(index);
  CHECK_THROWS_WITH(qtl::io::safetensors_checkpoint::open(dir.path), Contains("holds neither"));
}

TEST_CASE("every golden case opens, and the loader filters by op") {
  auto const all = qtl::test::golden_cases();
  CHECK(all.size() >= 100);
  for (auto const& c : all) {
    INFO(c.name);
    CHECK(c.name.find(c.op) != std::string::npos);
    CHECK_FALSE(c.expected.tensors().empty());
  }
  auto const packs = qtl::test::golden_cases("pack-cols");
  REQUIRE_FALSE(packs.empty());
  for (auto const& c : packs) {
    CHECK(c.op == "pack-cols");
    CHECK(c.params.contains("bits"));
    auto const q = qtl::test::tensor_values<std::int32_t>(c.in, "q_w");
    CHECK(static_cast<std::int64_t>(q.size()) == c.shape[0] * c.shape[1]);
  }
  CHECK_THROWS_AS(qtl::test::golden_cases("no-such-op"), qtl::error);
}

TEST_CASE("parse_json_linear: the same document as nlohmann's parser, duplicates by policy") {
  using qtl::io::duplicate_keys;
  using ojson = nlohmann::ordered_json;
  std::string const text =
      R"({"b": [1, {"x": null, "y": [true, false]}], "a": {"k": 1.5, "j": -3}, "c": "s", "d": 18446744073709551615})";
  ojson got;
  REQUIRE(qtl::io::parse_json_linear(text, got, duplicate_keys::reject).ok());
  CHECK(got == ojson::parse(text));
  CHECK(got.begin().key() == "b");  // file order kept
  // An object past the linear-scan threshold (16 keys) is checked through the hash set.
  std::string many = "{";
  for (int i = 0; i < 40; ++i) {
    many += (i > 0 ? "," : "") + std::string("\"k") + std::to_string(i) + "\":" + std::to_string(i);
  }
  REQUIRE(qtl::io::parse_json_linear(many + "}", got, duplicate_keys::reject).ok());
  CHECK(got == ojson::parse(many + "}"));
  for (std::string const& dup : {std::string("\"k3\":7"), std::string("\"k39\":7")}) {
    auto const s = qtl::io::parse_json_linear(many + "," + dup + "}", got, duplicate_keys::reject);
    CHECK(s.what == qtl::io::json_parse_status::kind::duplicate_key);
    CHECK(s.depth == 1);
    // Python's json.loads: the last value, at the first key's position.
    REQUIRE(qtl::io::parse_json_linear(many + "," + dup + "}", got, duplicate_keys::last_wins).ok());
    CHECK(got.size() == 40);
    std::string const key = dup.substr(1, dup.find('"', 1) - 1);
    CHECK(got[key] == 7);
    CHECK(std::next(got.begin(), std::stoi(key.substr(1))).key() == key);
  }
  auto const nested = qtl::io::parse_json_linear(R"({"a": {"x": 1, "x": 2}})", got, duplicate_keys::reject);
  CHECK(nested.key == "x");
  CHECK(nested.depth == 2);
  CHECK(qtl::io::parse_json_linear("[[[1]]]", got, duplicate_keys::reject, 2).what ==
        qtl::io::json_parse_status::kind::too_deep);
  CHECK(qtl::io::parse_json_linear("[[1]]", got, duplicate_keys::reject, 2).ok());
  CHECK(qtl::io::parse_json_linear("{\"a\": 1} x", got, duplicate_keys::reject).what ==
        qtl::io::json_parse_status::kind::syntax);
  CHECK(qtl::io::parse_json_linear("", got, duplicate_keys::reject).what == qtl::io::json_parse_status::kind::syntax);
}

TEST_CASE("header: a byte-order mark or a NUL byte is refused, space padding is not") {
  temp_dir dir;
  auto const p = dir.path / "h.safetensors";
  std::string const ok = "{" + tensor_json("s", "F32", "[]", 0, 4) + "}";
  std::string const data("\x00\x00\x80\x3f", 4);
  write_raw(p, "\xEF\xBB\xBF" + ok, data);
  CHECK_THROWS_WITH(qtl::io::safetensors_file::open(p), Contains("byte-order mark"));
  write_raw(p, ok + std::string(3, '\0'), data);
  CHECK_THROWS_WITH(qtl::io::safetensors_file::open(p), Contains("NUL byte"));
  write_raw(p, "  " + ok + " \n\t", data);
  CHECK(qtl::io::safetensors_file::open(p).tensors().size() == 1);
}
