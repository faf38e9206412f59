// qtl/dispatch.hpp and qtl/type_list.hpp: each supported run-time value reaches its own
// instantiation; every other value throws qtl::unsupported_error (a name outside a family's list:
// qtl::value_error) whose message names the value and the supported set.
#include <qtl/dispatch.hpp>
#include <qtl/type_list.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace {

using Catch::Matchers::Contains;

// a family of three, for the list's walks
struct red {
  static constexpr int value = 1;
};
struct green_blue {
  static constexpr int value = 2;
};
struct unnamed {};
using colours = qtl::type_list<red, green_blue>;

}  // namespace

template <>
inline constexpr std::string_view qtl::name_of<red> = "red";
template <>
inline constexpr std::string_view qtl::name_of<green_blue> = "green-blue";

TEST_CASE("dispatch_bits instantiates the listed widths only", "[dispatch]") {
  for (int const bits : {2, 4, 8}) {
    int const got = qtl::dispatch_bits<2, 4, 8>(bits, []<int B>() { return B * 10; });
    CHECK(got == bits * 10);
  }
  int calls = 0;
  qtl::dispatch_bits<3>(3, [&]<int B>() {
    static_assert(B == 3);
    ++calls;
  });
  CHECK(calls == 1);
  for (int const bad : {0, 1, 3, 5, 16, -4}) {
    CHECK_THROWS_AS((qtl::dispatch_bits<2, 4, 8>(bad, []<int B>() { return B; })), qtl::unsupported_error);
  }
  CHECK_THROWS_WITH((qtl::dispatch_bits<2, 4, 8>(5, []<int B>() { return B; })),
                    "qtl::dispatch_bits: bits = 5 is not supported; supported: {2, 4, 8}");
  // unsupported_error is a qtl::error.
  CHECK_THROWS_AS((qtl::dispatch_bits<8>(4, []<int B>() {})), qtl::error);
}

TEST_CASE("dispatch_int names the value it dispatches on", "[dispatch]") {
  CHECK(qtl::dispatch_int<16, 32>("tile", 32, []<int T>() { return T + 1; }) == 33);
  CHECK_THROWS_WITH((qtl::dispatch_int<16, 32>("tile", 48, []<int T>() { return T; })),
                    "tile = 48 is not supported; supported: {16, 32}");
}

TEST_CASE("dispatch_scalar_type passes scalar_constant<T> for a type, an id or a name", "[dispatch]") {
  auto const size_of = [](auto c) {
    static_assert(qtl::is_scalar_constant_v<decltype(c)>);
    constexpr qtl::scalar_type T = decltype(c)::value;
    return T.size_bits() * 1000 + T.bias;
  };
  CHECK(qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(qtl::uint4b8, size_of) == 4008);
  CHECK(qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(qtl::uint8b128, size_of) == 8128);
  CHECK(qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(std::uint64_t{0x4000001000800}, size_of) == 8128);
  CHECK(qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>("uint4b8", size_of) == 4008);
  CHECK(qtl::dispatch_scalar_type<qtl::float16_e8m7>(std::string("bfloat16"), size_of) == 16000);
  CHECK(qtl::dispatch_scalar_type<qtl::float8_e8m0fnu>("float8_e8m0fn", size_of) == 8000);

  CHECK_THROWS_WITH((
      (qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(qtl::float8_e5m2, size_of))),
      "qtl::dispatch_scalar_type: scalar type float8_e5m2 (id 0x4000000010205) is not supported; supported: "
      "{uint4b8, uint8b128}");
  CHECK_THROWS_WITH((qtl::dispatch_scalar_type<qtl::uint4b8>(std::uint64_t{0x1234}, size_of)),
                    "qtl::dispatch_scalar_type: scalar type id 0x1234 names no known scalar type; supported: "
                    "{uint4b8}");
  CHECK_THROWS_WITH((qtl::dispatch_scalar_type<qtl::uint4b8, qtl::int4>("uint4b9", size_of)),
                    "qtl::dispatch_scalar_type: scalar type name 'uint4b9' names no known scalar type; supported: "
                    "{uint4b8, int4}");
  CHECK_THROWS_AS((qtl::dispatch_scalar_type<qtl::uint4b8>("int4", size_of)), qtl::unsupported_error);
  // A structurally different type with a known name's fields but another bias is not that type.
  constexpr qtl::scalar_type uint4b7 = {.mantissa = 4, .bias = 7};
  CHECK_THROWS_WITH((qtl::dispatch_scalar_type<qtl::uint4b8>(uint4b7, size_of)),
                    Contains("scalar type uint4b7 (id 0x40000000e0400) is not supported"));
}

TEST_CASE("dispatch_scalar_type with a void callable", "[dispatch]") {
  qtl::scalar_type seen{};
  for (qtl::scalar_type const t : qtl::named_scalar_types) {
    if (t.is_integer()) {
      qtl::dispatch_scalar_type<qtl::int4, qtl::uint4, qtl::int8, qtl::uint8, qtl::uint2b2, qtl::uint3b4,
                                qtl::uint4b8, qtl::uint8b128>(t, [&](auto c) { seen = decltype(c)::value; });
      CHECK(seen == t);
    }
  }
}

