// qtl/scalar_type.hpp at run time: lookups by id and by name round-trip for every named type,
// unknown ids and names give nullopt, and the properties agree with their definitions.
#include <qtl/scalar_type.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

TEST_CASE("from_id and from_name round-trip every named type", "[scalar_type]") {
  std::set<std::uint64_t> ids;
  std::set<std::string> names;
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    INFO(t.name().view());
    REQUIRE(qtl::scalar_type::from_id(t.id()) == t);
    REQUIRE(qtl::scalar_type::from_name(t.name().view()) == t);
    // Names are std::string-free and NUL-terminated.
    CHECK(std::string(t.name().c_str()) == std::string(t.name().view()));
    ids.insert(t.id());
    names.insert(std::string(t.name().view()));
  }
  CHECK(ids.size() == 17);  // ids and names are unique
  CHECK(names.size() == 17);
  CHECK(qtl::scalar_type::from_name("bfloat16") == qtl::float16_e8m7);
  CHECK(qtl::scalar_type::from_name("float16") == qtl::float16_e5m10);
  CHECK(qtl::scalar_type::from_name("float8_e8m0fn") == qtl::float8_e8m0fnu);
}

TEST_CASE("unknown ids and names give nullopt", "[scalar_type]") {
  for (std::string const bad : {"", "uint4b", "uint4b16", "int3", "float8_e4m3fnu", "float4_e2m1fn", "half",
                                "Float16", "uint8b128\n", "kU4B8", "float8_e8m0"}) {
    INFO('"' << bad << '"');
    CHECK_FALSE(qtl::scalar_type::from_name(bad));
  }
  // from_id accepts exact ids only: a 1-bit neighbour of a named id is unknown, unless it is
  // itself the id of another named type (then it is that type).
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    for (int bit = 0; bit < 64; ++bit) {
      std::uint64_t const id = t.id() ^ (std::uint64_t{1} << bit);
      auto const found = qtl::scalar_type::from_id(id);
      CHECK((!found || found->id() == id));
    }
  }
  CHECK_FALSE(qtl::scalar_type::from_id(0));
  CHECK_FALSE(qtl::scalar_type::from_id(~std::uint64_t{0}));
}

TEST_CASE("properties agree with their definitions", "[scalar_type]") {
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    INFO(t.name().view());
    CHECK(t.size_bits() == t.exponent + t.mantissa + (t.is_signed ? 1 : 0));
    if (t.is_integer()) {
      // Every code 0 .. 2^bits-1 maps into [min, max] by subtracting the bias (or reading it signed).
      std::int64_t const codes = std::int64_t{1} << t.size_bits();
      std::int64_t const lo = t.is_signed ? -codes / 2 - t.bias : -t.bias;
      CHECK(t.min_int() == lo);
      CHECK(t.max_int() == lo + codes - 1);
      CHECK(t.max() == static_cast<double>(t.max_int()));
      CHECK(t.min() == static_cast<double>(t.min_int()));
      CHECK_FALSE(t.has_nans());
      CHECK_FALSE(t.has_infs());
    } else {
      CHECK(t.min() == (t.is_signed ? -t.max() : std::ldexp(1.0, -127)));
      CHECK(t.has_infs() == !t.finite_values_only);
    }
  }
}
