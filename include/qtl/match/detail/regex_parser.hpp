#pragma once
/// \file
/// The regex engine's parser (internal): a pattern, in one left-to-right pass and without
/// recursion, into the program of `<qtl/match/detail/regex_program.hpp>` (its instruction set and
/// the way emission works are drawn there).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <qtl/match/detail/regex_errors.hpp>
#include <qtl/match/detail/regex_program.hpp>

namespace qtl::detail::re {

/// The parser: one pass, an explicit group stack (no recursion), output into a `program`.
template <class Prog>
class parser {
 public:
  constexpr parser(Prog& prog, std::string_view pattern) : p_(prog), s_(pattern) {}

  constexpr void run() {
    p_.size = 0;
    p_.n_sets = 0;
    p_.error = errc::none;
    p_.capacity_exceeded = false;
    stack_[0] = frame{};
    depth_ = 1;
    while (i_ < s_.size() && !v_.failed) {
      step();
    }
    if (!v_.failed) {
      if (depth_ > 1) {
        v_.fail(errc::missing_parenthesis, stack_[depth_ - 1].open_pos);
      } else {
        finish_alternation(stack_[0]);
        if (emit(inst{op::match, 0, none, none})) {
          index_program(p_);
        }
      }
    }
    v_.report_to(p_);
  }

 private:
  static constexpr std::size_t max_depth = 256;
  static constexpr std::size_t max_groups = 256;
  /// Python's MAXREPEAT: the upper bound of `*` and `+` in a width.
  static constexpr std::uint64_t max_repeat = 0xffffffffull;
  static constexpr std::uint64_t width_cap = std::uint64_t{1} << 62;  // widths saturate here

  /// The range of text lengths a subpattern matches, as Python's `getwidth` computes it (a
  /// lookaround counts 0, a backreference its group's width, `*` and `+` MAXREPEAT times).
  struct width {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
  };
  static constexpr std::uint64_t add_w(std::uint64_t a, std::uint64_t b) {
    return a + b >= width_cap ? width_cap : a + b;  // a, b <= width_cap: no overflow
  }
  static constexpr std::uint64_t mul_w(std::uint64_t a, std::uint64_t b) {
    if (a == 0 || b == 0) {
      return 0;
    }
    return a > width_cap / b ? width_cap : a * b;
  }

  enum class group_kind : std::uint8_t { root, capture, plain, look };
  struct frame {
    group_kind kind = group_kind::root;
    std::int32_t start = 0;      // first instruction of the group's body
    std::int32_t alt_start = 0;  // first instruction of the current alternative
    std::int32_t chain = none;   // pending `jmp`s to the group's end, linked through their y
    std::int32_t look_pc = none;  // the `look` instruction of a lookaround group
    std::size_t open_pos = 0;
    std::size_t group = 0;          // a capture group's number
    bool look_negative = false;
    bool look_behind = false;
    bool first_lookbehind = false;  // the outermost lookbehind (it set `lookbehind_groups_`)
    width alt{};                    // the current alternative so far
    width alt_before_last{};        // ... before its last item (a quantifier replaces that item)
    width done{~std::uint64_t{0}, 0};  // the finished alternatives: least lo, greatest hi
  };
  struct group_info {
    std::string_view name;  // empty for an unnamed group
    width w;
    bool closed;
  };
  enum class last : std::uint8_t { nothing, anchor, atom, repeat };

  Prog& p_;
  std::string_view s_;
  std::size_t i_ = 0;
  std::array<frame, max_depth> stack_{};
  std::size_t depth_ = 0;
  last last_ = last::nothing;
  std::int32_t last_start_ = 0;
  width last_width_{};
  bool top_item_ = false;  // the top level has an item or a '|' (global flags come before any)
  std::array<group_info, max_groups + 1> groups_{};  // by number, from 1
  std::size_t n_groups_ = 0;
  std::size_t lookbehind_groups_ = 0;  // inside a lookbehind: the number of its first group, else 0

  verdict v_;  // regex_errors.hpp: the error reported, by precedence

  constexpr std::int32_t capacity() const { return static_cast<std::int32_t>(p_.code.size()); }

  constexpr bool emit(inst in) {
    if (p_.size >= capacity()) {
      return v_.fail(errc::too_large, i_);
    }
    p_.code[static_cast<std::size_t>(p_.size++)] = in;
    return true;
  }

