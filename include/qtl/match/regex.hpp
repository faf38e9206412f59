#pragma once
/// \file
/// Python-`re`-compatible regular expressions for module names, usable in constant evaluation
/// and at run time, on one engine.
///
///   static_assert(qtl::re_match(R"(model\.layers\.\d+\.mlp)", "model.layers.3.mlp.down_proj"));
///   qtl::regex const r(pattern_from_config);          // throws qtl::regex_error (or _unsupported_)
///   bool const skip = r.match(module_name);            // Python: re.match(pattern, name)
///   using not_first = qtl::static_regex<R"(^model\.layers\.(?!0\.)\d+\.)">;  // checked at compile time
///   qtl::regex_set const dynamic(keys);                 // <qtl/match/regex_set.hpp>: first match wins
///   int const rule = dynamic.first_match(module_name);  // index of the first re.match, or -1
///
/// Verbs (boolean results, as the quantization rules use them):
///   match      re.match      anchored at the start, may end anywhere
///   fullmatch  re.fullmatch  anchored at both ends
///   search     re.search     anywhere
///
/// Syntax (Python 3.11 `re`, default flags): literals; escapes of punctuation; \a \f \n \r \t \v,
/// \xhh \uhhhh \Uhhhhhhhh \0 \ooo (ASCII values); `.` (any byte but '\n'); \d \w \s \D \W \S;
/// [...] and [^...] with ranges and class escapes; groups ( ), (?:...), (?P<name>...);
/// alternation |; * + ? {m} {m,} {,n} {m,n} {,} and their lazy forms; a '{' that does not start a
/// valid repeat is a literal, as in Python; ^ and \A (start), $ (end or before a final '\n'),
/// \Z (end), \b \B; lookahead (?=...) and (?!...); lookbehind (?<=...) and (?<!...) of a fixed
/// width; comments (?#...).
/// A pattern Python rejects throws `qtl::regex_error` (Python's `re.error`: the position and the
/// construct), a variable-width lookbehind included. Constructs Python accepts but this engine
/// does not run — backreferences \1 and (?P=name), conditionals (?(1)...), atomic groups (?>...),
/// possessive quantifiers, inline flags (?i), non-ASCII pattern characters and escapes — and
/// patterns beyond its capacities throw `qtl::regex_unsupported_error` (an `unsupported_error`,
/// not a `regex_error`), unless Python would reject the pattern anyway. Both are compile errors
/// in constant evaluation, naming the problem.
///
/// Characters: the engine works on bytes with ASCII semantics. On ASCII text the results equal
/// Python's default (Unicode) mode, including \s matching \x1c-\x1f (str.isspace(); re.ASCII
/// would not). Python would also let \d, \w, \s and \b see non-ASCII letters, digits and spaces,
/// and `.`/[^...] consume one code point; here bytes >= 0x80 are in none of \d \w \s and `.`
/// consumes one byte. Module names are ASCII, so this never differs on them.
///
/// Complexity: O(n * m) time for a text of n bytes and a program of m instructions (m grows
/// linearly with the pattern, times the counts of {m,n} repeats); with lookarounds
/// O(n * m * (1 + d)), d their nesting depth. Never exponential, no recursion on the
/// system stack (`(a*)*b` on 30,000 'a's takes milliseconds). `qtl::regex` additionally builds a
/// DFA (at most 4096 states per verb) for patterns without lookarounds and \b, making a run O(n);
/// `qtl::regex_set` runs all such patterns of a list on a few combined DFAs (groups of
/// consecutive patterns, each within a state limit), O(n) per group; at run time the re_*
/// functions keep a `qtl::regex` for a pattern they see a second time (per thread).
///
/// Throughput against PCRE2-JIT and std::regex: docs/performance.md (match).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/fixed_string.hpp>
#include <qtl/match/detail/regex_nfa.hpp>
#include <qtl/match/detail/regex_parser.hpp>

namespace qtl {

class regex;

/// Capacities of the engine. Constant evaluation uses fixed arrays of these sizes; run-time
/// patterns get the larger program capacity and unbounded text.
struct regex_limits {
  /// Instructions of a pattern parsed in constant evaluation (re_match & co., static_regex).
  static constexpr std::size_t constexpr_instructions = 1024;
  /// Distinct character sets of a pattern parsed in constant evaluation.
  static constexpr std::size_t constexpr_sets = 64;
  /// Bits of lookaround results in constant evaluation: lookarounds x (text length + 1).
  static constexpr std::size_t constexpr_look_bits = 16 * 1024;
  /// Instructions of a run-time pattern (`qtl::regex`, or re_match & co. at run time).
  static constexpr std::size_t runtime_instructions = 32768;
  /// Distinct character sets of a run-time pattern.
  static constexpr std::size_t runtime_sets = 1024;
  /// DFA states per verb of a `qtl::regex`; a pattern needing more runs on the NFA.
  static constexpr std::size_t dfa_states = 4096;
  /// States of one combined DFA of a `qtl::regex_set` (a group of its patterns).
  static constexpr std::size_t set_dfa_states = 16384;
  /// States built by all the group DFAs of one `qtl::regex_set` together, fitting or not.
  static constexpr std::size_t set_build_states = 262144;
};

namespace detail::re {

using constexpr_program = program<regex_limits::constexpr_instructions, regex_limits::constexpr_sets>;
using runtime_program = program<regex_limits::runtime_instructions, regex_limits::runtime_sets>;

/// Throws `regex_error` (a pattern Python rejects too) or `regex_unsupported_error` for `e`.
[[noreturn]] inline void throw_regex_error(errc e, std::size_t pos, std::string_view pattern) {
  std::string what = "qtl::regex: " + std::string(errc_message(e)) + " in pattern \"" + std::string(pattern) + "\"";
  if (errc_unsupported(e)) {
    throw regex_unsupported_error(what, pos);
  }
  throw regex_error(what, pos);
}

/// Run-time scratch, reused by each thread.
struct runtime_scratch {
  std::vector<std::uint32_t> mark, sub_mark;
  std::vector<std::int32_t> list_a, list_b, stack, sub_list_a, sub_list_b, sub_stack;
  std::vector<std::uint64_t> look_bits, look_known;

