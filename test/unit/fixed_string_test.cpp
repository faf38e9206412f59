// qtl/fixed_string.hpp: fixed_string as a template argument (deduction, size, view, the terminating
// NUL), static_string built in constant evaluation (append, append_int at the ends of long long's
// range) and at run time alike.
#include <qtl/fixed_string.hpp>

#include <catch2/catch.hpp>

#include <climits>
#include <string>
#include <string_view>

namespace {

template <qtl::fixed_string S>
constexpr std::string_view name_of() {
  return S.view();
}

static_assert(qtl::fixed_string("abc").size() == 3);
static_assert(name_of<"q_proj">() == "q_proj");
static_assert(name_of<"">().empty());
static_assert(qtl::fixed_string("a\0b").size() == 3);  // an embedded NUL is a character like any other
static_assert(std::string_view(qtl::fixed_string("xy")) == "xy");

constexpr qtl::static_string<64> built() {
  qtl::static_string<64> s("bits=");
  s.append_int(4).append(", min=").append_int(LLONG_MIN).append(", zero=").append_int(0);
  return s;
}
static_assert(built() == "bits=4, min=-9223372036854775808, zero=0");
static_assert(built().size() == std::string_view("bits=4, min=-9223372036854775808, zero=0").size());
static_assert(qtl::static_string<4>().size() == 0 && qtl::static_string<4>().c_str()[0] == '\0');
static_assert(qtl::static_string<20>().append_int(LLONG_MAX) == "9223372036854775807");
static_assert(qtl::static_string<3>().append_int(-12) == "-12");  // exactly at capacity

}  // namespace

TEST_CASE("static_string at run time equals std::to_string", "[fixed_string]") {
  for (long long const v : {0LL, 1LL, -1LL, 10LL, -10LL, 1234567890123LL, LLONG_MIN, LLONG_MAX}) {
    qtl::static_string<24> s;
    s.append_int(v);
    CHECK(std::string(s.view()) == std::to_string(v));
    CHECK(std::string(s.c_str()) == std::to_string(v));  // NUL-terminated after every append
  }
  qtl::static_string<8> t("ab");
  t.append("cd");
  CHECK(t == "abcd");
  CHECK(t.size() == 4);
}