  // Opens `count` slots at `pos`. Instructions that move (they were at >= pos) keep pointing at
  // what they pointed at; instructions before pos that pointed at pos now point at the first new
  // slot (which is what a construct inserted in front of an atom needs: a jump to the atom's start
  // reaches the quantifier's split first).
  constexpr bool insert(std::int32_t pos, std::int32_t count) {
    if (p_.size + count > capacity()) {
      return v_.fail(errc::too_large, i_);
    }
    for (std::int32_t k = p_.size - 1; k >= pos; --k) {
      p_.code[static_cast<std::size_t>(k + count)] = p_.code[static_cast<std::size_t>(k)];
    }
    p_.size += count;
    for (std::int32_t k = 0; k != p_.size; ++k) {
      if (k >= pos && k < pos + count) {
        continue;
      }
      relocate_targets(p_.code[static_cast<std::size_t>(k)], k >= pos + count, pos, count);
    }
    for (std::int32_t k = pos; k != pos + count; ++k) {
      p_.code[static_cast<std::size_t>(k)] = inst{op::jmp, 0, k + 1, none};
    }
    return true;
  }

  // Appends a copy of [from, from + len), whose targets all lie in [from, from + len].
  constexpr bool copy_tail(std::int32_t from, std::int32_t len) {
    if (p_.size + len > capacity()) {
      return v_.fail(errc::too_large, i_);
    }
    std::int32_t const delta = p_.size - from;
    for (std::int32_t k = 0; k != len; ++k) {
      inst in = p_.code[static_cast<std::size_t>(from + k)];
      auto fix = [&](std::int32_t& t) {
        if (t != none && t >= from && t <= from + len) {
          t += delta;
        }
      };
      switch (in.code) {
        case op::split: fix(in.x); fix(in.y); break;
        case op::jmp: fix(in.x); break;
        case op::look: fix(in.x); break;
        default: break;
      }
      p_.code[static_cast<std::size_t>(p_.size++)] = in;
    }
    return true;
  }

  // x? over [q, q + len)
  constexpr bool make_optional(std::int32_t q, std::int32_t len) {
    if (!insert(q, 1)) {
      return false;
    }
    p_.code[static_cast<std::size_t>(q)] = inst{op::split, 0, q + 1, q + 1 + len};
    return true;
  }
  // x* over [q, size)
  constexpr bool make_star(std::int32_t q) {
    if (!insert(q, 1) || !emit(inst{op::jmp, 0, q, none})) {
      return false;
    }
    p_.code[static_cast<std::size_t>(q)] = inst{op::split, 0, q + 1, p_.size};
    return true;
  }
  // x+ over [q, size)
  constexpr bool make_plus(std::int32_t q) { return emit(inst{op::split, 0, q, p_.size + 1}); }

  // Applies {lo, hi} to the atom [p, size).
  constexpr bool repeat(std::int32_t p, std::uint64_t lo, std::uint64_t hi) {
    std::int32_t const len = p_.size - p;
    if (lo == 1 && hi == 1) {
      return true;
    }
    if (hi == 0) {  // x{0}: matches the empty string; drop the atom
      p_.size = p;
      return true;
    }
    // Size check before expanding (counts may be huge).
    std::uint64_t const copies = hi == unbounded ? (lo == 0 ? 1 : lo) : hi;
    std::uint64_t const need = copies * (static_cast<std::uint64_t>(len) + 2) + 2;
    if (need > static_cast<std::uint64_t>(capacity() - p)) {
      return v_.fail(errc::too_large, i_);
    }
    if (lo == 0) {
      if (hi == unbounded) {
        return make_star(p);
      }
      for (std::uint64_t k = 1; k < hi; ++k) {
        std::int32_t const q = p_.size;
        if (!copy_tail(p, len) || !make_optional(q, len)) {
          return false;
        }
      }
      return make_optional(p, len);
    }
    for (std::uint64_t k = 1; k < lo; ++k) {
      if (!copy_tail(p, len)) {
        return false;
      }
    }
    if (hi == unbounded) {
      return make_plus(p_.size - len);
    }
    for (std::uint64_t k = lo; k < hi; ++k) {
      std::int32_t const q = p_.size;
      if (!copy_tail(p, len) || !make_optional(q, len)) {
        return false;
      }
    }
    return true;
  }


  constexpr bool quantify(std::size_t at, std::uint64_t lo, std::uint64_t hi) {
    if (last_ == last::nothing || last_ == last::anchor) {
      return v_.fail(errc::nothing_to_repeat, at);
    }
    if (last_ == last::repeat) {
      return v_.fail(errc::multiple_repeat, at);
    }
    if (i_ < s_.size() && s_[i_] == '?') {
      ++i_;  // lazy: the same language, so the same program
    } else if (i_ < s_.size() && s_[i_] == '+') {
      v_.lack(errc::possessive, i_++);
    }
    if (!repeat(last_start_, lo, hi)) {
      return false;
    }
    frame& f = stack_[depth_ - 1];
    f.alt = {add_w(f.alt_before_last.lo, mul_w(last_width_.lo, lo)),
             add_w(f.alt_before_last.hi, mul_w(last_width_.hi, hi == unbounded ? max_repeat : hi))};
    last_ = last::repeat;
    return true;
  }

