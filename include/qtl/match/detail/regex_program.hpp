#pragma once
/// \file
/// The regex engine's compiled form (internal; the public API is `<qtl/match/regex.hpp>`; the
/// parser is `regex_parser.hpp`, its errors `regex_errors.hpp`).
///
/// A pattern is parsed, in one left-to-right pass and without recursion, into a Thompson-NFA
/// program held in fixed-capacity arrays (so the same code runs in constant evaluation, where
/// there is no heap, and at run time):
///
///   byte c        consume the byte c                         (x, y unused)
///   any           consume any byte but '\n'                   (Python's '.' without DOTALL)
///   set  x        consume a byte of sets[x]                   (256-bit byte set)
///   split x y     epsilon to x and to y                       (alternation, repetition)
///   jmp  x        epsilon to x
///   assert_at k   epsilon to pc+1 when anchor k holds here    (^ $ \A \Z \b \B)
///   look  x y     epsilon to x (the continuation) when the sub-program pc+1 .. (x-2) matches
///                 here (arg bit 0 clear: `(?=` `(?<=`) or does not (bit 0 set: `(?!` `(?<!`); a
///                 lookahead (bit 1 clear) matches a prefix of the rest of the text, a lookbehind
///                 (bit 1 set) the w bytes that end here; y is its index in the per-text result
///                 table
///   look_end w    end of a lookaround's sub-program; w (in x) is a lookbehind's width
///   match         the whole pattern matched
///
/// Only whether a match exists is computed, so greedy and lazy repetition compile alike and
/// capturing groups compile like `(?:...)`. A lookbehind must have a fixed width, as in Python
/// (the parser computes every group's width range as `sre_parse`'s `getwidth` does): its
/// sub-program is then run from w bytes back, and every way through it ends here.
///
/// Two kinds of rejection, as `errc_unsupported` tells them apart: a pattern Python's `re` rejects
/// too (`re.error`), and a construct Python accepts but this engine does not run (backreferences,
/// conditionals, atomic groups, possessive repeats, inline flags, non-ASCII characters) or a
/// pattern beyond its capacities. After such a construct the parser goes on checking the rest of
/// the pattern (a later `re.error` is reported as such), except after a conditional and the
/// verbose flag, which change how the rest would be read.
///
/// Emission works on the tail of the program: an atom is emitted, and a following quantifier or
/// `|` inserts a `split` in front of it and relocates jump targets (`insert`), or copies it for
/// counted repetition (`copy_tail`). Counted repetition is expanded, so `x{m,n}` costs about
/// n times x's size; the capacity bounds the result and overflow is an error, never a truncation.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <qtl/match/detail/regex_errors.hpp>

namespace qtl::detail::re {

inline constexpr std::int32_t none = -1;
inline constexpr std::uint64_t unbounded = ~std::uint64_t{0};

enum class op : std::uint8_t { byte, any, set, split, jmp, assert_at, look, look_end, match };

enum class anchor : std::uint8_t {
  begin,                 // ^ and \A (no MULTILINE): position 0
  end_or_final_newline,  // $: the end, or just before a '\n' that ends the text
  end,                   // \Z: the end
  word_boundary,         // \b (ASCII word characters)
  not_word_boundary,     // \B
};

/// One instruction. Deliberately without default member initialisers: a program's arrays are
/// then not zero-filled at run time (only the written prefix is ever read).
struct inst {
  op code;
  std::uint8_t arg;  // byte value, anchor kind, or lookahead negation
  std::int32_t x;
  std::int32_t y;
};

/// A set of bytes, one bit per byte value (bit c of w[c / 64]).
struct charset {
  std::uint64_t w[4];

  constexpr bool test(unsigned char c) const { return ((w[c >> 6] >> (c & 63)) & 1u) != 0; }
  constexpr void add(unsigned c) { w[c >> 6] |= std::uint64_t{1} << (c & 63); }
  constexpr void add_range(unsigned lo, unsigned hi) {
    for (unsigned c = lo; c <= hi; ++c) {
      add(c);
    }
  }
  constexpr void add_set(charset const& o) {
    for (int i = 0; i != 4; ++i) {
      w[i] |= o.w[i];
    }
  }
  constexpr void invert() {
    for (int i = 0; i != 4; ++i) {
      w[i] = ~w[i];
    }
  }
  constexpr bool equals(charset const& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
};

inline constexpr charset empty_set() { return charset{{0, 0, 0, 0}}; }

/// Python's \d, \w, \s on ASCII text (str patterns, default flags): \s includes \x1c-\x1f, which
/// str.isspace() calls whitespace (re.ASCII would not). Bytes >= 0x80 belong to none of them.
inline constexpr charset digit_set() {
  charset s = empty_set();
  s.add_range('0', '9');
  return s;
}
inline constexpr charset word_set() {
  charset s = empty_set();
  s.add_range('0', '9');
  s.add_range('a', 'z');
  s.add_range('A', 'Z');
  s.add('_');
  return s;
}
inline constexpr charset space_set() {
  charset s = empty_set();
  s.add_range('\t', '\r');  // \t \n \v \f \r
  s.add_range(0x1c, 0x1f);
  s.add(' ');
  return s;
}
constexpr bool is_word_byte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/// Pattern characters, as the parser reads them.
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_octal(char c) { return c >= '0' && c <= '7'; }
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}
constexpr bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_ascii(unsigned v) { return v < 0x80; }
/// Whether Python's int() might read `t` (digits, '_', signs, spaces; non-ASCII digits).
constexpr bool int_like(std::string_view t) {
  for (char const c : t) {
    if (!(is_digit(c) || c == '_' || c == '+' || c == '-' || c == ' ' || (c >= '\t' && c <= '\r') ||
          static_cast<unsigned char>(c) >= 0x80)) {
      return false;
    }
  }
  return true;
}

/// A read-only view of a compiled program, whatever its storage (fixed arrays or vectors).
struct program_view {
  inst const* code;
  std::int32_t size;
  charset const* sets;
  std::int32_t const* pred_begin;  // size + 1 offsets into preds
  std::int32_t const* preds;       // epsilon predecessors of each instruction
  std::int32_t n_looks;
  bool anchored;      // the program begins with \A / ^: a match can only start at 0
  bool nested_looks;  // a lookahead contains another
  std::int32_t look_cost;  // total size of the lookahead sub-programs
};

/// A compiled program with room for `Cap` instructions and `SetCap` byte sets.
template <std::size_t Cap, std::size_t SetCap>
struct program {
  static_assert(Cap >= 2 && Cap <= (std::size_t{1} << 24), "qtl::regex: program capacity out of range");
  std::array<inst, Cap> code;
  std::array<charset, SetCap> sets;
  std::array<std::int32_t, Cap + 1> pred_begin;
  std::array<std::int32_t, 2 * Cap> preds;
  std::int32_t size = 0;
  std::int32_t n_sets = 0;
  std::int32_t n_looks = 0;
  std::int32_t n_edges = 0;
  bool anchored = false;
  bool nested_looks = false;
  std::int32_t look_cost = 0;
  bool has_word_boundary = false;
  bool has_end_newline = false;
  errc error = errc::none;
  std::size_t error_pos = 0;
  bool capacity_exceeded = false;  // parsing stopped at `too_large` or `too_many_sets`