  scratch_view get(std::int32_t size, std::int32_t n_looks, std::size_t text_size) {
    std::size_t const m = static_cast<std::size_t>(size) + 1;
    if (mark.size() < m) {
      for (auto* v : {&list_a, &list_b, &stack, &sub_list_a, &sub_list_b, &sub_stack}) {
        v->resize(m);
      }
      mark.resize(m);
      sub_mark.resize(m);
    }
    std::size_t const words = look_words(n_looks, text_size);
    if (look_bits.size() < words) {
      look_bits.resize(words);
      look_known.resize(words);
    }
    return {mark.data(),     list_a.data(),     list_b.data(),     stack.data(),     look_bits.data(),
            sub_mark.data(), sub_list_a.data(), sub_list_b.data(), sub_stack.data(), look_known.data()};
  }
};

inline scratch_view thread_scratch(std::int32_t size, std::int32_t n_looks, std::size_t text_size) {
  thread_local runtime_scratch scratch;
  return scratch.get(size, n_looks, text_size);
}

/// Runs a program in constant evaluation with fixed-size scratch.
template <std::size_t Cap, std::size_t SetCap>
constexpr bool run_constant(program<Cap, SetCap> const& prog, std::string_view text, verb v) {
  std::array<std::uint32_t, Cap + 1> mark{};
  std::array<std::int32_t, Cap + 1> list_a{};
  std::array<std::int32_t, Cap + 1> list_b{};
  std::array<std::int32_t, Cap + 1> stack{};
  std::array<std::uint64_t, regex_limits::constexpr_look_bits / 64> look_bits{};
  std::array<std::uint32_t, Cap + 1> sub_mark{};
  std::array<std::int32_t, Cap + 1> sub_list_a{};
  std::array<std::int32_t, Cap + 1> sub_list_b{};
  std::array<std::int32_t, Cap + 1> sub_stack{};
  std::array<std::uint64_t, regex_limits::constexpr_look_bits / 64> look_known{};
  if (look_words(prog.n_looks, text.size()) > look_bits.size()) {
    regex_text_too_long_for_constant_evaluation();
  }
  return run_nfa(prog.view(), text, v,
                 {mark.data(), list_a.data(), list_b.data(), stack.data(), look_bits.data(), sub_mark.data(),
                  sub_list_a.data(), sub_list_b.data(), sub_stack.data(), look_known.data()});
}

/// One-shot run-time path of re_match & co. (defined after qtl::regex).
inline bool run_once(std::string_view pattern, std::string_view text, verb v);

template <verb V>
constexpr bool run_pattern(std::string_view pattern, std::string_view text) {
  if (std::is_constant_evaluated()) {
    constexpr_program prog;
    parse(pattern, prog);
    if (prog.error != errc::none) {
      report_in_constant_evaluation(prog.error);  // the pattern does not compile: see the name
      return false;
    }
    return run_constant(prog, text, V);
  }
  return run_once(pattern, text, V);
}

struct program_summary {
  std::int32_t size;
  std::int32_t n_sets;
};

/// Parses a literal pattern at compile time; an invalid one stops compilation here, and the
/// diagnostic names the problem (the non-constexpr function called).
template <fixed_string P>
consteval program_summary static_summary() {
  constexpr_program prog;
  parse(P.view(), prog);
  if (prog.error != errc::none) {
    report_in_constant_evaluation(prog.error);
  }
  return {prog.size, prog.n_sets};
}

/// The program of a literal pattern, compacted to exactly its size (every element initialised, so
/// that it can be a constexpr variable).
template <fixed_string P, std::size_t N, std::size_t S>
consteval program<N, S> static_compile() {
  constexpr_program parsed;
  parse(P.view(), parsed);
  program<N, S> out;
  auto const n = static_cast<std::size_t>(parsed.size);
  for (std::size_t i = 0; i != N; ++i) {
    out.code[i] = i < n ? parsed.code[i] : inst{op::match, 0, none, none};
  }
  for (std::size_t i = 0; i != S; ++i) {
    out.sets[i] = i < static_cast<std::size_t>(parsed.n_sets) ? parsed.sets[i] : empty_set();
  }
  for (std::size_t i = 0; i != N + 1; ++i) {
    out.pred_begin[i] = i <= n ? parsed.pred_begin[i] : parsed.pred_begin[n];
  }
  for (std::size_t i = 0; i != 2 * N; ++i) {
    out.preds[i] = i < static_cast<std::size_t>(parsed.n_edges) ? parsed.preds[i] : 0;
  }
  out.size = parsed.size;
  out.n_sets = parsed.n_sets;
  out.n_looks = parsed.n_looks;
  out.n_edges = parsed.n_edges;
  out.anchored = parsed.anchored;
  out.nested_looks = parsed.nested_looks;
  out.look_cost = parsed.look_cost;
  out.has_word_boundary = parsed.has_word_boundary;
  out.has_end_newline = parsed.has_end_newline;
  return out;
}

/// Splits the 256 byte values into classes that no consuming instruction tells apart (refined
/// by each distinct byte set the instructions consume); returns the number of classes.
inline int byte_classes(std::vector<inst> const& code, std::vector<charset> const& sets,
                        std::array<std::uint8_t, 256>& byte_class) {
  struct bits_hash {
    std::size_t operator()(std::array<std::uint64_t, 4> const& b) const noexcept {
      return static_cast<std::size_t>((b[0] * 31 + b[1]) * 31 + b[2] + (b[3] << 7));
    }
  };
  std::unordered_set<std::array<std::uint64_t, 4>, bits_hash> distinct;
  for (inst const& in : code) {
    if (!is_consuming(in.code)) {
      continue;
    }
    std::array<std::uint64_t, 4> b{};
    if (in.code == op::byte) {
      b[in.arg >> 6] |= std::uint64_t{1} << (in.arg & 63);
    } else if (in.code == op::set) {
      charset const& cs = sets[static_cast<std::size_t>(in.x)];
      b = {cs.w[0], cs.w[1], cs.w[2], cs.w[3]};
    } else {
      b = {~std::uint64_t{0}, ~std::uint64_t{0}, ~std::uint64_t{0}, ~std::uint64_t{0}};
      b[0] &= ~(std::uint64_t{1} << '\n');  // any: every byte but '\n'
    }
    distinct.insert(b);
  }
  std::array<std::uint16_t, 256> cls{};
  int n = 1;
  for (std::array<std::uint64_t, 4> const& b : distinct) {
    std::array<int, 512> remap{};
    remap.fill(-1);
    int m = 0;
    for (std::size_t c = 0; c != 256; ++c) {
      bool const in_set = ((b[c >> 6] >> (c & 63)) & 1u) != 0;
      auto const key = static_cast<std::size_t>(cls[c]) * 2 + (in_set ? 1 : 0);
      if (remap[key] < 0) {
        remap[key] = m++;
      }
      cls[c] = static_cast<std::uint16_t>(remap[key]);
    }
    n = m;
  }
  for (std::size_t c = 0; c != 256; ++c) {
    byte_class[c] = static_cast<std::uint8_t>(cls[c]);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// DFAs for run-time patterns without lookarounds and \b/\B (subset construction, built eagerly at
// construction so that a const qtl::regex or qtl::regex_set is safe to share between threads).
//
// A DFA state is the sorted set of NFA instructions a thread can be parked at: consuming
// instructions, `match`, and end anchors ($ \Z) whose truth is only known at the end of the text.
// Both builders below (one pattern, three verbs; a list of patterns, first match) take their NFA
// step from `dfa_closure`, i.e. the engine's one epsilon walk (`nfa_closure`).
// ---------------------------------------------------------------------------------------------

/// The DFA builders' NFA step: the engine's one epsilon closure (`nfa_closure`) from a set of
/// threads, at a position that is 0 or not (`at_begin`: \A holds) and is the end of the text or
/// not (`at_end`: $ and \Z hold; elsewhere they are parked, decided at the end). `out` gets the
/// parked instructions (consuming ones, `match`, the end anchors) sorted, each once.
class dfa_closure {
 public:
  explicit dfa_closure(std::size_t program_size)
      : mark_(program_size, 0), stack_(program_size), list_(program_size) {}

  void operator()(program_view const& p, std::vector<std::int32_t> const& seeds, bool at_begin, bool at_end,
                  std::vector<std::int32_t>& out) {
    ++gen_;
    std::int32_t count = 0;
    auto const other = [&](std::int32_t, inst const& in) {
      if (in.code == op::match) {
        return closure_action::park;
      }
      if (in.code != op::assert_at) {
        return closure_action::none;  // look / look_end / \b: such programs get no DFA
      }
      if (static_cast<anchor>(in.arg) == anchor::begin) {
        return at_begin ? closure_action::next : closure_action::none;
      }
      return at_end ? closure_action::next : closure_action::park;
    };
    for (std::int32_t const s : seeds) {
      nfa_closure(p, s, mark_.data(), gen_, stack_.data(), list_.data(), count, nullptr, other);
    }
    out.assign(list_.begin(), list_.begin() + count);
    std::sort(out.begin(), out.end());
  }

 private:
  std::vector<std::uint32_t> mark_;
  std::vector<std::int32_t> stack_;
  std::vector<std::int32_t> list_;
  std::uint32_t gen_ = 0;
};

/// The threads of the parked set `k` that advance over the byte `c`, one instruction on.
inline void step_over(inst const* code, charset const* sets, std::vector<std::int32_t> const& k, std::size_t n,
                      unsigned char c, std::vector<std::int32_t>& seeds) {
  seeds.clear();
  for (std::size_t q = 0; q != n; ++q) {
    std::int32_t const pc = k[q];
    if (consumes(code[pc], sets, c)) {
      seeds.push_back(pc + 1);
    }
  }
}

/// DFA states by their parked set: id of a set seen before, or a new id.
class dfa_state_table {
 public:
  /// The sets, by id (ids below `reserved` are the caller's: dead, sinks).
  explicit dfa_state_table(std::size_t reserved) : sets_(reserved) {}

  std::int32_t intern(std::vector<std::int32_t> k) {
    auto const it = ids_.find(k);
    if (it != ids_.end()) {
      return it->second;
    }
    auto const id = static_cast<std::int32_t>(sets_.size());
    ids_.emplace(k, id);
    sets_.push_back(std::move(k));
    return id;
  }
  std::size_t size() const { return sets_.size(); }
  std::vector<std::int32_t> const& operator[](std::size_t id) const { return sets_[id]; }

 private:
  struct hash {
    std::size_t operator()(std::vector<std::int32_t> const& k) const noexcept {
      std::uint64_t h = 0xcbf29ce484222325u;
      for (std::int32_t const x : k) {
        h = (h ^ static_cast<std::uint32_t>(x)) * 0x100000001b3u;
      }
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, hash> ids_;
  std::vector<std::vector<std::int32_t>> sets_;
};

/// The representative byte of each class (the smallest byte in it).
inline std::array<unsigned char, 256> class_representatives(std::array<std::uint8_t, 256> const& byte_class) {
  std::array<unsigned char, 256> r{};
  for (int c = 255; c >= 0; --c) {
    r[byte_class[static_cast<std::size_t>(c)]] = static_cast<unsigned char>(c);
  }
  return r;
}

/// One verb's DFA of one pattern. State 0 is dead; state 1 is the accepting sink of the match
/// and search verbs (a match anywhere decides them).
struct dfa {
  std::vector<std::int32_t> next;        // (states, byte classes)
  std::vector<std::uint8_t> accept_end;  // (states,): accepts when the text ends here
  std::int32_t start = 0;
  bool ok = false;
};

class dfa_builder {
 public:
  dfa_builder(program_view const& p, std::array<std::uint8_t, 256> const& byte_class, int n_classes)
      : p_(p), n_classes_(n_classes), representative_(class_representatives(byte_class)),
        closure_(static_cast<std::size_t>(p.size)) {}

  dfa build(bool unanchored, bool sink, std::size_t max_states) {
    dfa d;
    dfa_state_table states(2);  // 0: dead, 1: accepting sink
    std::vector<std::int32_t> parked;
    auto intern = [&](std::vector<std::int32_t> k) -> std::int32_t {
      if (k.empty()) {
        return 0;
      }
      if (sink && contains_match(k)) {
        return 1;
      }
      return states.intern(std::move(k));
    };
    std::vector<std::int32_t> seeds{0};
    closure_(p_, seeds, true, false, parked);
    d.start = intern(parked);
    std::vector<std::int32_t> start_mid;  // the start's closure away from position 0 (search)
    if (unanchored) {
      closure_(p_, seeds, false, false, start_mid);
    }
    auto const k_count = static_cast<std::size_t>(n_classes_);
    for (std::size_t s = 2; s < states.size(); ++s) {
      if (states.size() > max_states) {
        return dfa{};
      }
      d.next.resize(states.size() * k_count, 0);
      for (std::size_t k = 0; k != k_count; ++k) {
        std::vector<std::int32_t> const& from = states[s];
        step_over(p_.code, p_.sets, from, from.size(), representative_[k], seeds);
        closure_(p_, seeds, false, false, parked);
        if (unanchored) {
          parked.insert(parked.end(), start_mid.begin(), start_mid.end());
          std::sort(parked.begin(), parked.end());
          parked.erase(std::unique(parked.begin(), parked.end()), parked.end());
        }
        std::int32_t const t = intern(parked);
        d.next.resize(states.size() * k_count, 0);
        d.next[s * k_count + k] = t;
      }
    }
    d.next.resize(states.size() * k_count, 0);
    for (std::size_t k = 0; k != k_count; ++k) {  // the sink stays
      d.next[k_count + k] = 1;
    }
    d.accept_end.assign(states.size(), 0);
    d.accept_end[1] = 1;
    for (std::size_t s = 2; s < states.size(); ++s) {
      closure_(p_, states[s], false, true, parked);
      d.accept_end[s] = contains_match(parked) ? 1 : 0;
    }
    d.ok = true;
    return d;
  }

 private:
  program_view p_;
  int n_classes_;
  std::array<unsigned char, 256> representative_;
  dfa_closure closure_;

  bool contains_match(std::vector<std::int32_t> const& k) const {
    return std::any_of(k.begin(), k.end(), [&](std::int32_t pc) { return p_.code[pc].code == op::match; });
  }
};

/// The combined DFA of an ordered group of patterns for "the first to re.match": a state is the
/// set of NFA threads of every pattern that can still decide the answer plus the best pattern
/// matched so far (threads of patterns at or after it are dropped). Ids 0..n_sinks are decided
/// (id - 1 = the group-local answer, -1 = none); the others are premultiplied row offsets.
struct set_dfa {
  std::array<std::uint8_t, 256> byte_class{};
  int n_classes = 0;
  std::int32_t n_sinks = 0;
  std::int32_t start = 0;
  std::vector<std::int32_t> next;        // (states, byte classes), premultiplied
  std::vector<std::int32_t> end_result;  // (states,): the group-local answer at the end of the text
  std::size_t first = 0;                 // the group: patterns first .. first + n_sinks - 1
  bool ok = false;

  /// The group-local index of the first pattern that matches a non-empty `text` (whose last
  /// byte is not a '\n' when a pattern has `$`), or -1.
  int run(std::string_view text) const {
    std::int32_t const* nx = next.data();
    std::int32_t const last_sink = n_sinks * n_classes;
    std::int32_t s = start;
    for (std::size_t i = 0; i != text.size() && s > last_sink; ++i) {
      s = nx[static_cast<std::size_t>(s) + byte_class[static_cast<unsigned char>(text[i])]];
    }
    s /= n_classes;
    return s <= n_sinks ? s - 1 : end_result[static_cast<std::size_t>(s)];
  }
};

/// Builds the combined DFA of `progs` (lookaround-free, in order), or `ok == false` when it would
/// need more than `max_states` states. `budget` (states left to all of a set's builds) is
/// charged for every state built, kept or not.
struct program_ref {
  std::vector<inst> const* code;
  std::vector<charset> const* sets;
};

inline set_dfa build_set_dfa(std::vector<program_ref> const& progs, std::size_t first, std::size_t max_states,
                      std::size_t& budget) {
  set_dfa d;
  d.first = first;
  // One program: the patterns' programs end to end, targets and set indices shifted.
  std::vector<inst> code;
  std::vector<charset> sets;
  std::vector<std::int32_t> rule_of;
  std::vector<std::int32_t> seeds;
  for (std::size_t r = 0; r != progs.size(); ++r) {
    program_ref const& x = progs[r];
    auto const off = static_cast<std::int32_t>(code.size());
    auto const set_off = static_cast<std::int32_t>(sets.size());
    seeds.push_back(off);
    for (inst in : *x.code) {
      if (in.code == op::split) {
        in.x += off;
        in.y += off;
      } else if (in.code == op::jmp) {
        in.x += off;
      } else if (in.code == op::set) {
        in.x += set_off;
      }
      code.push_back(in);
      rule_of.push_back(static_cast<std::int32_t>(r));
    }
    sets.insert(sets.end(), x.sets->begin(), x.sets->end());
  }
  d.n_classes = byte_classes(code, sets, d.byte_class);
  d.n_sinks = static_cast<std::int32_t>(progs.size());
  std::array<unsigned char, 256> const representative = class_representatives(d.byte_class);
  int const none_yet = d.n_sinks;  // "no pattern matched so far"
  dfa_closure closure(code.size());
  program_view const view{code.data(), static_cast<std::int32_t>(code.size()), sets.data(), nullptr, nullptr, 0,
                          false, false, 0};
  std::vector<std::int32_t> parked;
  // The parked threads that can still win, with the best match among them; best lowers to
  // the first pattern whose match was reached.
  auto prune = [&](std::vector<std::int32_t>& k, int& best) {
    for (std::int32_t const pc : k) {
      if (code[static_cast<std::size_t>(pc)].code == op::match) {
        best = std::min(best, rule_of[static_cast<std::size_t>(pc)]);
      }
    }
    std::erase_if(k, [&](std::int32_t pc) {
      return code[static_cast<std::size_t>(pc)].code == op::match || rule_of[static_cast<std::size_t>(pc)] >= best;
    });
  };
  dfa_state_table states(static_cast<std::size_t>(d.n_sinks) + 1);  // a state's best is its last element
  auto intern = [&](std::vector<std::int32_t> k, int best) -> std::int32_t {
    if (k.empty()) {
      return best == none_yet ? 0 : best + 1;
    }
    k.push_back(best);
    return states.intern(std::move(k));
  };
  int best0 = none_yet;
  closure(view, seeds, true, false, parked);
  prune(parked, best0);
  d.start = intern(parked, best0);
  auto const kc = static_cast<std::size_t>(d.n_classes);
  for (std::size_t s = static_cast<std::size_t>(d.n_sinks) + 1; s < states.size(); ++s) {
    if (states.size() > max_states || budget == 0) {
      return set_dfa{};
    }
    --budget;
    d.next.resize(states.size() * kc, 0);
    for (std::size_t k = 0; k != kc; ++k) {
      std::vector<std::int32_t> const& from = states[s];
      int best = from.back();
      step_over(code.data(), sets.data(), from, from.size() - 1, representative[k], seeds);
      closure(view, seeds, false, false, parked);
      prune(parked, best);
      std::int32_t const t = intern(parked, best);
      d.next.resize(states.size() * kc, 0);
      d.next[s * kc + k] = t;
    }
  }
  d.next.resize(states.size() * kc, 0);
  for (std::size_t s = 0; s <= static_cast<std::size_t>(d.n_sinks); ++s) {
    for (std::size_t k = 0; k != kc; ++k) {
      d.next[s * kc + k] = static_cast<std::int32_t>(s);  // decided stays decided
    }
  }
  // The answer at the end of the text: parked $ / \Z threads hold there.
  d.end_result.assign(states.size(), -1);
  for (std::size_t s = static_cast<std::size_t>(d.n_sinks) + 1; s < states.size(); ++s) {
    std::vector<std::int32_t> const& from = states[s];
    int best = from.back();
    seeds.assign(from.begin(), from.end() - 1);
    closure(view, seeds, false, true, parked);
    prune(parked, best);
    d.end_result[s] = best == none_yet ? -1 : best;
  }
  for (std::int32_t& t : d.next) {  // premultiplied: a state is its row offset
    t *= d.n_classes;
  }
  d.start *= d.n_classes;
  d.ok = true;
  return d;
}
}  // namespace detail::re

/// re.match(pattern, text): whether `pattern` matches at the start of `text`.
/// @throws qtl::regex_error at run time for a pattern Python rejects, qtl::regex_unsupported_error
/// for one this engine does not run; in constant evaluation such a pattern is a compile error
/// naming the problem.
constexpr bool re_match(std::string_view pattern, std::string_view text) {
  return detail::re::run_pattern<detail::re::verb::match>(pattern, text);
}
/// re.fullmatch(pattern, text): whether `pattern` matches the whole of `text`.
constexpr bool re_fullmatch(std::string_view pattern, std::string_view text) {
  return detail::re::run_pattern<detail::re::verb::fullmatch>(pattern, text);
}
/// re.search(pattern, text): whether `pattern` matches anywhere in `text`.
constexpr bool re_search(std::string_view pattern, std::string_view text) {
  return detail::re::run_pattern<detail::re::verb::search>(pattern, text);
}

/// The verbs for which a `qtl::regex` builds a DFA at construction; the others run on its NFA
/// (the same answers, slower). A bit set: `regex_verbs::match | regex_verbs::search`.
enum class regex_verbs : std::uint8_t { none = 0, match = 1, fullmatch = 2, search = 4, all = 7 };
constexpr regex_verbs operator|(regex_verbs a, regex_verbs b) {
  return static_cast<regex_verbs>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}

/// A pattern compiled once, for repeated matching. Immutable after construction: its const
/// member functions may be called from several threads at once.
class regex_set;

class regex {
  friend class regex_set;

 public:
  /// Compiles `pattern`, with a DFA for each of `dfa_verbs` (patterns without lookarounds and \b;
  /// a DFA costs construction time and memory, so a regex used with one verb asks for that one).
  /// @throws qtl::regex_error naming the construct and its position for a pattern Python rejects;
  /// qtl::regex_unsupported_error for one this engine does not run or too large (file comment).
  explicit regex(std::string_view pattern, regex_verbs dfa_verbs = regex_verbs::all) : pattern_(pattern) {
    // default-initialised (not zero-filled): only the written prefix is read
    std::unique_ptr<detail::re::runtime_program> const prog(new detail::re::runtime_program);
    detail::re::parse(pattern, *prog);
    if (prog->error != detail::re::errc::none) {
      detail::re::throw_regex_error(prog->error, prog->error_pos, pattern);
    }
    auto const n = static_cast<std::ptrdiff_t>(prog->size);
    code_.assign(prog->code.begin(), prog->code.begin() + n);
    sets_.assign(prog->sets.begin(), prog->sets.begin() + prog->n_sets);
    pred_begin_.assign(prog->pred_begin.begin(), prog->pred_begin.begin() + n + 1);
    preds_.assign(prog->preds.begin(), prog->preds.begin() + prog->n_edges);
    n_looks_ = prog->n_looks;
    anchored_ = prog->anchored;
    has_end_newline_ = prog->has_end_newline;
    has_word_boundary_ = prog->has_word_boundary;
    nested_looks_ = prog->nested_looks;
    look_cost_ = prog->look_cost;
    if (dfa_verbs != regex_verbs::none && n_looks_ == 0 && !prog->has_word_boundary) {
      build_dfas(dfa_verbs);
    }
  }

  /// re.match: a match starting at position 0.
  bool match(std::string_view text) const { return run(text, detail::re::verb::match); }
  /// re.fullmatch: a match covering the whole text.
  bool fullmatch(std::string_view text) const { return run(text, detail::re::verb::fullmatch); }
  /// re.search: a match anywhere.
  bool search(std::string_view text) const { return run(text, detail::re::verb::search); }

  /// The pattern as given.
  std::string const& pattern() const noexcept { return pattern_; }
  /// Number of NFA instructions (the m of the complexity bound).
  std::size_t program_size() const noexcept { return code_.size(); }
  /// Whether a DFA serves every verb (`regex_verbs::all`, a pattern without lookarounds and \b,
  /// within the state limit).
  bool uses_dfa() const noexcept { return dfa_[0].ok && dfa_[1].ok && dfa_[2].ok; }

 private:
  std::string pattern_;
  std::vector<detail::re::inst> code_;
  std::vector<detail::re::charset> sets_;
  std::vector<std::int32_t> pred_begin_;
  std::vector<std::int32_t> preds_;
  std::int32_t n_looks_ = 0;
  bool anchored_ = false;
  bool has_end_newline_ = false;
  bool has_word_boundary_ = false;
  bool nested_looks_ = false;
  std::int32_t look_cost_ = 0;
  std::array<std::uint8_t, 256> byte_class_{};
  int n_classes_ = 0;
  detail::re::dfa dfa_[3];

  detail::re::program_view view() const {
    return {code_.data(), static_cast<std::int32_t>(code_.size()), sets_.data(), pred_begin_.data(), preds_.data(),
            n_looks_, anchored_, nested_looks_, look_cost_};
  }

  void build_dfas(regex_verbs verbs = regex_verbs::all) {
    using namespace detail::re;
    n_classes_ = byte_classes(code_, sets_, byte_class_);
    dfa_builder b(view(), byte_class_, n_classes_);
    auto const wanted = [&](regex_verbs v) {
      return (static_cast<std::uint8_t>(verbs) & static_cast<std::uint8_t>(v)) != 0;
    };
    if (wanted(regex_verbs::match)) {
      dfa_[0] = b.build(false, true, regex_limits::dfa_states);
    }
    if (wanted(regex_verbs::fullmatch)) {
      dfa_[1] = b.build(false, false, regex_limits::dfa_states);
    }
    if (wanted(regex_verbs::search)) {
      dfa_[2] = b.build(!anchored_, true, regex_limits::dfa_states);
    }
    // Premultiplied: a state is stored as its row offset (id * classes), so a step is one add
    // and one load.
    for (dfa& d : dfa_) {
      for (std::int32_t& t : d.next) {
        t *= n_classes_;
      }
      d.start *= n_classes_;
    }
  }

  bool run(std::string_view text, detail::re::verb v) const {
    using namespace detail::re;
    dfa const& d = dfa_[static_cast<int>(v)];
    // The DFA decides \A by position 0 and $ at the very end; an empty text, or a final '\n'
    // before which $ also holds, goes to the NFA.
    if (d.ok && !text.empty() && !(has_end_newline_ && text.back() == '\n')) {
      std::int32_t const* next = d.next.data();
      std::int32_t const sink = n_classes_;  // state 1, premultiplied; state 0 (dead) is 0
      std::int32_t s = d.start;
      if (s == sink) {
        return true;
      }
      for (char const ch : text) {
        s = next[static_cast<std::size_t>(s) + byte_class_[static_cast<unsigned char>(ch)]];
        if (s <= sink) {
          return s == sink;
        }
      }
      return d.accept_end[static_cast<std::size_t>(s / n_classes_)] != 0;
    }
    program_view const p = view();
    return run_nfa(p, text, v, thread_scratch(p.size, p.n_looks, text.size()));
  }
};

namespace detail::re {

/// `f(program)` of `pattern` parsed into a small program on the stack, or into a large one on
/// the heap when it outgrows that. @throws regex_error, regex_unsupported_error for a bad pattern
template <class F>
auto with_program(std::string_view pattern, F const& f) {
  constexpr_program small;
  parse(pattern, small);
  if (small.error == errc::none) {
    return f(small);
  }
  if (!small.capacity_exceeded) {
    throw_regex_error(small.error, small.error_pos, pattern);
  }
  std::unique_ptr<runtime_program> const big(new runtime_program);  // not zero-filled
  parse(pattern, *big);
  if (big->error != errc::none) {
    throw_regex_error(big->error, big->error_pos, pattern);
  }
  return f(*big);
}

/// Parses and runs a pattern once on the NFA.
inline bool run_uncached(std::string_view pattern, std::string_view text, verb v) {
  return with_program(pattern, [&](auto const& p) {
    return run_nfa(p.view(), text, v, thread_scratch(p.size, p.n_looks, text.size()));
  });
}

/// re_match & co. at run time. A pattern seen for the second time by this thread is compiled
/// into a qtl::regex (with its DFA) and kept, so that rules matched against every module of a
/// model cost a DFA run per name, not a parse. At most 256 patterns are kept per thread (the
/// cache is emptied when full). The answer is the same either way (one engine).
inline bool run_once(std::string_view pattern, std::string_view text, verb v) {
  struct entry {
    int uses = 0;
    std::unique_ptr<regex> compiled;
  };
  struct text_hash {
    using is_transparent = void;  // look up with the string_view, no std::string made
    std::size_t operator()(std::string_view t) const noexcept { return std::hash<std::string_view>{}(t); }
  };
  thread_local std::unordered_map<std::string, entry, text_hash, std::equal_to<>> cache;
  auto it = cache.find(pattern);
  if (it == cache.end()) {
    if (cache.size() >= 256) {
      cache.clear();
    }
    bool const r = run_uncached(pattern, text, v);  // throws for a bad pattern: not kept
    cache.emplace(std::string(pattern), entry{1, nullptr});
    return r;
  }
  entry& e = it->second;
  if (!e.compiled) {
    e.compiled = std::make_unique<regex>(pattern);
  }
  switch (v) {
    case verb::match: return e.compiled->match(text);
    case verb::fullmatch: return e.compiled->fullmatch(text);
    case verb::search: return e.compiled->search(text);
  }
  return false;
}

}  // namespace detail::re

/// Throws the `qtl::regex_error` or `qtl::regex_unsupported_error` that `qtl::regex(pattern)` (and
/// re_match & co.) would throw for `pattern`, and builds nothing else: a validity check,
/// O(pattern length).
inline void check_regex(std::string_view pattern) {
  detail::re::with_program(pattern, [](auto const&) {});
}

/// A literal that every match of `pattern` contains (under every verb), for prefiltering: the
/// longest run of plain characters (or escaped punctuation) at the top level, each exactly once
/// — outside groups, classes and quantified atoms. Empty when the pattern has a top-level `|`, a
/// `{`, or an escape other than \d \w \s \D \W \S \b \B \A \Z and punctuation (which this
/// scan does not read), or no such run. Reads a pattern that `check_regex` accepts.
inline std::string regex_required_literal(std::string_view pattern) {
  std::string best;
  std::string run;
  auto const close_run = [&] {
    if (run.size() > best.size()) {
      best = run;
    }
    run.clear();
  };
  auto const alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  std::size_t i = 0;
  while (i < pattern.size()) {
    char const c = pattern[i];
    if (c == '|' || c == '{') {
      return {};
    }
    if (c == '\\') {
      if (i + 1 >= pattern.size()) {
        return {};
      }
      char const e = pattern[i + 1];
      if (!alnum(e) && static_cast<unsigned char>(e) < 0x80) {
        run += e;
      } else if (std::string_view("dwsDWSbBAZ").find(e) != std::string_view::npos) {
        close_run();
      } else {
        return {};
      }
      i += 2;
      continue;
    }
    if (c == '*' || c == '?') {  // the atom before is optional
      if (!run.empty()) {
        run.pop_back();
      }
      close_run();
      ++i;
      continue;
    }
    if (c == '+') {  // the atom before occurs, perhaps more than once
      close_run();
      ++i;
      continue;
    }
    if (c == '(' || c == '[') {
      // a group or a class: skipped whole (what it holds is not required as such)
      close_run();
      int depth = 0;
      bool in_class = false;
      while (i < pattern.size()) {
        char const d = pattern[i];
        if (d == '\\') {
          i += 2;
          continue;
        }
        if (in_class) {
          if (d == ']') {
            in_class = false;
            if (depth == 0) {
              ++i;
              break;
            }
          }
          ++i;
          continue;
        }
        if (d == '[') {
          in_class = true;
          ++i;
          if (i < pattern.size() && pattern[i] == '^') {
            ++i;
          }
          if (i < pattern.size() && pattern[i] == ']') {
            ++i;  // a ']' first in a class is a member
          }
          continue;
        }
        if (d == '(') {
          ++depth;
        } else if (d == ')') {
          --depth;
          if (depth == 0) {
            ++i;
            break;
          }
        }
        ++i;
      }
      continue;
    }
    if (c == '.' || c == '^' || c == '$' || c == ')' || c == ']') {
      close_run();
      ++i;
      continue;
    }
    run += c;
    ++i;
  }
  close_run();
  return best;
}

/// A pattern given as a literal and compiled at compile time: a malformed or unsupported pattern is
/// a compile error whose message names the problem (e.g. `regex_has_unbalanced_parenthesis`).
/// All member functions are constexpr and static; `static_regex<P>{}.match(s)` works too.
template <fixed_string Pattern>
class static_regex {
  static constexpr detail::re::program_summary info = detail::re::static_summary<Pattern>();
  static constexpr auto compiled =
      detail::re::static_compile<Pattern, (info.size < 2 ? 2 : static_cast<std::size_t>(info.size)),
                                 (info.n_sets < 1 ? 1 : static_cast<std::size_t>(info.n_sets))>();

  static constexpr bool run(std::string_view text, detail::re::verb v) {
    if (std::is_constant_evaluated()) {
      return detail::re::run_constant(compiled, text, v);
    }
    detail::re::program_view const p = compiled.view();
    return detail::re::run_nfa(p, text, v, detail::re::thread_scratch(p.size, p.n_looks, text.size()));
  }

 public:
  /// The pattern.
  static constexpr std::string_view pattern() { return Pattern.view(); }
  /// Number of NFA instructions.
  static constexpr std::size_t program_size() { return static_cast<std::size_t>(info.size); }
  /// re.match
  static constexpr bool match(std::string_view text) { return run(text, detail::re::verb::match); }
  /// re.fullmatch
  static constexpr bool fullmatch(std::string_view text) { return run(text, detail::re::verb::fullmatch); }
  /// re.search
  static constexpr bool search(std::string_view text) { return run(text, detail::re::verb::search); }
};

}  // namespace qtl