  // An item of width `w` was added to the current alternative (its instructions from `start`).
  constexpr void item(std::int32_t start, width w, last kind) {
    frame& f = stack_[depth_ - 1];
    f.alt_before_last = f.alt;
    f.alt = {add_w(f.alt.lo, w.lo), add_w(f.alt.hi, w.hi)};
    last_start_ = start;
    last_width_ = w;
    last_ = kind;
    top_item_ = top_item_ || depth_ == 1;
  }
  constexpr bool atom(inst in) {
    item(p_.size, {1, 1}, last::atom);
    return emit(in);
  }
  constexpr bool anchor_atom(anchor a) {
    item(p_.size, {0, 0}, last::anchor);
    return emit(inst{op::assert_at, static_cast<std::uint8_t>(a), none, none});
  }
  // Stands for a construct this engine lacks (after `lack`): parsing goes on with an item of the
  // construct's width; the program is never run.
  constexpr bool placeholder(width w) {
    item(p_.size, w, last::atom);
    return emit(inst{op::any, 0, none, none});
  }
  constexpr bool set_atom(charset const& cs) {
    std::int32_t idx = 0;
    while (idx != p_.n_sets && !p_.sets[static_cast<std::size_t>(idx)].equals(cs)) {
      ++idx;
    }
    if (idx == p_.n_sets) {
      if (static_cast<std::size_t>(p_.n_sets) == p_.sets.size()) {
        return v_.fail(errc::too_many_sets, i_);
      }
      p_.sets[static_cast<std::size_t>(p_.n_sets++)] = cs;
    }
    return atom(inst{op::set, 0, idx, none});
  }

  constexpr void finish_alternation(frame& f) {
    std::int32_t j = f.chain;
    while (j != none) {
      inst& in = p_.code[static_cast<std::size_t>(j)];
      std::int32_t const next = in.y;
      in.x = p_.size;
      in.y = none;
      j = next;
    }
    f.chain = none;
  }

  // The width of a finished group: over its alternatives.
  static constexpr width group_width(frame const& f) {
    return {f.done.lo < f.alt.lo ? f.done.lo : f.alt.lo, f.done.hi > f.alt.hi ? f.done.hi : f.alt.hi};
  }

  constexpr bool alternate() {
    frame& f = stack_[depth_ - 1];
    std::int32_t const a = f.alt_start;
    if (!insert(a, 1) || !emit(inst{op::jmp, 0, none, f.chain})) {
      return false;
    }
    f.chain = p_.size - 1;
    p_.code[static_cast<std::size_t>(a)] = inst{op::split, 0, a + 1, p_.size};
    f.alt_start = p_.size;
    f.done = group_width(f);
    f.alt = f.alt_before_last = {};
    last_ = last::nothing;
    top_item_ = top_item_ || depth_ == 1;
    return true;
  }

  /// A class endpoint whose code point is not known (`\N{name}`).
  static constexpr unsigned unknown_code_point = 0x110000;

  // The code point of the UTF-8 sequence whose first byte `lead` (>= 0x80) was just read; its
  // continuation bytes are consumed (a malformed sequence counts byte by byte, as Latin-1).
  constexpr unsigned utf8_code_point(unsigned char lead) {
    std::size_t const extra = lead >= 0xf0 ? 3 : lead >= 0xe0 ? 2 : lead >= 0xc0 ? 1 : 0;
    unsigned v = extra == 3 ? lead & 7u : extra == 2 ? lead & 15u : lead & 31u;
    for (std::size_t k = 0; k != extra; ++k) {
      if (i_ + k >= s_.size() || (static_cast<unsigned char>(s_[i_ + k]) & 0xc0u) != 0x80u) {
        return lead;
      }
      v = (v << 6) | (static_cast<unsigned char>(s_[i_ + k]) & 0x3fu);
    }
    i_ += extra;
    return extra == 0 ? lead : v;
  }

  // \xhh, \uhhhh, \Uhhhhhhhh after the letter; value in `out` (non-ASCII: lacking).
  constexpr bool hex_escape(std::size_t at, int digits, unsigned& out) {
    std::uint64_t v = 0;
    for (int k = 0; k != digits; ++k) {
      if (i_ >= s_.size() || hex_value(s_[i_]) < 0) {
        return v_.fail(errc::incomplete_escape, at);
      }
      v = v * 16 + static_cast<std::uint64_t>(hex_value(s_[i_++]));
    }
    if (v > 0x10ffff) {
      return v_.fail(errc::bad_escape, at);  // Python: chr() of it raises, reported as a bad escape
    }
    out = static_cast<unsigned>(v);
    if (!is_ascii(out)) {
      v_.lack(errc::non_ascii, at);
    }
    return true;
  }

