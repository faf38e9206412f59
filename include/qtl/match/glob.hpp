#pragma once
/// \file
/// `qtl::glob_match`: Python's `fnmatch.fnmatchcase(name, pattern)` (what ModelOpt's exporter and
/// Quark's `exclude` lists mean), `constexpr`.
///
///   static_assert(qtl::glob_match("model.layers.*.mlp.*", "model.layers.3.mlp.gate_up_proj"));
///
/// Semantics (CPython 3.11 `fnmatch.translate`, whose regex is matched in full with DOTALL):
///   *        any run of characters, dots and newlines included
///   ?        one character
///   [seq]    one character of seq; ranges a-z; a ']' right after '[' or '[!' is a member;
///            backslash is an ordinary member; a reversed range is dropped (with its endpoints);
///            a '-' that cannot form a range is a member
///   [!seq]   one character not in seq
///   '[' without a closing ']' is an ordinary character; everything else matches itself.
/// CPython's quirks are kept: the class content is rewritten exactly as translate() does (so e.g.
/// "[z-a!b]" means "not b", as in CPython) and then read with qtl's regex class parser.
/// Bytes, not code points: a non-ASCII character is several bytes, so `?` consumes one byte of it;
/// a non-ASCII byte inside [...] throws qtl::regex_error. Case-sensitive (fnmatch.fnmatch on
/// POSIX is the same).
///
/// Cost: O(|text| x |pattern|) with the single-backtrack-point algorithm (every token but `*`
/// consumes exactly one character), no recursion, no heap.
///
/// `glob_to_regex(pattern)` writes the same test as a regex for `re.match` (so that many globs
/// run on one `qtl::regex_set`):
///
///   glob      model.layers.*.mlp.?[!0-9]
///   regex     model\x2elayers\x2e(?:.|\n)*\x2emlp\x2e(?:.|\n)[^\x30\x31...\x39]\Z
///             (letters, digits and '_' as they are, other bytes as \xhh; classes as the byte
///             sets glob_match reads; `\Z` anchors the end)

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <qtl/error.hpp>
#include <qtl/match/detail/regex_parser.hpp>

