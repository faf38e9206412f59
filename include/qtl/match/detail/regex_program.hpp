#pragma once
/// \file
/// The regex engine's compiled form and its parser (internal; the public API is
/// `<qtl/match/regex.hpp>`).
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
///   look  x y     epsilon to x (the continuation) when the sub-program pc+1 .. (x-2) matches a
///                 prefix of the rest of the text (arg 0: `(?=`), or does not (arg 1: `(?!`);
///                 y is the lookahead's index in the per-text result table
///   look_end      end of a lookahead sub-program
///   match         the whole pattern matched
///
/// Only whether a match exists is computed, so greedy and lazy repetition compile alike and
/// capturing groups compile like `(?:...)`.
///
/// Emission works on the tail of the program: an atom is emitted, and a following quantifier or
/// `|` inserts a `split` in front of it and relocates jump targets (`insert`), or copies it for
/// counted repetition (`copy_tail`). Counted repetition is expanded, so `x{m,n}` costs about
/// n times x's size; the capacity bounds the result and overflow is an error, never a truncation.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

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

/// Why a pattern was rejected. Each has a message (`errc_message`) and, for constant evaluation,
/// a non-constexpr function named after it (`report_in_constant_evaluation`).
enum class errc : std::uint8_t {
  none,
  unbalanced_parenthesis,
  missing_parenthesis,
  unterminated_set,
  bad_range,
  nothing_to_repeat,
  multiple_repeat,
  bad_repeat_bounds,
  repeat_too_large,
  bad_escape,
  incomplete_escape,
  trailing_backslash,
  octal_out_of_range,
  backreference,
  lookbehind,
  unsupported_group,
  bad_group_name,
  duplicate_group_name,
  too_many_names,
  possessive,
  non_ascii,
  unexpected_end,
  too_large,
  too_many_sets,
  too_deep,
};

/// The construct and the problem, as `qtl::regex_error` reports them.
constexpr char const* errc_message(errc e) {
  switch (e) {
    case errc::none: return "no error";
    case errc::unbalanced_parenthesis: return "')': unbalanced parenthesis";
    case errc::missing_parenthesis: return "'(': missing ), unterminated subpattern";
    case errc::unterminated_set: return "'[': unterminated character set";
    case errc::bad_range: return "'[a-b]': bad character range (reversed, or an endpoint is a class escape)";
    case errc::nothing_to_repeat: return "quantifier: nothing to repeat";
    case errc::multiple_repeat: return "quantifier: multiple repeat";
    case errc::bad_repeat_bounds: return "'{m,n}': min repeat greater than max repeat";
    case errc::repeat_too_large: return "'{m,n}': the repetition number is too large";
    case errc::bad_escape: return "'\\': bad escape (unknown letter or digit escape)";
    case errc::incomplete_escape: return "'\\x', '\\u' or '\\U': incomplete escape";
    case errc::trailing_backslash: return "'\\': bad escape (end of pattern)";
    case errc::octal_out_of_range: return "'\\ooo': octal escape value outside of range 0-0o377";
    case errc::backreference: return "'\\N' / '(?P=name)': backreferences are not supported";
    case errc::lookbehind: return "'(?<=' / '(?<!': lookbehind is not supported";
    case errc::unsupported_group:
      return "'(?...)': group extension not supported (only (?:...), (?P<name>...), (?=...), (?!...))";
    case errc::bad_group_name: return "'(?P<name>': bad or unterminated group name";
    case errc::duplicate_group_name: return "'(?P<name>': redefinition of group name";
    case errc::too_many_names: return "'(?P<name>': more than 128 named groups";
    case errc::possessive: return "'*+' / '++' / '?+' / '{m,n}+': possessive quantifiers are not supported";
    case errc::non_ascii: return "non-ASCII character or escape: only ASCII patterns are supported";
    case errc::unexpected_end: return "'(?': unexpected end of pattern";
    case errc::too_large: return "pattern: compiled program exceeds the instruction capacity";
    case errc::too_many_sets: return "'[...]': too many distinct character sets";
    case errc::too_deep: return "'(': groups nest too deeply";
  }
  return "unknown error";
}

