#pragma once
/// \file
/// Why the regex engine rejects a pattern (internal; the public errors are `qtl::regex_error` and
/// `qtl::regex_unsupported_error` in `<qtl/match/regex.hpp>`): the codes, their messages, and the
/// functions whose names a failed constant evaluation shows.

#include <cstddef>
#include <string_view>

namespace qtl::detail::re {

/// Why a pattern was rejected. Each has a message (`errc_message`) and, for constant evaluation,
/// a non-constexpr function named after it (`report_in_constant_evaluation`). Up to
/// `variable_lookbehind` Python's `re` rejects the pattern too; from `backreference` on the
/// pattern is one this engine does not run (`errc_unsupported`).
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
  unknown_extension,
  bad_group_name,
  duplicate_group_name,
  unexpected_end,
  unterminated_comment,
  invalid_group_reference,
  open_group_reference,
  unknown_group_name,
  lookbehind_group_reference,
  bad_inline_flags,
  global_flags_not_at_start,
  variable_lookbehind,
  // constructs Python accepts that this engine does not run, and its capacities
  backreference,
  conditional,
  atomic_group,
  possessive,
  inline_flags,
  non_ascii,
  named_unicode_escape,
  too_large,
  too_many_sets,
  too_deep,
  too_many_groups,
};

/// Whether `e` is a construct Python's `re` accepts but this engine does not run, or a capacity
/// of the engine (`qtl::regex_unsupported_error`), rather than a pattern Python rejects too
/// (`qtl::regex_error`).
constexpr bool errc_unsupported(errc e) { return e >= errc::backreference; }

/// Whether `e` is a capacity of a program that a larger program might not reach.
constexpr bool errc_capacity(errc e) { return e == errc::too_large || e == errc::too_many_sets; }

/// The construct and the problem, as `qtl::regex_error` and `qtl::regex_unsupported_error`
/// report them (Python's wording for the errors Python raises too).
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
    case errc::unknown_extension: return "'(?': unknown extension";
    case errc::bad_group_name: return "'(?P<name>' / '(?P=name)': bad character in group name, or a missing name";
    case errc::duplicate_group_name: return "'(?P<name>': redefinition of group name";
    case errc::unexpected_end: return "'(?': unexpected end of pattern";
    case errc::unterminated_comment: return "'(?#': missing ), unterminated comment";
    case errc::invalid_group_reference: return "'\\<number>': invalid group reference (no such group)";
    case errc::open_group_reference: return "'\\<number>' / '(?P=name)': cannot refer to an open group";
    case errc::unknown_group_name: return "'(?P=name)': unknown group name";
    case errc::lookbehind_group_reference:
      return "'\\<number>' / '(?P=name)': cannot refer to group defined in the same lookbehind subpattern";
    case errc::bad_inline_flags: return "'(?flags)': bad inline flags";
    case errc::global_flags_not_at_start: return "'(?flags)': global flags not at the start of the expression";
    case errc::variable_lookbehind: return "'(?<=' / '(?<!': look-behind requires fixed-width pattern";
    case errc::backreference:
      return "'\\<number>' / '(?P=name)': backreferences are valid in Python's re but not supported by QTL's regex engine";
    case errc::conditional:
      return "'(?(group)yes|no)': conditional groups are valid in Python's re but not supported by QTL's regex "
             "engine (the rest of the pattern was not checked)";
    case errc::atomic_group:
      return "'(?>...)': atomic groups are valid in Python's re but not supported by QTL's regex engine";
    case errc::possessive:
      return "'*+' / '++' / '?+' / '{m,n}+': possessive quantifiers are valid in Python's re but not supported by "
             "QTL's regex engine";
    case errc::inline_flags:
      return "'(?aiLmsux)' / '(?aiLmsux-imsx:...)': inline flags are valid in Python's re but not supported by "
             "QTL's regex engine (after the verbose flag the rest of the pattern was not checked)";
    case errc::non_ascii:
      return "non-ASCII character or escape: valid in Python's re, but QTL's regex engine supports ASCII patterns only";
    case errc::named_unicode_escape:
      return "'\\N{name}': named Unicode escapes are not supported by QTL's regex engine";
    case errc::too_large: return "pattern: compiled program exceeds the instruction capacity of QTL's regex engine";
    case errc::too_many_sets: return "'[...]': too many distinct character sets for QTL's regex engine";
    case errc::too_deep: return "'(': groups nest too deeply for QTL's regex engine";
    case errc::too_many_groups: return "'(': more than 256 capturing groups for QTL's regex engine";
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
inline void regex_has_unknown_extension() {}
inline void regex_has_bad_group_name() {}
inline void regex_redefines_a_group_name() {}
inline void regex_ends_unexpectedly() {}
inline void regex_has_unterminated_comment() {}
inline void regex_has_invalid_group_reference() {}
inline void regex_refers_to_an_open_group() {}
inline void regex_has_unknown_group_name() {}
inline void regex_refers_to_a_group_of_the_same_lookbehind() {}
inline void regex_has_bad_inline_flags() {}
inline void regex_global_flags_not_at_the_start() {}
inline void regex_lookbehind_requires_fixed_width_pattern() {}
inline void regex_backreferences_are_not_supported() {}
inline void regex_conditionals_are_not_supported() {}
inline void regex_atomic_groups_are_not_supported() {}
inline void regex_possessive_quantifiers_are_not_supported() {}
inline void regex_inline_flags_are_not_supported() {}
inline void regex_non_ascii_is_not_supported() {}
inline void regex_named_unicode_escapes_are_not_supported() {}
inline void regex_program_exceeds_capacity() {}
inline void regex_has_too_many_character_sets() {}
inline void regex_groups_nest_too_deeply() {}
inline void regex_has_too_many_groups() {}
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
    case errc::unknown_extension: regex_has_unknown_extension(); return;
    case errc::bad_group_name: regex_has_bad_group_name(); return;
    case errc::duplicate_group_name: regex_redefines_a_group_name(); return;
    case errc::unexpected_end: regex_ends_unexpectedly(); return;
    case errc::unterminated_comment: regex_has_unterminated_comment(); return;
    case errc::invalid_group_reference: regex_has_invalid_group_reference(); return;
    case errc::open_group_reference: regex_refers_to_an_open_group(); return;
    case errc::unknown_group_name: regex_has_unknown_group_name(); return;
    case errc::lookbehind_group_reference: regex_refers_to_a_group_of_the_same_lookbehind(); return;
    case errc::bad_inline_flags: regex_has_bad_inline_flags(); return;
    case errc::global_flags_not_at_start: regex_global_flags_not_at_the_start(); return;
    case errc::variable_lookbehind: regex_lookbehind_requires_fixed_width_pattern(); return;
    case errc::backreference: regex_backreferences_are_not_supported(); return;
    case errc::conditional: regex_conditionals_are_not_supported(); return;
    case errc::atomic_group: regex_atomic_groups_are_not_supported(); return;
    case errc::possessive: regex_possessive_quantifiers_are_not_supported(); return;
    case errc::inline_flags: regex_inline_flags_are_not_supported(); return;
    case errc::non_ascii: regex_non_ascii_is_not_supported(); return;
    case errc::named_unicode_escape: regex_named_unicode_escapes_are_not_supported(); return;
    case errc::too_large: regex_program_exceeds_capacity(); return;
    case errc::too_many_sets: regex_has_too_many_character_sets(); return;
    case errc::too_deep: regex_groups_nest_too_deeply(); return;
    case errc::too_many_groups: regex_has_too_many_groups(); return;
  }
}

