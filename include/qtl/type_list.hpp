#pragma once
/// \file
/// A family of variants written once: a `type_list` of its types (`qtl::block_formats`,
/// `qtl::convert::recipes`), each type's run-time spelling in `name_of`, and the two walks every
/// consumer makes over it, at compile time and by name:
///
///   using block_formats = qtl::type_list<nvfp4, mxfp4, mxfp8>;        // qtl/element/fp4.hpp
///   template <> inline constexpr std::string_view qtl::name_of<nvfp4> = "nvfp4";
///
///   TEMPLATE_LIST_TEST_CASE("…", "[fp4]", qtl::block_formats) { using F = TestType; … }   // Catch2
///   qtl::for_each_type<qtl::block_formats>([]<class F>() { bind<F>(qtl::name_of<F>); });  // benchmarks, bindings
///   qtl::dispatch_name<qtl::block_formats>("--format", text, [&]<class F>() { run<F>(); });   // qtl/dispatch.hpp
///
/// A type added to a family's list reaches every test, benchmark, binding and flag that walks the
/// list; where it needs a rule of its own, the `static_assert` that ends each chain of rules stops
/// the build there.

#include <cstddef>
#include <string>
#include <string_view>

namespace qtl {

/// A list of types (a family of variants). Any `L<Ts...>` works with Catch2's
/// `TEMPLATE_LIST_TEST_CASE`; this one adds nothing but its size.
template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

/// The name by which a flag, a config or Python spells `T` ("nvfp4", "sglang-legacy"): specialised
/// beside each type that belongs to a family. Empty for a type that has none.
template <class T>
inline constexpr std::string_view name_of{};

/// Whether `a` and `b` spell the same name, '-' and '_' being the same letter (a flag's
/// `sglang-legacy` is Python's `sglang_legacy`).
constexpr bool names_match(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if ((a[i] == '_' ? '-' : a[i]) != (b[i] == '_' ? '-' : b[i])) {
      return false;
    }
  }
  return true;
}

namespace detail {
template <class List>
struct for_each_type_impl;
template <class... Ts>
struct for_each_type_impl<type_list<Ts...>> {
  template <class F>
  static constexpr void run(F& f) {
    (f.template operator()<Ts>(), ...);
  }
};
}  // namespace detail

/// Calls `f.template operator()<T>()` for each `T` of `List`, in the list's order.
template <class List, class F>
constexpr void for_each_type(F&& f) {
  detail::for_each_type_impl<List>::run(f);
}

/// The names of `List`'s types, "{a, b, c}" (for messages and help texts).
template <class List>
std::string names_of() {
  std::string s = "{";
  for_each_type<List>([&]<class T>() {
    static_assert(!name_of<T>.empty(), "qtl::names_of: a type of the list has no qtl::name_of specialisation");
    s += (s.size() > 1 ? ", " : "");
    s += name_of<T>;
  });
  return s + "}";
}

/// Whether `name` names a type of `List` (`names_match`).
template <class List>
constexpr bool has_name(std::string_view name) {
  bool found = false;
  for_each_type<List>([&]<class T>() { found = found || names_match(name, name_of<T>); });
  return found;
}

}  // namespace qtl