// Not constexpr on purpose: reaching one of these in constant evaluation is the diagnostic, and the
// compiler prints the function's name ("call to non-'constexpr' function ...").
inline void regex_has_unbalanced_parenthesis() {}
inline void regex_is_missing_a_closing_parenthesis() {}
inline void regex_has_unterminated_character_set() {}
inline void regex_has_bad_character_range() {}
inline void regex_has_nothing_to_repeat() {}
inline void regex_has_multiple_repeat() {}
inline void regex_has_min_repeat_greater_than_max() {}
inline void regex_repetition_number_is_too_large() {}
inline void regex_has_bad_escape() {}
inline void regex_has_incomplete_hex_escape() {}
inline void regex_ends_with_a_backslash() {}
inline void regex_octal_escape_is_out_of_range() {}
inline void regex_backreferences_are_not_supported() {}
inline void regex_lookbehind_is_not_supported() {}
inline void regex_group_extension_is_not_supported() {}
inline void regex_has_bad_group_name() {}
inline void regex_redefines_a_group_name() {}
inline void regex_has_too_many_named_groups() {}
inline void regex_possessive_quantifiers_are_not_supported() {}
inline void regex_non_ascii_is_not_supported() {}
inline void regex_ends_unexpectedly() {}
inline void regex_program_exceeds_capacity() {}
inline void regex_has_too_many_character_sets() {}
inline void regex_groups_nest_too_deeply() {}
inline void regex_text_too_long_for_constant_evaluation() {}

constexpr void report_in_constant_evaluation(errc e) {
  switch (e) {
    case errc::none: return;
    case errc::unbalanced_parenthesis: regex_has_unbalanced_parenthesis(); return;
    case errc::missing_parenthesis: regex_is_missing_a_closing_parenthesis(); return;
    case errc::unterminated_set: regex_has_unterminated_character_set(); return;
    case errc::bad_range: regex_has_bad_character_range(); return;
    case errc::nothing_to_repeat: regex_has_nothing_to_repeat(); return;
    case errc::multiple_repeat: regex_has_multiple_repeat(); return;
    case errc::bad_repeat_bounds: regex_has_min_repeat_greater_than_max(); return;
    case errc::repeat_too_large: regex_repetition_number_is_too_large(); return;
    case errc::bad_escape: regex_has_bad_escape(); return;
    case errc::incomplete_escape: regex_has_incomplete_hex_escape(); return;
    case errc::trailing_backslash: regex_ends_with_a_backslash(); return;
    case errc::octal_out_of_range: regex_octal_escape_is_out_of_range(); return;
    case errc::backreference: regex_backreferences_are_not_supported(); return;
    case errc::lookbehind: regex_lookbehind_is_not_supported(); return;
    case errc::unsupported_group: regex_group_extension_is_not_supported(); return;
    case errc::bad_group_name: regex_has_bad_group_name(); return;
    case errc::duplicate_group_name: regex_redefines_a_group_name(); return;
    case errc::too_many_names: regex_has_too_many_named_groups(); return;
    case errc::possessive: regex_possessive_quantifiers_are_not_supported(); return;
    case errc::non_ascii: regex_non_ascii_is_not_supported(); return;
    case errc::unexpected_end: regex_ends_unexpectedly(); return;
    case errc::too_large: regex_program_exceeds_capacity(); return;
    case errc::too_many_sets: regex_has_too_many_character_sets(); return;
    case errc::too_deep: regex_groups_nest_too_deeply(); return;
  }
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

  constexpr program_view view() const {
    return {code.data(), size, sets.data(), pred_begin.data(), preds.data(), n_looks, anchored, nested_looks, look_cost};
  }
};

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

/// The parser: one pass, an explicit group stack (no recursion), output into a `program`.
template <class Prog>
class parser {
 public:
  constexpr parser(Prog& prog, std::string_view pattern) : p_(prog), s_(pattern) {}

  constexpr void run() {
    p_.size = 0;
    p_.n_sets = 0;
    p_.error = errc::none;
    stack_[0] = frame{group_kind::root, 0, 0, none, none, 0};
    depth_ = 1;
    while (i_ < s_.size() && !failed_) {
      step();
    }
    if (failed_) {
      return;
    }
    if (depth_ > 1) {
      fail(errc::missing_parenthesis, stack_[depth_ - 1].open_pos);
      return;
    }
    finish_alternation(stack_[0]);
    if (emit(inst{op::match, 0, none, none})) {
      finalize();
    }
  }

