#pragma once
/// \file
/// Run-time values -> compile-time instantiations. A quantization config read at run time says
/// `bits: 4`, `group_size: 128` or `type: "uint4b8"`; kernels are templates. These functions map
/// the value onto one instantiation out of a supported set declared by the caller, and throw
/// `qtl::unsupported_error` naming the value and the set otherwise:
///
///   qtl::dispatch_bits<2, 4, 8>(bits, [&]<int B>() { run<B>(...); });
///   qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(type_or_id_or_name, [&](auto c) {
///     constexpr qtl::scalar_type T = decltype(c)::value;   // c is qtl::scalar_constant<T>
///   });
///   qtl::dispatch_group_size<32, 64, 128>(g, K, [&](auto gs) {
///     // gs is std::integral_constant<int, G> for G in the set, or an int (the generic path)
///   });
///   qtl::dispatch_name<qtl::convert::recipes>("--recipe", text, [&]<class R>() { run<R>(); });
///
/// Only the listed values are instantiated, so the list is the compile-time budget. Every
/// instantiation of `f` must return the same type; the dispatcher returns it. The message of the
/// error is built only on failure. Host only: these functions throw.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <qtl/error.hpp>
#include <qtl/group_size.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/type_list.hpp>

namespace qtl {

namespace detail {

template <auto V, auto... Rest>
inline constexpr auto first_value = V;

inline std::string hex_id(std::uint64_t id) {
  char buf[19] = "0x";
  int n = 2;
  bool started = false;
  for (int shift = 60; shift >= 0; shift -= 4) {
    unsigned const d = static_cast<unsigned>((id >> shift) & 0xFu);
    if (d != 0 || started || shift == 0) {
      buf[n++] = "0123456789abcdef"[d];
      started = true;
    }
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

template <auto... Values>
std::string int_set() {
  std::string s = "{";
  ((s += (s.size() > 1 ? ", " : "") + std::to_string(Values)), ...);
  return s + "}";
}

template <scalar_type... Types>
std::string type_set() {
  std::string s = "{";
  ((s += (s.size() > 1 ? ", " : "") + std::string(Types.name().view())), ...);
  return s + "}";
}

template <auto V, auto... Rest, class F>
decltype(auto) dispatch_int_rec(std::string_view what, long long value, std::string (*supported)(), F& f) {
  if (value == static_cast<long long>(V)) {
    return f.template operator()<V>();
  }
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_int_rec<Rest...>(what, value, supported, f);
  } else {
    throw unsupported_error(std::string(what) + " = " + std::to_string(value) + " is not supported; supported: " +
                            supported());
  }
}

template <scalar_type V, scalar_type... Rest, class F>
decltype(auto) dispatch_type_rec(scalar_type t, std::string (*supported)(), F& f) {
  if (t == V) {
    return f(scalar_constant<V>{});
  }
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_type_rec<Rest...>(t, supported, f);
  } else {
    throw unsupported_error("qtl::dispatch_scalar_type: scalar type " + std::string(t.name().view()) + " (id " +
                            hex_id(t.id()) + ") is not supported; supported: " + supported());
  }
}

// The specialised instantiation for a listed group size, else the run-time path f(int).
template <class R, int G, int... Rest, class F>
R group_size_rec(int group_size, F& f) {
  if (group_size == G) {
    return f(std::integral_constant<int, G>{});
  }
  if constexpr (sizeof...(Rest) > 0) {
    return group_size_rec<R, Rest...>(group_size, f);
  } else {
    return f(group_size);
  }
}

template <class List>
struct name_dispatch;
template <class T, class... Rest>
struct name_dispatch<type_list<T, Rest...>> {
  template <class F>
  static decltype(auto) run(std::string_view what, std::string_view name, F& f, std::string (*names)()) {
    static_assert(!name_of<T>.empty(), "qtl::dispatch_name: a type of the list has no qtl::name_of specialisation");
    if (names_match(name, name_of<T>)) {
      return f.template operator()<T>();
    }
    if constexpr (sizeof...(Rest) > 0) {
      return name_dispatch<type_list<Rest...>>::run(what, name, f, names);
    } else {
      throw value_error(std::string(what) + " = '" + std::string(name) + "' is not one of " + names());
    }
  }
};

}  // namespace detail

/// Calls `f.template operator()<V>()` for the `V` of `Values` equal to `value`; `what` names the
/// value in the error. @throws unsupported_error "<what> = <value> is not supported; supported: {…}"
template <auto... Values, class F>
decltype(auto) dispatch_int(std::string_view what, long long value, F&& f) {
  static_assert(sizeof...(Values) > 0, "qtl::dispatch_int: the supported set is empty; list at least one value");
  return detail::dispatch_int_rec<Values...>(what, value, &detail::int_set<Values...>, f);
}

/// Calls `f.template operator()<B>()` (an `int` template parameter) for the `B` of `Bits` equal to
/// `bits`. @throws unsupported_error "qtl::dispatch_bits: bits = 5 is not supported; supported: {2, 4, 8}"
template <int... Bits, class F>
decltype(auto) dispatch_bits(int bits, F&& f) {
  static_assert(sizeof...(Bits) > 0, "qtl::dispatch_bits: the supported set is empty; list at least one bit width");
  return detail::dispatch_int_rec<Bits...>("qtl::dispatch_bits: bits", bits, &detail::int_set<Bits...>, f);
}

/// Calls `f(scalar_constant<T>{})` for the `T` of `Types` equal to `type`.
/// @throws unsupported_error naming the type (name and id) and the supported set
template <scalar_type... Types, class F>
decltype(auto) dispatch_scalar_type(scalar_type type, F&& f) {
  static_assert(sizeof...(Types) > 0,
                "qtl::dispatch_scalar_type: the supported set is empty; list at least one scalar type");
  return detail::dispatch_type_rec<Types...>(type, &detail::type_set<Types...>, f);
}

/// As above, from a vLLM scalar type id (`scalar_type::id()`).
/// @throws unsupported_error for an id that names no known type, or a type outside the set
template <scalar_type... Types, class F>
decltype(auto) dispatch_scalar_type(std::uint64_t id, F&& f) {
  static_assert(sizeof...(Types) > 0,
                "qtl::dispatch_scalar_type: the supported set is empty; list at least one scalar type");
  std::optional<scalar_type> const t = scalar_type::from_id(id);
  if (!t) {
    throw unsupported_error("qtl::dispatch_scalar_type: scalar type id " + detail::hex_id(id) +
                            " names no known scalar type; supported: " + detail::type_set<Types...>());
  }
  return detail::dispatch_type_rec<Types...>(*t, &detail::type_set<Types...>, f);
}

/// As above, from a name (`scalar_type::from_name`: "uint4b8", "float8_e4m3fn", "bfloat16", …).
/// @throws unsupported_error for an unknown name, or a type outside the set
template <scalar_type... Types, class F>
decltype(auto) dispatch_scalar_type(std::string_view name, F&& f) {
  static_assert(sizeof...(Types) > 0,
                "qtl::dispatch_scalar_type: the supported set is empty; list at least one scalar type");
  std::optional<scalar_type> const t = scalar_type::from_name(name);
  if (!t) {
    throw unsupported_error("qtl::dispatch_scalar_type: scalar type name '" + std::string(name) +
                            "' names no known scalar type; supported: " + detail::type_set<Types...>());
  }
  return detail::dispatch_type_rec<Types...>(*t, &detail::type_set<Types...>, f);
}
/// (Disambiguates string literals.)
template <scalar_type... Types, class F>
decltype(auto) dispatch_scalar_type(char const* name, F&& f) {
  return dispatch_scalar_type<Types...>(std::string_view(name), std::forward<F>(f));
}

/// Group sizes along K, after the rule of `qtl/group_size.hpp` (-1 or ≥ K: one group per column,
/// i.e. K rows; below K: must divide K): calls `f(std::integral_constant<int, G>{})` when the
/// rows per group are one of `GroupSizes` (a specialised instantiation), else `f(int{rows})` —
/// the generic run-time path. A channelwise group size dispatches to `G = -1` when -1 is listed.
/// `f` is typically a generic lambda; `int(gs)` is the group size on both paths.
/// @throws unsupported_error when the group size is 0, below -1, or does not divide `k` (naming
///         both), when `k` is not positive, or when the rows per group reach 2^31
template <int... GroupSizes, class F>
decltype(auto) dispatch_group_size(long long group_size, long long k, F&& f) {
  static_assert(sizeof...(GroupSizes) > 0,
                "qtl::dispatch_group_size: the supported set is empty; list at least one group size");
  static_assert(((GroupSizes > 0 || GroupSizes == -1) && ...),
                "qtl::dispatch_group_size: group sizes must be positive, or -1 for one group per column");
  auto const fail = [&](std::string const& why) {
    return unsupported_error("qtl::dispatch_group_size: group size " + std::to_string(group_size) + " with K = " +
                             std::to_string(k) + " is not supported (" + why + "); supported: " +
                             detail::int_set<GroupSizes...>() +
                             " specialised, any positive divisor of K, or -1 or at least K (one group per column)");
  };
  group_size_result const r = normalize_group_size(group_size, k);
  switch (r.status) {
    case group_size_status::ok: break;
    case group_size_status::no_rows: throw fail("K must be positive");
    case group_size_status::not_positive: throw fail("a group size must be positive, or -1");
    case group_size_status::not_dividing: throw fail("it does not divide K");
  }
  if (r.rows > 0x7FFFFFFF) {
    throw fail("a group size must be below 2^31");
  }
  using R = decltype(f(std::integral_constant<int, detail::first_value<GroupSizes...>>{}));
  if constexpr (((GroupSizes == -1) || ...)) {
    if (is_channelwise_group_size(group_size, k)) {
      return f(std::integral_constant<int, -1>{});
    }
  }
  return detail::group_size_rec<R, GroupSizes...>(static_cast<int>(r.rows), f);
}

/// Calls `f.template operator()<T>()` for the `T` of `List` (a `type_list` of a family of
/// variants) whose `qtl::name_of<T>` is `name` (`qtl::names_match`: '-' and '_' alike); `what`
/// names the argument in the error. Unlike the
/// dispatchers above, the list is the whole vocabulary, not a compile-time subset of it: a name
/// outside it is a bad value.
/// @throws value_error "<what> = '<name>' is not one of {a, b, c}"
template <class List, class F>
decltype(auto) dispatch_name(std::string_view what, std::string_view name, F&& f) {
  static_assert(List::size > 0, "qtl::dispatch_name: the list is empty");
  return detail::name_dispatch<List>::run(what, name, f, &names_of<List>);
}

}  // namespace qtl