  // \N{name} after the 'N': Python looks the name up in the Unicode database, which this engine
  // does not have.
  constexpr bool named_escape(std::size_t at) {
    if (i_ >= s_.size() || s_[i_] != '{') {
      return v_.fail(errc::bad_escape, at);  // "missing {"
    }
    std::size_t const name_begin = ++i_;
    while (i_ < s_.size() && s_[i_] != '}') {
      ++i_;
    }
    if (i_ >= s_.size() || i_ == name_begin) {
      return v_.fail(errc::bad_escape, at);  // "missing character name" / "unterminated name"
    }
    for (std::size_t k = name_begin; k != i_; ++k) {  // Unicode names: letters, digits, ' ', '-'
      char const c = s_[k];
      if (!(is_ascii_letter(c) || is_digit(c) || c == ' ' || c == '-')) {
        return v_.fail(errc::bad_escape, at);  // "undefined character name"
      }
    }
    ++i_;
    v_.lack(errc::named_unicode_escape, at);
    return true;
  }

  // The character `e` just read after a '\\': a non-ASCII one as its code point.
  constexpr unsigned escaped_char(std::size_t at, char e) {
    auto const c = static_cast<unsigned char>(e);
    if (c < 0x80) {
      return c;
    }
    v_.lack(errc::non_ascii, at);
    return utf8_code_point(c);
  }

  // After '\\' inside [...]: either a single character (`value`, a code point) or a class
  // (`is_set`, `cs`).
  constexpr bool class_escape(std::size_t at, unsigned& value, bool& is_set, charset& cs) {
    if (i_ >= s_.size()) {
      return v_.fail(errc::trailing_backslash, at);
    }
    char const e = s_[i_++];
    is_set = false;
    switch (e) {
      case 'd': is_set = true; cs = digit_set(); return true;
      case 'w': is_set = true; cs = word_set(); return true;
      case 's': is_set = true; cs = space_set(); return true;
      case 'D': is_set = true; cs = digit_set(); cs.invert(); return true;
      case 'W': is_set = true; cs = word_set(); cs.invert(); return true;
      case 'S': is_set = true; cs = space_set(); cs.invert(); return true;
      case 'a': value = 7; return true;
      case 'b': value = 8; return true;  // backspace inside a class, as in Python
      case 'f': value = 12; return true;
      case 'n': value = 10; return true;
      case 'r': value = 13; return true;
      case 't': value = 9; return true;
      case 'v': value = 11; return true;
      case 'x': return hex_escape(at, 2, value);
      case 'u': return hex_escape(at, 4, value);
      case 'U': return hex_escape(at, 8, value);
      case 'N': value = unknown_code_point; return named_escape(at);
      default: break;
    }
    if (is_octal(e)) {
      unsigned v = static_cast<unsigned>(e - '0');
      for (int k = 0; k != 2 && i_ < s_.size() && is_octal(s_[i_]); ++k) {
        v = v * 8 + static_cast<unsigned>(s_[i_++] - '0');
      }
      if (v > 0377) {
        return v_.fail(errc::octal_out_of_range, at);
      }
      if (!is_ascii(v)) {
        v_.lack(errc::non_ascii, at);
      }
      value = v;
      return true;
    }
    if (is_digit(e) || is_ascii_letter(e)) {
      return v_.fail(errc::bad_escape, at);
    }
    value = escaped_char(at, e);
    return true;
  }

  // One endpoint of a class item at the current position (not the end of the pattern).
  constexpr bool class_char(std::size_t item_pos, unsigned& value, bool& is_set, charset& cs) {
    auto const c = static_cast<unsigned char>(s_[i_++]);
    is_set = false;
    if (c == '\\') {
      return class_escape(item_pos, value, is_set, cs);
    }
    value = c;
    if (c >= 0x80) {
      v_.lack(errc::non_ascii, item_pos);
      value = utf8_code_point(c);
    }
    return true;
  }

  // Adds one item of a class: the ASCII part of it (a class with a non-ASCII member is lacking).
  static constexpr void add_item(charset& cs, unsigned value, bool is_set, charset const& set) {
    if (is_set) {
      cs.add_set(set);
    } else if (is_ascii(value)) {
      cs.add(value);
    }
  }