 private:
  static constexpr std::size_t max_depth = 256;
  enum class group_kind : std::uint8_t { root, capture, plain, look };
  struct frame {
    group_kind kind;
    std::int32_t start;      // first instruction of the group's body
    std::int32_t alt_start;  // first instruction of the current alternative
    std::int32_t chain;      // pending `jmp`s to the group's end, linked through their y
    std::int32_t look_pc;    // the `look` instruction of a lookahead group
    std::size_t open_pos;
  };
  enum class last : std::uint8_t { nothing, anchor, atom, repeat };

  Prog& p_;
  std::string_view s_;
  std::size_t i_ = 0;
  std::array<frame, max_depth> stack_{};
  std::size_t depth_ = 0;
  last last_ = last::nothing;
  std::int32_t last_start_ = 0;
  bool failed_ = false;
  static constexpr std::size_t max_names = 128;
  std::array<std::string_view, max_names> names_{};  // (?P<name>...) seen so far
  std::size_t n_names_ = 0;

  constexpr std::int32_t capacity() const { return static_cast<std::int32_t>(p_.code.size()); }

  constexpr bool fail(errc e, std::size_t pos) {
    if (!failed_) {
      failed_ = true;
      p_.error = e;
      p_.error_pos = pos;
    }
    return false;
  }

  constexpr bool emit(inst in) {
    if (p_.size >= capacity()) {
      return fail(errc::too_large, i_);
    }
    p_.code[static_cast<std::size_t>(p_.size++)] = in;
    return true;
  }