/// What a parse reports, by precedence: an error Python's parser raises (parsing stops), then one
/// its compiler raises (a variable-width lookbehind: parsing goes on), then the first construct
/// this engine lacks (parsing goes on, or stops where the rest cannot be read), then a capacity
/// (parsing stops).
struct verdict {
  bool failed = false;
  errc stop = errc::none;
  std::size_t stop_pos = 0;
  errc deferred = errc::none;
  std::size_t deferred_pos = 0;
  errc lacking = errc::none;
  std::size_t lacking_pos = 0;

  /// Stops parsing at an error (or a capacity). Returns false, for `return fail(...)`.
  constexpr bool fail(errc e, std::size_t pos) {
    if (!failed) {
      failed = true;
      stop = e;
      stop_pos = pos;
    }
    return false;
  }
  /// Records an error of Python's compiler, found while parsing goes on.
  constexpr void defer(errc e, std::size_t pos) {
    if (deferred == errc::none) {
      deferred = e;
      deferred_pos = pos;
    }
  }
  /// Records a construct this engine lacks; parsing goes on (the program is never run).
  constexpr void lack(errc e, std::size_t pos) {
    if (lacking == errc::none) {
      lacking = e;
      lacking_pos = pos;
    }
  }
  /// ... and stops: the rest of the pattern cannot be read without the construct.
  constexpr bool lack_and_stop(errc e, std::size_t pos) {
    lack(e, pos);
    failed = true;
    return false;
  }
  /// Writes the error of this precedence into a program's `error`, `error_pos`, `capacity_exceeded`.
  template <class Prog>
  constexpr void report_to(Prog& p) const {
    bool const python_error = stop != errc::none && !errc_unsupported(stop);
    if (!python_error && deferred != errc::none) {
      p.error = deferred;
      p.error_pos = deferred_pos;
    } else if (!python_error && lacking != errc::none) {
      p.error = lacking;
      p.error_pos = lacking_pos;
    } else {
      p.error = stop;
      p.error_pos = stop_pos;
    }
    p.capacity_exceeded = errc_capacity(stop);
  }
};

}  // namespace qtl::detail::re