  constexpr bool parse_set(std::size_t at) {
    charset cs = empty_set();
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    bool first = true;
    while (true) {
      if (i_ >= s_.size()) {
        return v_.fail(errc::unterminated_set, at);
      }
      std::size_t const item_pos = i_;
      if (s_[i_] == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      unsigned lo = 0;
      bool lo_set = false;
      charset lo_cs = empty_set();
      if (!class_char(item_pos, lo, lo_set, lo_cs)) {
        return false;
      }
      if (i_ < s_.size() && s_[i_] == '-') {
        ++i_;
        if (i_ >= s_.size()) {
          return v_.fail(errc::unterminated_set, at);
        }
        if (s_[i_] == ']') {  // "a-]": 'a' and a literal '-'
          ++i_;
          add_item(cs, lo, lo_set, lo_cs);
          cs.add('-');
          break;
        }
        unsigned hi = 0;
        bool hi_set = false;
        charset hi_cs = empty_set();
        if (!class_char(i_, hi, hi_set, hi_cs)) {
          return false;
        }
        bool const known = lo != unknown_code_point && hi != unknown_code_point;
        if (lo_set || hi_set || (known && hi < lo)) {
          return v_.fail(errc::bad_range, item_pos);
        }
        if (is_ascii(lo)) {
          cs.add_range(lo, is_ascii(hi) ? hi : 0x7f);
        }
        if (!is_ascii(hi)) {
          v_.lack(errc::non_ascii, item_pos);  // a range reaching past ASCII
        }
      } else {
        add_item(cs, lo, lo_set, lo_cs);
      }
    }
    if (negate) {
      cs.invert();
    }
    return set_atom(cs);
  }

  // A literal character (a code point); a non-ASCII one was reported lacking where it was read.
  constexpr bool char_atom(unsigned v) {
    return is_ascii(v) ? atom(inst{op::byte, static_cast<std::uint8_t>(v), none, none}) : placeholder({1, 1});
  }

  // \1 .. \99 and (?P=name) of group `g`: Python's checks, then a construct this engine lacks.
  constexpr bool group_reference(std::size_t at, std::size_t g) {
    if (g > n_groups_) {
      return v_.fail(errc::invalid_group_reference, at);
    }
    group_info const& info = groups_[g];
    if (!info.closed) {
      return v_.fail(errc::open_group_reference, at);
    }
    if (lookbehind_groups_ != 0 && g >= lookbehind_groups_) {
      return v_.fail(errc::lookbehind_group_reference, at);
    }
    v_.lack(errc::backreference, at);
    return placeholder(info.w);
  }

  // After '\\' outside a class.
  constexpr bool parse_escape(std::size_t at) {
    if (i_ >= s_.size()) {
      return v_.fail(errc::trailing_backslash, at);
    }
    char const e = s_[i_++];
    switch (e) {
      case 'A': return anchor_atom(anchor::begin);
      case 'Z': return anchor_atom(anchor::end);
      case 'b': p_.has_word_boundary = true; return anchor_atom(anchor::word_boundary);
      case 'B': p_.has_word_boundary = true; return anchor_atom(anchor::not_word_boundary);
      case 'd': return set_atom(digit_set());
      case 'w': return set_atom(word_set());
      case 's': return set_atom(space_set());
      case 'D': { charset cs = digit_set(); cs.invert(); return set_atom(cs); }
      case 'W': { charset cs = word_set(); cs.invert(); return set_atom(cs); }
      case 'S': { charset cs = space_set(); cs.invert(); return set_atom(cs); }
      case 'a': return char_atom(7);
      case 'f': return char_atom(12);
      case 'n': return char_atom(10);
      case 'r': return char_atom(13);
      case 't': return char_atom(9);
      case 'v': return char_atom(11);
      case 'x': case 'u': case 'U': {
        unsigned v = 0;
        return hex_escape(at, e == 'x' ? 2 : e == 'u' ? 4 : 8, v) && char_atom(v);
      }
      case 'N': return named_escape(at) && placeholder({1, 1});
      default: break;
    }
    if (e == '0') {  // \0, \0o, \0oo
      unsigned v = 0;
      for (int k = 0; k != 2 && i_ < s_.size() && is_octal(s_[i_]); ++k) {
        v = v * 8 + static_cast<unsigned>(s_[i_++] - '0');
      }
      return char_atom(v);
    }
    if (is_digit(e)) {
      // Python: three octal digits make an octal escape, anything else is a group reference.
      if (i_ + 1 < s_.size() && is_octal(e) && is_octal(s_[i_]) && is_octal(s_[i_ + 1])) {
        unsigned const v = static_cast<unsigned>(e - '0') * 64 + static_cast<unsigned>(s_[i_] - '0') * 8 +
                           static_cast<unsigned>(s_[i_ + 1] - '0');
        i_ += 2;
        if (v > 0377) {
          return v_.fail(errc::octal_out_of_range, at);
        }
        if (!is_ascii(v)) {
          v_.lack(errc::non_ascii, at);
        }
        return char_atom(v);
      }
      std::size_t g = static_cast<std::size_t>(e - '0');
      if (i_ < s_.size() && is_digit(s_[i_])) {
        g = g * 10 + static_cast<std::size_t>(s_[i_++] - '0');
      }
      return group_reference(at, g);
    }
    if (is_ascii_letter(e)) {
      return v_.fail(errc::bad_escape, at);
    }
    return char_atom(escaped_char(at, e));
  }

  // A group name at i_, up to `end` (exclusive of it): Python's str.isidentifier on ASCII; a
  // non-ASCII name is taken as valid and reported lacking. Consumes the name and `end`.
  constexpr bool group_name(char end, std::string_view& name) {
    std::size_t const begin = i_;
    while (i_ < s_.size() && s_[i_] != end) {
      ++i_;
    }
    if (i_ >= s_.size() || i_ == begin) {
      return v_.fail(errc::bad_group_name, begin);  // "missing group name" / "unterminated name"
    }
    name = s_.substr(begin, i_ - begin);
    ++i_;
    for (std::size_t k = 0; k != name.size(); ++k) {
      char const c = name[k];
      if (static_cast<unsigned char>(c) >= 0x80) {
        v_.lack(errc::non_ascii, begin);
      } else if (!(c == '_' || is_ascii_letter(c) || (is_digit(c) && k != 0))) {
        return v_.fail(errc::bad_group_name, begin);
      }
    }
    return true;
  }

  // After "(?" and a first character in "aiLmstux-": Python's inline flags, `(?flags)` for the
  // whole pattern (only at its start) or `(?flags-flags:...)` for a group. Opens that group.
  constexpr bool inline_flags(std::size_t at, char c) {
    constexpr std::string_view letters = "iLmsxatu";  // Python's FLAGS
    auto const bit = [&](char f) { return 1u << letters.find(f); };
    auto const is_flag = [&](char f) { return letters.find(f) != std::string_view::npos; };
    unsigned const type_flags = bit('a') | bit('L') | bit('u');
    unsigned add = 0;
    unsigned del = 0;
    auto const next = [&](char& f) {
      if (i_ >= s_.size()) {
        return false;
      }
      f = s_[i_++];
      return true;
    };
    if (c != '-') {
      while (true) {
        if (c == 'L') {
          return v_.fail(errc::bad_inline_flags, at);  // "cannot use 'L' flag with a str pattern"
        }
        add |= bit(c);
        if ((bit(c) & type_flags) != 0 && (add & type_flags) != bit(c)) {
          return v_.fail(errc::bad_inline_flags, at);  // "flags 'a', 'u' and 'L' are incompatible"
        }
        if (!next(c)) {
          return v_.fail(errc::bad_inline_flags, at);  // "missing -, : or )"
        }
        if (c == ')' || c == '-' || c == ':') {
          break;
        }
        if (!is_flag(c)) {
          return v_.fail(errc::bad_inline_flags, at);  // "unknown flag"
        }
      }
    }
    // The verbose flag changes how the rest reads, and the template flag what compiles.
    bool const rest_unreadable = (add & (bit('x') | bit('t'))) != 0;
    if (c == ')') {
      if (top_item_ || depth_ != 1) {
        return v_.fail(errc::global_flags_not_at_start, at);
      }
      v_.lack(errc::inline_flags, at);
      return rest_unreadable ? v_.lack_and_stop(errc::inline_flags, at) : true;
    }
    if ((add & bit('t')) != 0) {
      return v_.fail(errc::bad_inline_flags, at);  // "cannot turn on global flag"
    }
    if (c == '-') {
      if (!next(c) || !is_flag(c)) {
        return v_.fail(errc::bad_inline_flags, at);  // "missing flag" / "unknown flag"
      }
      while (true) {
        if ((bit(c) & type_flags) != 0) {
          return v_.fail(errc::bad_inline_flags, at);  // "cannot turn off flags 'a', 'u' and 'L'"
        }
        del |= bit(c);
        if (!next(c)) {
          return v_.fail(errc::bad_inline_flags, at);  // "missing :"
        }
        if (c == ':') {
          break;
        }
        if (!is_flag(c)) {
          return v_.fail(errc::bad_inline_flags, at);  // "unknown flag" / "missing :"
        }
      }
    }
    if ((del & bit('t')) != 0 || (add & del) != 0) {
      return v_.fail(errc::bad_inline_flags, at);  // "cannot turn off global flag" / "turned on and off"
    }
    v_.lack(errc::inline_flags, at);
    if (rest_unreadable) {
      return v_.lack_and_stop(errc::inline_flags, at);
    }
    return push_group(frame{group_kind::plain}, at);
  }

  // A comment (?#...) after its '#': nothing, as in Python (a quantifier after it repeats the
  // item before it).
  constexpr bool comment(std::size_t at) {
    while (true) {
      if (i_ >= s_.size()) {
        return v_.fail(errc::unterminated_comment, at);
      }
      char const c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) {
          return v_.fail(errc::trailing_backslash, i_ - 1);
        }
        ++i_;  // an escaped ')' does not end it
      } else if (c == ')') {
        return true;
      }
    }
  }