  // Relocates the jump targets of `in` (located at `at` before the move).
  static constexpr void relocate(inst& in, bool inside, std::int32_t pos, std::int32_t count) {
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

  // Opens `count` slots at `pos`. Instructions that move (they were at >= pos) keep pointing at
  // what they pointed at; instructions before pos that pointed at pos now point at the first new
  // slot (which is what a construct inserted in front of an atom needs: a jump to the atom's start
  // reaches the quantifier's split first).
  constexpr bool insert(std::int32_t pos, std::int32_t count) {
    if (p_.size + count > capacity()) {
      return fail(errc::too_large, i_);
    }
    for (std::int32_t k = p_.size - 1; k >= pos; --k) {
      p_.code[static_cast<std::size_t>(k + count)] = p_.code[static_cast<std::size_t>(k)];
    }
    p_.size += count;
    for (std::int32_t k = 0; k != p_.size; ++k) {
      if (k >= pos && k < pos + count) {
        continue;
      }
      relocate(p_.code[static_cast<std::size_t>(k)], k >= pos + count, pos, count);
    }
    for (std::int32_t k = pos; k != pos + count; ++k) {
      p_.code[static_cast<std::size_t>(k)] = inst{op::jmp, 0, k + 1, none};
    }
    return true;
  }

  // Appends a copy of [from, from + len), whose targets all lie in [from, from + len].
  constexpr bool copy_tail(std::int32_t from, std::int32_t len) {
    if (p_.size + len > capacity()) {
      return fail(errc::too_large, i_);
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
      return fail(errc::too_large, i_);
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
      return fail(errc::nothing_to_repeat, at);
    }
    if (last_ == last::repeat) {
      return fail(errc::multiple_repeat, at);
    }
    if (i_ < s_.size() && s_[i_] == '?') {
      ++i_;  // lazy: the same language, so the same program
    } else if (i_ < s_.size() && s_[i_] == '+') {
      return fail(errc::possessive, i_);
    }
    if (!repeat(last_start_, lo, hi)) {
      return false;
    }
    last_ = last::repeat;
    return true;
  }

  constexpr bool atom(inst in) {
    last_start_ = p_.size;
    last_ = last::atom;
    return emit(in);
  }
  constexpr bool anchor_atom(anchor a) {
    last_start_ = p_.size;
    last_ = last::anchor;
    return emit(inst{op::assert_at, static_cast<std::uint8_t>(a), none, none});
  }
  constexpr bool set_atom(charset const& cs) {
    std::int32_t idx = 0;
    while (idx != p_.n_sets && !p_.sets[static_cast<std::size_t>(idx)].equals(cs)) {
      ++idx;
    }
    if (idx == p_.n_sets) {
      if (static_cast<std::size_t>(p_.n_sets) == p_.sets.size()) {
        return fail(errc::too_many_sets, i_);
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

  constexpr bool alternate() {
    frame& f = stack_[depth_ - 1];
    std::int32_t const a = f.alt_start;
    if (!insert(a, 1) || !emit(inst{op::jmp, 0, none, f.chain})) {
      return false;
    }
    f.chain = p_.size - 1;
    p_.code[static_cast<std::size_t>(a)] = inst{op::split, 0, a + 1, p_.size};
    f.alt_start = p_.size;
    last_ = last::nothing;
    return true;
  }

  static constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static constexpr bool is_octal(char c) { return c >= '0' && c <= '7'; }
  static constexpr int hex_value(char c) {
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
  static constexpr bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

  // \xhh, \uhhhh, \Uhhhhhhhh after the letter; value in `out`.
  constexpr bool hex_escape(std::size_t at, int digits, unsigned& out) {
    std::uint64_t v = 0;
    for (int k = 0; k != digits; ++k) {
      if (i_ >= s_.size() || hex_value(s_[i_]) < 0) {
        return fail(errc::incomplete_escape, at);
      }
      v = v * 16 + static_cast<std::uint64_t>(hex_value(s_[i_++]));
    }
    if (v > 0x7f) {
      return fail(errc::non_ascii, at);
    }
    out = static_cast<unsigned>(v);
    return true;
  }

  // After '\\' inside [...]: either a single byte (`value`) or a class (`is_set`, `cs`).
  constexpr bool class_escape(std::size_t at, unsigned& value, bool& is_set, charset& cs) {
    if (i_ >= s_.size()) {
      return fail(errc::trailing_backslash, at);
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
      default: break;
    }
    if (is_octal(e)) {
      unsigned v = static_cast<unsigned>(e - '0');
      for (int k = 0; k != 2 && i_ < s_.size() && is_octal(s_[i_]); ++k) {
        v = v * 8 + static_cast<unsigned>(s_[i_++] - '0');
      }
      if (v > 0377) {
        return fail(errc::octal_out_of_range, at);
      }
      if (v > 0x7f) {
        return fail(errc::non_ascii, at);
      }
      value = v;
      return true;
    }
    if (is_digit(e) || is_ascii_letter(e)) {
      return fail(errc::bad_escape, at);
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      return fail(errc::non_ascii, at);
    }
    value = static_cast<unsigned char>(e);
    return true;
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
        return fail(errc::unterminated_set, at);
      }
      std::size_t const item_pos = i_;
      char const c = s_[i_++];
      if (c == ']' && !first) {
        break;
      }
      first = false;
      unsigned lo = 0;
      bool lo_set = false;
      charset lo_cs = empty_set();
      if (c == '\\') {
        if (!class_escape(item_pos, lo, lo_set, lo_cs)) {
          return false;
        }
      } else if (static_cast<unsigned char>(c) >= 0x80) {
        return fail(errc::non_ascii, item_pos);
      } else {
        lo = static_cast<unsigned char>(c);
      }
      if (i_ < s_.size() && s_[i_] == '-') {
        ++i_;
        if (i_ >= s_.size()) {
          return fail(errc::unterminated_set, at);
        }
        std::size_t const hi_pos = i_;
        char const d = s_[i_++];
        if (d == ']') {  // "a-]": 'a' and a literal '-'
          if (lo_set) {
            cs.add_set(lo_cs);
          } else {
            cs.add(lo);
          }
          cs.add('-');
          break;
        }
        unsigned hi = 0;
        bool hi_set = false;
        charset hi_cs = empty_set();
        if (d == '\\') {
          if (!class_escape(hi_pos, hi, hi_set, hi_cs)) {
            return false;
          }
        } else if (static_cast<unsigned char>(d) >= 0x80) {
          return fail(errc::non_ascii, hi_pos);
        } else {
          hi = static_cast<unsigned char>(d);
        }
        if (lo_set || hi_set || hi < lo) {
          return fail(errc::bad_range, item_pos);
        }
        cs.add_range(lo, hi);
      } else if (lo_set) {
        cs.add_set(lo_cs);
      } else {
        cs.add(lo);
      }
    }
    if (negate) {
      cs.invert();
    }
    return set_atom(cs);
  }

  // After '\\' outside a class.
  constexpr bool parse_escape(std::size_t at) {
    if (i_ >= s_.size()) {
      return fail(errc::trailing_backslash, at);
    }
    char const e = s_[i_++];
    auto byte_atom = [&](unsigned v) { return atom(inst{op::byte, static_cast<std::uint8_t>(v), none, none}); };
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
      case 'a': return byte_atom(7);
      case 'f': return byte_atom(12);
      case 'n': return byte_atom(10);
      case 'r': return byte_atom(13);
      case 't': return byte_atom(9);
      case 'v': return byte_atom(11);
      case 'x': case 'u': case 'U': {
        unsigned v = 0;
        return hex_escape(at, e == 'x' ? 2 : e == 'u' ? 4 : 8, v) && byte_atom(v);
      }
      default: break;
    }
    if (e == '0') {  // \0, \0o, \0oo
      unsigned v = 0;
      for (int k = 0; k != 2 && i_ < s_.size() && is_octal(s_[i_]); ++k) {
        v = v * 8 + static_cast<unsigned>(s_[i_++] - '0');
      }
      return byte_atom(v);
    }
    if (is_digit(e)) {
      // Python: three octal digits make an octal escape, anything else is a group reference.
      if (i_ + 1 < s_.size() && is_octal(e) && is_octal(s_[i_]) && is_octal(s_[i_ + 1])) {
        unsigned const v = static_cast<unsigned>(e - '0') * 64 + static_cast<unsigned>(s_[i_] - '0') * 8 +
                           static_cast<unsigned>(s_[i_ + 1] - '0');
        i_ += 2;
        if (v > 0377) {
          return fail(errc::octal_out_of_range, at);
        }
        if (v > 0x7f) {
          return fail(errc::non_ascii, at);
        }
        return byte_atom(v);
      }
      return fail(errc::backreference, at);
    }
    if (is_ascii_letter(e)) {
      return fail(errc::bad_escape, at);
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      return fail(errc::non_ascii, at);
    }
    return byte_atom(static_cast<unsigned char>(e));
  }

  constexpr bool open_group(std::size_t at) {
    if (depth_ == max_depth) {
      return fail(errc::too_deep, at);
    }
    group_kind kind = group_kind::capture;
    bool negative = false;
    if (i_ < s_.size() && s_[i_] == '?') {
      ++i_;
      if (i_ >= s_.size()) {
        return fail(errc::unexpected_end, at);
      }
      char const e = s_[i_++];
      if (e == ':') {
        kind = group_kind::plain;
      } else if (e == '=' || e == '!') {
        kind = group_kind::look;
        negative = e == '!';
      } else if (e == '<') {
        if (i_ < s_.size() && (s_[i_] == '=' || s_[i_] == '!')) {
          return fail(errc::lookbehind, at);
        }
        return fail(errc::unsupported_group, at);
      } else if (e == 'P') {
        if (i_ < s_.size() && s_[i_] == '<') {
          ++i_;
          std::size_t const name_begin = i_;
          while (i_ < s_.size() && s_[i_] != '>') {
            char const c = s_[i_];
            bool const ok = c == '_' || is_ascii_letter(c) || (is_digit(c) && i_ != name_begin);
            if (!ok) {
              return fail(errc::bad_group_name, name_begin);
            }
            ++i_;
          }
          if (i_ >= s_.size() || i_ == name_begin) {
            return fail(errc::bad_group_name, name_begin);
          }
          std::string_view const name = s_.substr(name_begin, i_ - name_begin);
          for (std::size_t k = 0; k != n_names_; ++k) {
            if (names_[k] == name) {
              return fail(errc::duplicate_group_name, name_begin);
            }
          }
          if (n_names_ == max_names) {
            return fail(errc::too_many_names, name_begin);
          }
          names_[n_names_++] = name;
          ++i_;  // '>'
        } else if (i_ < s_.size() && s_[i_] == '=') {
          return fail(errc::backreference, at);
        } else {
          return fail(errc::unsupported_group, at);
        }
      } else {
        return fail(errc::unsupported_group, at);
      }
    }
    frame f{kind, 0, 0, none, none, at};
    if (kind == group_kind::look) {
      f.look_pc = p_.size;
      if (!emit(inst{op::look, static_cast<std::uint8_t>(negative ? 1 : 0), none, none})) {
        return false;
      }
    }
    f.start = f.alt_start = p_.size;
    stack_[depth_++] = f;
    last_ = last::nothing;
    return true;
  }

  constexpr bool close_group(std::size_t at) {
    if (depth_ == 1) {
      return fail(errc::unbalanced_parenthesis, at);
    }
    frame f = stack_[--depth_];
    finish_alternation(f);
    std::int32_t atom_start = f.start;
    if (f.kind == group_kind::look) {
      if (!emit(inst{op::look_end, 0, none, none})) {
        return false;
      }
      p_.code[static_cast<std::size_t>(f.look_pc)].x = p_.size;
      atom_start = f.look_pc;
    }
    last_start_ = atom_start;
    last_ = last::atom;
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
      return fail(errc::repeat_too_large, at);
    }
    if (max < min) {
      return fail(errc::bad_repeat_bounds, at);
    }
    return quantify(at, min, max);
  }

  constexpr void step() {
    std::size_t const at = i_;
    char const c = s_[i_++];
    if (static_cast<unsigned char>(c) >= 0x80) {
      fail(errc::non_ascii, at);
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

  // Numbers the lookaheads and builds the epsilon-predecessor lists (for the backward passes).
  constexpr void finalize() {
    std::int32_t const n = p_.size;
    p_.n_looks = 0;
    p_.nested_looks = false;
    p_.look_cost = 0;
    for (std::int32_t pc = 0; pc != n; ++pc) {
      inst& in = p_.code[static_cast<std::size_t>(pc)];
      if (in.code == op::look) {
        in.y = p_.n_looks++;
        p_.look_cost += in.x - pc;
        for (std::int32_t q = pc + 1; q < in.x; ++q) {
          p_.nested_looks = p_.nested_looks || p_.code[static_cast<std::size_t>(q)].code == op::look;
        }
      }
    }
    inst const& first = p_.code[0];
    p_.anchored = first.code == op::assert_at && first.arg == static_cast<std::uint8_t>(anchor::begin);
    for (std::int32_t k = 0; k <= n; ++k) {
      p_.pred_begin[static_cast<std::size_t>(k)] = 0;
    }
    for (std::int32_t pc = 0; pc != n; ++pc) {
      for_each_epsilon(p_.code[static_cast<std::size_t>(pc)], pc,
                       [&](std::int32_t t) { ++p_.pred_begin[static_cast<std::size_t>(t + 1)]; });
    }
    for (std::int32_t k = 0; k != n; ++k) {
      p_.pred_begin[static_cast<std::size_t>(k + 1)] += p_.pred_begin[static_cast<std::size_t>(k)];
    }
    p_.n_edges = p_.pred_begin[static_cast<std::size_t>(n)];
    // Fill, using pred_begin[t] as the cursor, then shift back.
    for (std::int32_t pc = 0; pc != n; ++pc) {
      for_each_epsilon(p_.code[static_cast<std::size_t>(pc)], pc, [&](std::int32_t t) {
        p_.preds[static_cast<std::size_t>(p_.pred_begin[static_cast<std::size_t>(t)]++)] = pc;
      });
    }
    for (std::int32_t k = n; k > 0; --k) {
      p_.pred_begin[static_cast<std::size_t>(k)] = p_.pred_begin[static_cast<std::size_t>(k - 1)];
    }
    p_.pred_begin[0] = 0;
  }
};

/// Parses `pattern` into `prog`; on failure prog.error and prog.error_pos say why and where.
template <class Prog>
constexpr void parse(std::string_view pattern, Prog& prog) {
  parser<Prog> ps(prog, pattern);
  ps.run();
}

}  // namespace qtl::detail::re