TEST_CASE("dispatch_group_size: listed sizes are specialised, other divisors of K take the run-time path",
          "[dispatch]") {
  auto const describe = [](auto gs) -> std::string {
    if constexpr (std::is_same_v<decltype(gs), int>) {
      return "dynamic " + std::to_string(gs);
    } else {
      return "static " + std::to_string(decltype(gs)::value);
    }
  };
  CHECK(qtl::dispatch_group_size<32, 64, 128>(128, 4096, describe) == "static 128");
  CHECK(qtl::dispatch_group_size<32, 64, 128>(32, 4096, describe) == "static 32");
  CHECK(qtl::dispatch_group_size<32, 64, 128>(256, 4096, describe) == "dynamic 256");
  CHECK(qtl::dispatch_group_size<32, 64, 128>(48, 96, describe) == "dynamic 48");
  CHECK(qtl::dispatch_group_size<32, 64, 128>(-1, 4096, describe) == "dynamic 4096");  // one group per column
  CHECK(qtl::dispatch_group_size<-1, 128>(-1, 4096, describe) == "static -1");
  CHECK(qtl::dispatch_group_size<32>(7, 7, describe) == "dynamic 7");

  CHECK_THROWS_WITH((qtl::dispatch_group_size<32, 64, 128>(48, 4096, describe)),
                    "qtl::dispatch_group_size: group size 48 with K = 4096 is not supported (it does not divide K); "
                    "supported: {32, 64, 128} specialised, any positive divisor of K, or -1 or at least K "
                    "(one group per column)");
  // A group size of at least K is one group per column, as in quantize_weights (qtl/group_size.hpp).
  CHECK(qtl::dispatch_group_size<32, 64, 128>(128, 100, describe) == "dynamic 100");
  CHECK(qtl::dispatch_group_size<-1, 128>(128, 100, describe) == "static -1");
  CHECK(qtl::dispatch_group_size<32, 64, 128>(128, 128, describe) == "static 128");
  CHECK_THROWS_WITH((qtl::dispatch_group_size<32>(0, 64, describe)),
                    Contains("group size 0 with K = 64 is not supported (a group size must be positive, or -1)"));
  CHECK_THROWS_WITH((qtl::dispatch_group_size<32>(-2, 64, describe)), Contains("group size -2 with K = 64"));
  CHECK_THROWS_WITH((qtl::dispatch_group_size<32>(32, 0, describe)), Contains("(K must be positive)"));
  CHECK_THROWS_AS((qtl::dispatch_group_size<32>(32, -64, describe)), qtl::unsupported_error);
}

TEST_CASE("dispatch_group_size with a void callable", "[dispatch]") {
  int sum = 0;
  for (int const g : {32, 64, 16, -1}) {
    qtl::dispatch_group_size<32, 64>(g, 128, [&](auto gs) { sum += static_cast<int>(gs); });
  }
  CHECK(sum == 32 + 64 + 16 + 128);
}

TEST_CASE("dispatch_group_size with K beyond 32 bits", "[dispatch]") {
  auto const id = [](auto gs) { return static_cast<long long>(static_cast<int>(gs)); };
  CHECK(qtl::dispatch_group_size<128>(128, 1LL << 33, id) == 128);
  CHECK(qtl::dispatch_group_size<128>(256, 1LL << 33, id) == 256);
  CHECK_THROWS_WITH((qtl::dispatch_group_size<128>(-1, 1LL << 33, id)), Contains("below 2^31"));
}

TEST_CASE("type_list: walked in order; names, '-' and '_' alike", "[dispatch][type_list]") {
  static_assert(colours::size == 2 && qtl::type_list<>::size == 0);
  static_assert(qtl::name_of<unnamed>.empty());
  std::string order;
  qtl::for_each_type<colours>([&]<class T>() { order += std::to_string(T::value); });
  CHECK(order == "12");
  CHECK(qtl::names_of<colours>() == "{red, green-blue}");
  static_assert(qtl::names_match("green_blue", "green-blue") && qtl::names_match("a-b", "a_b"));
  static_assert(!qtl::names_match("green", "green-blue") && !qtl::names_match("Red", "red") &&
                !qtl::names_match("green blue", "green-blue"));
  static_assert(qtl::has_name<colours>("green_blue") && !qtl::has_name<colours>(""));
}

TEST_CASE("dispatch_name reaches the named type of the list, or names the list", "[dispatch][type_list]") {
  for (auto const& [name, want] : {std::pair{"red", 1}, {"green-blue", 2}, {"green_blue", 2}}) {
    CHECK(qtl::dispatch_name<colours>("--colour", name, []<class T>() { return T::value; }) == want);
  }
  int calls = 0;
  qtl::dispatch_name<colours>("--colour", "red", [&]<class T>() { calls += T::value; });
  CHECK(calls == 1);
  for (char const* bad : {"", "blue", "RED", "red "}) {
    CHECK_THROWS_AS(qtl::dispatch_name<colours>("--colour", bad, []<class T>() { return 0; }), qtl::value_error);
  }
  CHECK_THROWS_WITH(qtl::dispatch_name<colours>("--colour", "blue", []<class T>() {}),
                    "--colour = 'blue' is not one of {red, green-blue}");
}