  // A conditional (?(group)yes|no) after its "(?(": the group is checked as Python does where
  // that is decided here (a number may also name a group opened later), then parsing stops.
  constexpr bool conditional(std::size_t at) {
    std::size_t const begin = i_;
    while (i_ < s_.size() && s_[i_] != ')') {
      ++i_;
    }
    if (i_ >= s_.size() || i_ == begin) {
      return v_.fail(errc::bad_group_name, begin);  // "missing group name" / "unterminated name"
    }
    std::string_view const name = s_.substr(begin, i_ - begin);
    bool digits = true;
    bool identifier = !is_digit(name[0]);
    std::size_t number = 0;
    for (char const c : name) {
      digits = digits && is_digit(c);
      identifier = identifier && (c == '_' || is_ascii_letter(c) || is_digit(c));
      number = digits && number < max_groups + 1 ? number * 10 + static_cast<std::size_t>(c - '0') : number;
    }
    std::size_t g = max_groups + 1;  // not a group of the table: opened later, if at all
    if (identifier) {
      for (std::size_t k = 1; k <= n_groups_; ++k) {
        if (groups_[k].name == name) {
          g = k;
        }
      }
      if (g > n_groups_) {
        return v_.fail(errc::unknown_group_name, begin);
      }
    } else if (digits) {
      if (number == 0) {
        return v_.fail(errc::invalid_group_reference, begin);  // "bad group number"
      }
      g = number;
    } else if (!int_like(name)) {
      return v_.fail(errc::bad_group_name, begin);  // neither a name nor what Python's int() reads
    } else {
      return v_.lack_and_stop(errc::conditional, at);  // " 1", "+1", "1_0": int() reads some of these
    }
    if (lookbehind_groups_ != 0 && (g > n_groups_ || !groups_[g].closed)) {
      return v_.fail(errc::open_group_reference, begin);
    }
    if (lookbehind_groups_ != 0 && g >= lookbehind_groups_) {
      return v_.fail(errc::lookbehind_group_reference, begin);
    }
    return v_.lack_and_stop(errc::conditional, at);
  }

