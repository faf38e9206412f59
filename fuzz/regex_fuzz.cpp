// libFuzzer target for qtl/match: the regex parser and both matchers, glob and module paths.
// Input: <pattern> '\0' <text> (no '\0': the whole input is the pattern, matched against itself).
// Properties checked (abort on violation):
//   * a pattern either compiles or throws qtl::regex_error (Python rejects it) or
//     qtl::regex_unsupported_error (Python runs it, QTL does not) — nothing else escapes, no
//     crash, no hang (the bound is O(text x program)); the one-shot functions throw the same;
//   * the DFA path of qtl::regex and the NFA of the one-shot re_* functions agree on every verb;
//   * verbs are consistent: fullmatch => match => search;
//   * with patterns separated by '\x1f', regex_set::first_match equals the first-match loop;
//   * glob_match and module_path_match do not crash (glob may throw for non-ASCII classes).
// Build (a separate clang build, outside Meson): clang++-14 -std=c++20 -fsanitize=fuzzer,address,undefined
//   -Iinclude fuzz/regex_fuzz.cpp -o regex_fuzz && ./regex_fuzz fuzz/corpus/regex
#include <qtl/match/glob.hpp>
#include <qtl/match/module_path.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

// The one-shot functions reject a pattern that qtl::regex rejected, with the same exception.
template <class E>
void expect_rejected(std::string_view pattern, std::string_view text) {
  try {
    (void)qtl::re_match(pattern, text);
  } catch (E const&) {
    return;
  }
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size > 4096) {
    return 0;
  }
  std::string_view const all(reinterpret_cast<char const*>(data), size);
  auto const cut = all.find('\0');
  std::string_view const pattern = all.substr(0, cut);
  std::string_view const text = cut == std::string_view::npos ? all : all.substr(cut + 1);
  if (pattern.size() > 512) {
    return 0;  // counted repeats expand; keep each run short
  }
  try {
    qtl::regex const r(pattern);
    bool const m = r.match(text);
    bool const f = r.fullmatch(text);
    bool const s = r.search(text);
    if ((f && !m) || (m && !s)) {
      std::abort();
    }
    if (m != qtl::re_match(pattern, text) || f != qtl::re_fullmatch(pattern, text) ||
        s != qtl::re_search(pattern, text)) {
      std::abort();
    }
  } catch (qtl::regex_error const&) {
    expect_rejected<qtl::regex_error>(pattern, text);  // rejected patterns are fine
  } catch (qtl::regex_unsupported_error const&) {
    expect_rejected<qtl::regex_unsupported_error>(pattern, text);
  }
  // Patterns separated by '\x1f': regex_set::first_match must equal the first-match loop.
  if (pattern.find('\x1f') != std::string_view::npos) {
    std::vector<std::string_view> parts;
    for (std::size_t b = 0;;) {
      auto const e = pattern.find('\x1f', b);
      parts.push_back(pattern.substr(b, e == std::string_view::npos ? e : e - b));
      if (e == std::string_view::npos) {
        break;
      }
      b = e + 1;
    }
    try {
      qtl::regex_set const set(parts);
      int expect = -1;
      for (std::size_t r = 0; r != set.size(); ++r) {
        if (set[r].match(text)) {
          expect = static_cast<int>(r);
          break;
        }
      }
      if (set.first_match(text) != expect) {
        std::abort();
      }
    } catch (qtl::regex_error const&) {
    } catch (qtl::regex_unsupported_error const&) {
    }
  }
  try {
    (void)qtl::glob_match(pattern, text);
  } catch (qtl::error const&) {
  }
  (void)qtl::module_path_match(pattern, text);
  return 0;
}