  constexpr program_view view() const {
    return {code.data(), size, sets.data(), pred_begin.data(), preds.data(), n_looks, anchored, nested_looks, look_cost};
  }
};

/// Moves the jump targets of `in` that lie past an insertion of `count` slots at `pos` (at `pos`
/// too when `inside`: the instruction itself moved).
constexpr void relocate_targets(inst& in, bool inside, std::int32_t pos, std::int32_t count) {
  auto fix = [&](std::int32_t& t) {
    if (t != none && (inside ? t >= pos : t > pos)) {
      t += count;
    }
  };
  switch (in.code) {
    case op::split: fix(in.x); fix(in.y); break;
    case op::jmp: fix(in.x); break;
    case op::look: fix(in.x); break;
    default: break;
  }
}

/// Whether a `look` instruction is negative (`(?!` `(?<!`) and whether it looks behind.
constexpr bool look_negated(inst const& look) { return (look.arg & 1u) != 0; }
constexpr bool look_behind(inst const& look) { return (look.arg & 2u) != 0; }
/// The width of the lookbehind at `pc` (held by its `look_end`).
constexpr std::int32_t lookbehind_width(inst const* code, std::int32_t pc) { return code[code[pc].x - 1].x; }

/// Calls f(target) for every epsilon successor of instruction pc (the edges the closure follows).
template <class F>
constexpr void for_each_epsilon(inst const& in, std::int32_t pc, F&& f) {
  switch (in.code) {
    case op::split: f(in.x); f(in.y); break;
    case op::jmp: f(in.x); break;
    case op::assert_at: f(pc + 1); break;
    case op::look: f(in.x); break;
    default: break;
  }
}

/// Numbers the lookaheads of a parsed program and builds its epsilon-predecessor lists (for the
/// backward passes).
template <class Prog>
constexpr void index_program(Prog& p) {
  std::int32_t const n = p.size;
  p.n_looks = 0;
  p.nested_looks = false;
  p.look_cost = 0;
  for (std::int32_t pc = 0; pc != n; ++pc) {
    inst& in = p.code[static_cast<std::size_t>(pc)];
    if (in.code == op::look) {
      in.y = p.n_looks++;
      p.look_cost += in.x - pc;
      for (std::int32_t q = pc + 1; q < in.x; ++q) {
        p.nested_looks = p.nested_looks || p.code[static_cast<std::size_t>(q)].code == op::look;
      }
    }
  }
  inst const& first = p.code[0];
  p.anchored = first.code == op::assert_at && first.arg == static_cast<std::uint8_t>(anchor::begin);
  for (std::int32_t k = 0; k <= n; ++k) {
    p.pred_begin[static_cast<std::size_t>(k)] = 0;
  }
  for (std::int32_t pc = 0; pc != n; ++pc) {
    for_each_epsilon(p.code[static_cast<std::size_t>(pc)], pc,
                     [&](std::int32_t t) { ++p.pred_begin[static_cast<std::size_t>(t + 1)]; });
  }
  for (std::int32_t k = 0; k != n; ++k) {
    p.pred_begin[static_cast<std::size_t>(k + 1)] += p.pred_begin[static_cast<std::size_t>(k)];
  }
  p.n_edges = p.pred_begin[static_cast<std::size_t>(n)];
  // Fill, using pred_begin[t] as the cursor, then shift back.
  for (std::int32_t pc = 0; pc != n; ++pc) {
    for_each_epsilon(p.code[static_cast<std::size_t>(pc)], pc, [&](std::int32_t t) {
      p.preds[static_cast<std::size_t>(p.pred_begin[static_cast<std::size_t>(t)]++)] = pc;
    });
  }
  for (std::int32_t k = n; k > 0; --k) {
    p.pred_begin[static_cast<std::size_t>(k)] = p.pred_begin[static_cast<std::size_t>(k - 1)];
  }
  p.pred_begin[0] = 0;
}

}  // namespace qtl::detail::re