  constexpr bool push_group(frame f, std::size_t at) {
    if (depth_ == max_depth) {
      return v_.fail(errc::too_deep, at);
    }
    f.open_pos = at;
    if (f.kind == group_kind::look) {
      f.look_pc = p_.size;
      if (!emit(inst{op::look, static_cast<std::uint8_t>((f.look_behind ? 2 : 0) | (f.look_negative ? 1 : 0)),
                     none, none})) {
        return false;
      }
    }
    f.start = f.alt_start = p_.size;
    stack_[depth_++] = f;
    last_ = last::nothing;
    return true;
  }

  constexpr bool open_group(std::size_t at) {
    frame f{group_kind::capture};
    if (i_ < s_.size() && s_[i_] == '?') {
      ++i_;
      if (i_ >= s_.size()) {
        return v_.fail(errc::unexpected_end, at);
      }
      char const e = s_[i_++];
      if (e == ':') {
        f.kind = group_kind::plain;
      } else if (e == '=' || e == '!') {
        f.kind = group_kind::look;
        f.look_negative = e == '!';
      } else if (e == '<') {
        if (i_ >= s_.size()) {
          return v_.fail(errc::unexpected_end, at);
        }
        char const d = s_[i_++];
        if (d != '=' && d != '!') {
          return v_.fail(errc::unknown_extension, at);
        }
        f.kind = group_kind::look;
        f.look_negative = d == '!';
        f.look_behind = true;
        if (lookbehind_groups_ == 0) {
          lookbehind_groups_ = n_groups_ + 1;
          f.first_lookbehind = true;
        }
      } else if (e == 'P') {
        if (i_ >= s_.size()) {
          return v_.fail(errc::unexpected_end, at);
        }
        char const d = s_[i_++];
        std::string_view name;
        if (d == '<') {
          if (!group_name('>', name)) {
            return false;
          }
          for (std::size_t g = 1; g <= n_groups_; ++g) {
            if (groups_[g].name == name) {
              return v_.fail(errc::duplicate_group_name, at + 4);
            }
          }
          f.kind = group_kind::capture;
          return open_capture(f, name, at);
        }
        if (d != '=') {
          return v_.fail(errc::unknown_extension, at);
        }
        if (!group_name(')', name)) {
          return false;
        }
        for (std::size_t g = 1; g <= n_groups_; ++g) {
          if (groups_[g].name == name) {
            return group_reference(at, g);
          }
        }
        return v_.fail(errc::unknown_group_name, at);
      } else if (e == '#') {
        return comment(at);
      } else if (e == '>') {
        v_.lack(errc::atomic_group, at);
        f.kind = group_kind::plain;
      } else if (e == '(') {
        return conditional(at);
      } else if (e == '-' || std::string_view("iLmsxatu").find(e) != std::string_view::npos) {
        return inline_flags(at, e);
      } else {
        return v_.fail(errc::unknown_extension, at);
      }
    }
    if (f.kind == group_kind::capture) {
      return open_capture(f, {}, at);
    }
    return push_group(f, at);
  }