namespace qtl {

namespace detail::glob {

/// Longest [...] content accepted (the rewritten class must fit a fixed buffer).
inline constexpr std::size_t max_class = 256;

// Not constexpr on purpose: its name is the compile-time diagnostic.
inline void glob_character_class_is_too_long() {}
inline void glob_character_class_has_a_non_ascii_byte() {}

enum class kind : std::uint8_t { literal, any, set, never, star };

struct token {
  kind k;
  std::size_t len;  // pattern characters it spans
  unsigned char c;  // literal
  re::charset set;
};

/// Rewrites the content of a bracket expression as fnmatch.translate() does and reads it as a
/// regex class. `content` is what lies between '[' and the closing ']'.
constexpr token class_token(std::string_view content, std::size_t len) {
  // 1. chunks (a '-' that separates two chunks is a range), as translate() builds them; `sep`
  //    marks the separators.
  std::array<char, max_class + 2> buf{};
  std::array<bool, max_class + 2> sep{};
  std::size_t n = 0;
  auto const npos = std::string_view::npos;
  if (content.find('-') == npos) {
    for (char const c : content) {
      buf[n++] = c;
    }
  } else {
    std::size_t i = 0;
    std::size_t k = content[0] == '!' ? 2 : 1;
    while (true) {
      std::size_t const d = k < content.size() ? content.find('-', k) : npos;
      if (d == npos) {
        break;
      }
      for (std::size_t q = i; q != d; ++q) {
        buf[n++] = content[q];
      }
      sep[n] = true;
      buf[n++] = '-';
      i = d + 1;
      k = d + 3;
    }
    if (i == content.size()) {  // empty last chunk: the last separator is a literal '-'
      sep[n - 1] = false;
    } else {
      for (std::size_t q = i; q != content.size(); ++q) {
        buf[n++] = content[q];
      }
    }
    // 2. drop empty ranges (right to left), with their endpoints
    for (std::size_t s = n; s-- > 0;) {
      if (!sep[s]) {
        continue;
      }
      auto const lo = static_cast<unsigned char>(buf[s - 1]);
      auto const hi = static_cast<unsigned char>(buf[s + 1]);
      if (lo > hi) {
        for (std::size_t q = s - 1; q + 3 < n; ++q) {
          buf[q] = buf[q + 3];
          sep[q] = sep[q + 3];
        }
        n -= 3;
        s = s - 1;  // continue left of the removed range
      }
    }
  }
  // 3. escape (backslash, '-' that is not a range, & ~ |) into a regex class
  std::array<char, 2 * max_class + 8> out{};
  std::size_t m = 0;
  out[m++] = '[';
  std::size_t const body = m;
  for (std::size_t q = 0; q != n; ++q) {
    char const c = buf[q];
    if (sep[q]) {
      out[m++] = '-';
      continue;
    }
    if (c == '\\' || c == '-' || c == '&' || c == '~' || c == '|') {
      out[m++] = '\\';
    }
    out[m++] = c;
  }
  std::size_t const stuff_len = m - body;
  token t{kind::set, len, 0, re::empty_set()};
  if (stuff_len == 0) {
    t.k = kind::never;
    return t;
  }
  if (stuff_len == 1 && out[body] == '!') {
    t.k = kind::any;
    return t;
  }
  if (out[body] == '!') {
    out[body] = '^';
  } else if (out[body] == '^' || out[body] == '[') {
    for (std::size_t q = m; q > body; --q) {
      out[q] = out[q - 1];
    }
    out[body] = '\\';
    ++m;
  }
  out[m++] = ']';
  re::program<4, 2> prog;
  re::parse(std::string_view(out.data(), m), prog);
  if (prog.error != re::errc::none) {
    // The rewritten class is valid by construction except for non-ASCII bytes.
    if (std::is_constant_evaluated()) {
      glob_character_class_has_a_non_ascii_byte();
    }
    throw regex_error("qtl::glob_match: non-ASCII byte in a character class", 0);
  }
  t.set = prog.sets[0];
  return t;
}

/// The token that starts at pattern[p] (pattern[p] != '*').
constexpr token token_at(std::string_view pat, std::size_t p) {
  char const c = pat[p];
  if (c == '?') {
    return {kind::any, 1, 0, re::empty_set()};
  }
  if (c == '[') {
    std::size_t const i = p + 1;
    std::size_t j = i;
    if (j < pat.size() && pat[j] == '!') {
      ++j;
    }
    if (j < pat.size() && pat[j] == ']') {
      ++j;
    }
    while (j < pat.size() && pat[j] != ']') {
      ++j;
    }
    if (j < pat.size()) {
      if (j - i > max_class) {
        if (std::is_constant_evaluated()) {
          glob_character_class_is_too_long();
        }
        throw value_error("qtl::glob_match: a [...] class longer than 256 characters");
      }
      return class_token(pat.substr(i, j - i), j + 1 - p);
    }
  }
  return {kind::literal, 1, static_cast<unsigned char>(c), re::empty_set()};
}

constexpr bool token_matches(token const& t, unsigned char c) {
  switch (t.k) {
    case kind::literal: return t.c == c;
    case kind::any: return true;
    case kind::set: return t.set.test(c);
    default: return false;
  }
}

/// `\xhh` of an ASCII byte.
inline std::string hex_escape(unsigned char c) {
  char const* hex = "0123456789abcdef";
  return std::string{'\\', 'x', hex[c >> 4], hex[c & 0xF]};
}

/// A byte set as a regex class (`[\x61\x62]`, or `[^...]` of the ASCII bytes it lacks when it
/// holds every byte >= 0x80); nothing for a set that mixes bytes >= 0x80 (a class of ASCII
/// content never does).
inline std::optional<std::string> set_regex(re::charset const& set) {
  bool any_high = false;
  bool all_high = true;
  for (unsigned c = 0x80; c != 0x100; ++c) {
    bool const in = set.test(static_cast<unsigned char>(c));
    any_high = any_high || in;
    all_high = all_high && in;
  }
  if (any_high && !all_high) {
    return std::nullopt;
  }
  std::string out = any_high ? "[^" : "[";
  bool members = false;
  for (unsigned c = 0; c != 0x80; ++c) {
    if (set.test(static_cast<unsigned char>(c)) != any_high) {
      out += hex_escape(static_cast<unsigned char>(c));
      members = true;
    }
  }
  if (!members) {
    return any_high ? std::optional<std::string>("(?:.|\\n)") : std::nullopt;  // every byte; no byte
  }
  return out + "]";
}

}  // namespace detail::glob

/// The regex (Python `re` syntax, for `re.match`, i.e. `qtl::regex::match` or a `regex_set`)
/// that matches exactly the texts `glob_match(pattern, text)` accepts; nothing when the glob
/// cannot be written so (a non-ASCII byte, a class that matches no byte) or when `glob_match`
/// may throw for it (a class too long or with a non-ASCII byte): the caller then asks
/// `glob_match` itself.
inline std::optional<std::string> glob_to_regex(std::string_view pattern) {
  using namespace detail::glob;
  std::string out;
  std::size_t p = 0;
  try {
    while (p < pattern.size()) {
      if (pattern[p] == '*') {
        while (p < pattern.size() && pattern[p] == '*') {
          ++p;
        }
        out += "(?:.|\\n)*";
        continue;
      }
      token const tok = token_at(pattern, p);
      p += tok.len;
      switch (tok.k) {
        case kind::literal: {
          unsigned char const c = tok.c;
          if (c >= 0x80) {
            return std::nullopt;
          }
          bool const plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
          out += plain ? std::string(1, static_cast<char>(c)) : hex_escape(c);
          break;
        }
        case kind::any: out += "(?:.|\\n)"; break;
        case kind::set: {
          std::optional<std::string> const s = set_regex(tok.set);
          if (!s) {
            return std::nullopt;
          }
          out += *s;
          break;
        }
        default: return std::nullopt;  // never (a class of no byte), or a star (not reached)
      }
    }
  } catch (regex_error const&) {
    return std::nullopt;
  } catch (value_error const&) {
    return std::nullopt;
  }
  return out + "\\Z";
}

/// The longest run of literal characters of `pattern` (between `*`, `?` and [...] classes): every
/// text that `glob_match(pattern, text)` accepts contains it, so it can prefilter a glob that a
/// combined DFA handles badly (one that starts with `*`: a match may start anywhere).
///
///   glob      *layers.3.self_attn*[0-9]
///   literal    layers.3.self_attn
///
/// Reads a glob that `glob_to_regex` writes (so that no class throws).
inline std::string glob_required_literal(std::string_view pattern) {
  using namespace detail::glob;
  std::string best;
  std::string run;
  for (std::size_t p = 0; p < pattern.size();) {
    if (pattern[p] != '*') {
      token const tok = token_at(pattern, p);
      p += tok.len;
      if (tok.k == kind::literal) {
        run += static_cast<char>(tok.c);
        continue;
      }
    } else {
      ++p;
    }
    if (run.size() > best.size()) {
      best = run;
    }
    run.clear();
  }
  return run.size() > best.size() ? run : best;
}

/// fnmatch.fnmatchcase(text, pattern): whether the whole of `text` matches the glob `pattern`.
/// @throws qtl::regex_error for a non-ASCII byte inside [...]; qtl::value_error for a [...] longer
/// than 256 characters (compile errors in constant evaluation).
constexpr bool glob_match(std::string_view pattern, std::string_view text) {
  using namespace detail::glob;
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star_p = std::string_view::npos;  // pattern position after the last '*'
  std::size_t star_t = 0;                       // text position that '*' has absorbed up to
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      while (p < pattern.size() && pattern[p] == '*') {
        ++p;
      }
      star_p = p;
      star_t = t;
      continue;
    }
    if (p < pattern.size()) {
      token const tok = token_at(pattern, p);
      if (token_matches(tok, static_cast<unsigned char>(text[t]))) {
        p += tok.len;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) {
      return false;
    }
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

}  // namespace qtl