  constexpr bool open_capture(frame f, std::string_view name, std::size_t at) {
    if (n_groups_ == max_groups) {
      return v_.fail(errc::too_many_groups, at);
    }
    f.group = ++n_groups_;
    groups_[f.group] = group_info{name, {}, false};
    return push_group(f, at);
  }

  constexpr bool close_group(std::size_t at) {
    if (depth_ == 1) {
      return v_.fail(errc::unbalanced_parenthesis, at);
    }
    frame f = stack_[--depth_];
    finish_alternation(f);
    std::int32_t atom_start = f.start;
    width w = group_width(f);
    if (f.kind == group_kind::look) {
      // Python caps a width at MAXREPEAT - 1 (lo) and MAXREPEAT (hi) before comparing.
      std::uint64_t const lo = w.lo < max_repeat - 1 ? w.lo : max_repeat - 1;
      std::uint64_t const hi = w.hi < max_repeat ? w.hi : max_repeat;
      if (f.look_behind && lo != hi) {
        v_.defer(errc::variable_lookbehind, f.open_pos);
      }
      // (a width beyond the capacity only comes with a backreference: such a program never runs)
      std::int32_t const behind = f.look_behind && lo == hi && lo <= 0x7fffffff ? static_cast<std::int32_t>(lo) : 0;
      if (!emit(inst{op::look_end, 0, behind, none})) {
        return false;
      }
      p_.code[static_cast<std::size_t>(f.look_pc)].x = p_.size;
      atom_start = f.look_pc;
      if (f.first_lookbehind) {
        lookbehind_groups_ = 0;
      }
      w = {};
    }
    if (f.group != 0) {
      groups_[f.group].w = w;
      groups_[f.group].closed = true;
    }
    item(atom_start, w, last::atom);
    return true;
  }

  // '{' : a quantifier {m}, {m,}, {,n}, {m,n}, {,} — or, as in Python, a literal '{'.
  constexpr bool brace(std::size_t at) {
    std::size_t j = i_;
    auto number = [&](std::uint64_t& v, bool& present) {
      v = 0;
      present = false;
      while (j < s_.size() && is_digit(s_[j])) {
        present = true;
        v = v * 10 + static_cast<std::uint64_t>(s_[j++] - '0');
        if (v > 0xffffffffull) {
          v = 0x100000000ull;  // saturate: Python's limit is MAXREPEAT = 2**32 - 1
        }
      }
    };
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    bool has_lo = false;
    bool has_hi = false;
    bool literal = j < s_.size() && s_[j] == '}';
    if (!literal) {
      number(lo, has_lo);
      if (j < s_.size() && s_[j] == ',') {
        ++j;
        number(hi, has_hi);
      } else {
        hi = lo;
        has_hi = has_lo;
      }
      literal = j >= s_.size() || s_[j] != '}';
    }
    if (literal) {
      return atom(inst{op::byte, static_cast<std::uint8_t>('{'), none, none});
    }
    i_ = j + 1;
    std::uint64_t const min = has_lo ? lo : 0;
    std::uint64_t const max = has_hi ? hi : unbounded;
    if (min >= 0xffffffffull || (max != unbounded && max >= 0xffffffffull)) {
      return v_.fail(errc::repeat_too_large, at);
    }
    if (max < min) {
      return v_.fail(errc::bad_repeat_bounds, at);
    }
    return quantify(at, min, max);
  }


  constexpr void step() {
    std::size_t const at = i_;
    char const c = s_[i_++];
    if (static_cast<unsigned char>(c) >= 0x80) {
      v_.lack(errc::non_ascii, at);
      utf8_code_point(static_cast<unsigned char>(c));
      placeholder({1, 1});
      return;
    }
    switch (c) {
      case '(': open_group(at); return;
      case ')': close_group(at); return;
      case '|': alternate(); return;
      case '*': quantify(at, 0, unbounded); return;
      case '+': quantify(at, 1, unbounded); return;
      case '?': quantify(at, 0, 1); return;
      case '{': brace(at); return;
      case '.': atom(inst{op::any, 0, none, none}); return;
      case '[': parse_set(at); return;
      case '^': anchor_atom(anchor::begin); return;
      case '$': p_.has_end_newline = true; anchor_atom(anchor::end_or_final_newline); return;
      case '\\': parse_escape(at); return;
      default: atom(inst{op::byte, static_cast<std::uint8_t>(c), none, none}); return;
    }
  }
};

/// Parses `pattern` into `prog`; on failure prog.error and prog.error_pos say why and where.
template <class Prog>
constexpr void parse(std::string_view pattern, Prog& prog) {
  parser<Prog> ps(prog, pattern);
  ps.run();
}

}  // namespace qtl::detail::re
