#pragma once
/// \file
/// The regex engine's matcher (internal): a Thompson-NFA set simulation over a `program_view`,
/// with lookarounds answered from per-position tables computed by backward passes.
///
/// Cost, for a text of n bytes and a program of m instructions:
///   * forward simulation: each position visits each instruction at most once -> O(n * m);
///   * a lookahead `(?=X)`/`(?!X)` is first answered lazily, where the forward simulation reaches
///     it, by a forward run of X from that position (usually a few bytes: `(?!(?:0|2)\.)`);
///     once these runs have cost more than 4 * (n + 1) * (total size of the lookaheads), or
///     when lookaheads are nested, every lookahead is evaluated at every position at once by one
///     backward pass over the text simulating X's reversed NFA -> O(n * |X|), innermost first.
///     Total O(n * m * (1 + d)), d = the lookahead nesting depth (d = 1 for every pattern seen
///     in real configs, so O(n * m)).
///   * a lookbehind `(?<=X)`/`(?<!X)` of width w (X has a fixed width, as Python requires) is the
///     same question asked w bytes back: X run forward from pos - w reaches its end, which can
///     only be at pos (none at all before position w). The lazy run starts there; the backward
///     pass's answer for a start q is the lookbehind's at q + w.
/// No recursion on the system stack (an explicit stack of at most m entries), and no heap: the
/// caller passes the scratch memory (fixed arrays in constant evaluation, vectors at run time).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include <qtl/match/detail/regex_program.hpp>

namespace qtl::detail::re {

enum class verb : std::uint8_t { match, fullmatch, search };

/// Scratch memory for one run: `mark`, `list_a`, `list_b`, `stack` and their `sub_` twins (for
/// lazy lookahead runs) hold program-size entries; `look_bits` and `look_known` hold
/// n_looks * (text size + 1) bits each.
struct scratch_view {
  std::uint32_t* mark;
  std::int32_t* list_a;
  std::int32_t* list_b;
  std::int32_t* stack;
  std::uint64_t* look_bits;
  std::uint32_t* sub_mark;
  std::int32_t* sub_list_a;
  std::int32_t* sub_list_b;
  std::int32_t* sub_stack;
  std::uint64_t* look_known;
};

constexpr std::size_t look_words(std::int32_t n_looks, std::size_t text_size) {
  return (static_cast<std::size_t>(n_looks) * (text_size + 1) + 63) / 64;
}

constexpr bool anchor_holds(std::uint8_t kind, std::string_view t, std::size_t pos) {
  std::size_t const n = t.size();
  switch (static_cast<anchor>(kind)) {
    case anchor::begin: return pos == 0;
    case anchor::end_or_final_newline: return pos == n || (pos + 1 == n && t[pos] == '\n');
    case anchor::end: return pos == n;
    case anchor::word_boundary:
    case anchor::not_word_boundary: {
      if (n == 0) {
        return false;  // CPython: neither \b nor \B matches in an empty text
      }
      bool const before = pos > 0 && is_word_byte(static_cast<unsigned char>(t[pos - 1]));
      bool const after = pos < n && is_word_byte(static_cast<unsigned char>(t[pos]));
      return (before != after) == (static_cast<anchor>(kind) == anchor::word_boundary);
    }
  }
  return false;
}

constexpr bool consumes(inst const& in, charset const* sets, unsigned char c) {
  switch (in.code) {
    case op::byte: return in.arg == c;
    case op::any: return c != '\n';
    case op::set: return sets[in.x].test(c);
    default: return false;
  }
}

constexpr bool is_consuming(op o) { return o == op::byte || o == op::any || o == op::set; }

/// Runs `p` on `text` with Python's semantics of re.match / re.fullmatch / re.search.
/// What `nfa_closure` does at an instruction that is not consuming, a jump or a split.
enum class closure_action : std::uint8_t {
  none,    ///< the thread stops here
  accept,  ///< the run succeeds (the closure returns true at once)
  follow,  ///< go on at `in.x` (a lookahead that holds: past its body)
  next,    ///< go on at `pc + 1` (an anchor that holds)
  park,    ///< the thread waits here: `pc` joins `list` (the DFA builders park `match`, `$`, `\Z`)
};

/// The action at an anchor of a run over `text`: `next` where it holds at `pos`.
constexpr closure_action anchor_action(inst const& in, std::string_view text, std::size_t pos) {
  return anchor_holds(in.arg, text, pos) ? closure_action::next : closure_action::none;
}

/// The one epsilon closure of the engine, shared by the Pike VM's forward run, its lookahead
/// pass and the DFA builders of `qtl/match/regex.hpp`: adds the consuming instructions reachable
/// from `start` to `list` (each pc once per `gen` of `mark`), following jumps and splits (`x`
/// before `y`); at any other instruction (anchors, lookaheads, match) `other(pc, in)` decides
/// (`closure_action`). `pops` (optional) counts the instructions visited.
template <class Other>
constexpr bool nfa_closure(program_view const& p, std::int32_t start, std::uint32_t* mark, std::uint32_t gen,
                           std::int32_t* stack, std::int32_t* list, std::int32_t& count, std::size_t* pops, Other const& other) {
  if (mark[start] == gen) {
    return false;
  }
  mark[start] = gen;
  std::int32_t sp = 0;
  stack[sp++] = start;
  auto push = [&](std::int32_t t) {
    if (mark[t] != gen) {
      mark[t] = gen;
      stack[sp++] = t;
    }
  };
  while (sp > 0) {
    std::int32_t const pc = stack[--sp];
    if (pops != nullptr) {
      ++*pops;
    }
    inst const& in = p.code[pc];
    switch (in.code) {
      case op::byte:
      case op::any:
      case op::set: list[count++] = pc; break;
      case op::jmp: push(in.x); break;
      case op::split: push(in.y); push(in.x); break;
      default:
        switch (other(pc, in)) {
          case closure_action::accept: return true;
          case closure_action::follow: push(in.x); break;
          case closure_action::next: push(pc + 1); break;
          case closure_action::park: list[count++] = pc; break;
          case closure_action::none: break;
        }
    }
  }
  return false;
}

/// One step of the Pike VM: each thread of `cur` that consumes `c` continues, by `closure(pc + 1,
/// next_pos, nxt, n_nxt)`, into `nxt`; true as soon as a closure accepts.
template <class Closure>
constexpr bool nfa_step(program_view const& p, unsigned char c, std::int32_t const* cur, std::int32_t n_cur,
                        std::size_t next_pos, std::int32_t* nxt, std::int32_t& n_nxt, Closure const& closure) {
  for (std::int32_t k = 0; k != n_cur; ++k) {
    std::int32_t const pc = cur[k];
    if (consumes(p.code[pc], p.sets, c) && closure(pc + 1, next_pos, nxt, n_nxt)) {
      return true;
    }
  }
  return false;
}

constexpr bool run_nfa(program_view const& p, std::string_view text, verb v, scratch_view s) {
  std::size_t const n = text.size();
  std::size_t const row = n + 1;
  std::uint32_t gen = 0;
  for (std::int32_t k = 0; k != p.size; ++k) {
    s.mark[k] = 0;
  }
  // 1. Lookahead results, per (lookahead, position): bit y * (n + 1) + pos of look_bits.
  std::size_t const words = p.n_looks > 0 ? look_words(p.n_looks, n) : 0;
  bool all_known = false;
  bool const nested = p.nested_looks;
  auto const look_cost = static_cast<std::size_t>(p.look_cost);  // total size of the lookaheads
  for (std::size_t k = 0; k != words; ++k) {
    s.look_bits[k] = 0;
    s.look_known[k] = 0;
  }
  std::size_t const budget = 4 * row * look_cost + 64;
  std::size_t spent = 0;
  std::uint32_t sub_gen = 0;
  if (p.n_looks > 0) {
    for (std::int32_t k = 0; k != p.size; ++k) {
      s.sub_mark[k] = 0;
    }
  }

  auto bit_of = [&](inst const& look, std::size_t pos) { return static_cast<std::size_t>(look.y) * row + pos; };
  auto look_value = [&](inst const& in, std::size_t pos) {
    std::size_t const bit = bit_of(in, pos);
    return ((s.look_bits[bit >> 6] >> (bit & 63)) & 1u) != 0;
  };
  // A lookbehind's result at pos is its sub-program's from pos - w (a lookahead's: from pos).
  auto look_shift = [&](std::int32_t L) -> std::size_t {
    return look_behind(p.code[L]) ? static_cast<std::size_t>(lookbehind_width(p.code, L)) : 0;
  };

  // All lookarounds at all positions: backward passes, innermost first (a nested lookaround has a
  // larger pc than its parent).
  auto solve_all = [&]() {
    for (std::int32_t L = p.size - 1; L >= 0; --L) {
      inst const& look = p.code[L];
      if (look.code != op::look) {
        continue;
      }
      std::int32_t const end = look.x - 1;  // its look_end
      std::size_t const shift = look_shift(L);
      // R_pos = { pc in (L, end] : from pc at pos the sub-program reaches look_end }.
      // R_pos members carry mark == sub_gen; R_{pos+1}'s carried gen - 1.
      for (std::size_t pos = n + 1; pos-- > 0;) {
        ++sub_gen;
        std::int32_t sp = 0;
        if (pos < n) {
          unsigned char const c = static_cast<unsigned char>(text[pos]);
          for (std::int32_t q = L + 1; q < end; ++q) {
            inst const& in = p.code[q];
            if (is_consuming(in.code) && s.sub_mark[q + 1] == sub_gen - 1 && consumes(in, p.sets, c)) {
              s.sub_stack[sp++] = q;
            }
          }
          for (std::int32_t k = 0; k != sp; ++k) {
            s.sub_mark[s.sub_stack[k]] = sub_gen;
          }
        }
        if (s.sub_mark[end] != sub_gen) {
          s.sub_mark[end] = sub_gen;
          s.sub_stack[sp++] = end;
        }
        while (sp > 0) {
          std::int32_t const t = s.sub_stack[--sp];
          for (std::int32_t e = p.pred_begin[t]; e != p.pred_begin[t + 1]; ++e) {
            std::int32_t const q = p.preds[e];
            if (s.sub_mark[q] == sub_gen) {
              continue;
            }
            inst const& in = p.code[q];
            bool ok = true;
            if (in.code == op::assert_at) {
              ok = anchor_holds(in.arg, text, pos);
            } else if (in.code == op::look) {
              ok = look_value(in, pos) != look_negated(in);
            }
            if (ok) {
              s.sub_mark[q] = sub_gen;
              s.sub_stack[sp++] = q;
            }
          }
        }
        if (s.sub_mark[L + 1] == sub_gen && pos + shift <= n) {
          std::size_t const bit = bit_of(look, pos + shift);
          s.look_bits[bit >> 6] |= std::uint64_t{1} << (bit & 63);
        }
      }
    }
    all_known = true;
  };

  // One lookaround (not nested) at one position: a forward run of its sub-program (from w bytes
  // back for a lookbehind), which succeeds when it reaches its look_end.
  auto solve_one = [&](std::int32_t L, std::size_t at_pos) {
    std::size_t const shift = look_shift(L);
    if (at_pos < shift) {
      return false;
    }
    std::size_t const pos = at_pos - shift;
    std::int32_t* cur = s.sub_list_a;
    std::int32_t* nxt = s.sub_list_b;
    std::int32_t n_cur = 0;
    // (a lookahead of a lookahead is answered by solve_all, never here)
    auto sub_closure = [&](std::int32_t start, std::size_t at, std::int32_t* list, std::int32_t& count) {
      return nfa_closure(p, start, s.sub_mark, sub_gen, s.sub_stack, list, count, &spent,
                         [&](std::int32_t, inst const& in) {
                           if (in.code == op::assert_at) {
                             return anchor_action(in, text, at);
                           }
                           return in.code == op::look_end ? closure_action::accept : closure_action::none;
                         });
    };
    ++sub_gen;
    if (sub_closure(L + 1, pos, cur, n_cur)) {
      return true;
    }
    for (std::size_t at = pos; at != n && n_cur != 0; ++at) {
      unsigned char const c = static_cast<unsigned char>(text[at]);
      ++sub_gen;
      std::int32_t n_nxt = 0;
      if (nfa_step(p, c, cur, n_cur, at + 1, nxt, n_nxt, sub_closure)) {
        return true;
      }
      std::swap(cur, nxt);
      n_cur = n_nxt;
    }
    return false;
  };

  if (p.n_looks > 0 && nested) {
    solve_all();
  }
  auto look_ok = [&](std::int32_t pc, std::size_t pos) {
    inst const& in = p.code[pc];
    if (!all_known) {
      std::size_t const bit = bit_of(in, pos);
      if (((s.look_known[bit >> 6] >> (bit & 63)) & 1u) == 0) {
        if (solve_one(pc, pos)) {
          s.look_bits[bit >> 6] |= std::uint64_t{1} << (bit & 63);
        }
        s.look_known[bit >> 6] |= std::uint64_t{1} << (bit & 63);
        if (spent > budget) {  // lazy runs got expensive: answer everything at once
          for (std::size_t k = 0; k != words; ++k) {
            s.look_bits[k] = 0;
          }
          solve_all();
        }
      }
    }
    return look_value(in, pos) != look_negated(in);
  };

  // 2. Forward simulation. A closure adds the consuming instructions reachable from `start` at
  //    `pos` to `list`; it reports whether `match` is reachable (and counts for the verb).
  auto closure = [&](std::int32_t start, std::size_t pos, std::int32_t* list, std::int32_t& count) {
    return nfa_closure(p, start, s.mark, gen, s.stack, list, count, nullptr,
                       [&](std::int32_t pc, inst const& in) {
                         if (in.code == op::assert_at) {
                           return anchor_action(in, text, pos);
                         }
                         if (in.code == op::match) {
                           return v != verb::fullmatch || pos == n ? closure_action::accept : closure_action::none;
                         }
                         if (in.code == op::look) {
                           return look_ok(pc, pos) ? closure_action::follow : closure_action::none;
                         }
                         return closure_action::none;  // look_end: the end of a lookahead's sub-program
                       });
  };

  bool const unanchored = v == verb::search && !p.anchored;
  std::int32_t* cur = s.list_a;
  std::int32_t* nxt = s.list_b;
  std::int32_t n_cur = 0;
  ++gen;
  if (closure(0, 0, cur, n_cur)) {
    return true;
  }
  for (std::size_t pos = 0; pos != n; ++pos) {
    if (n_cur == 0 && !unanchored) {
      return false;
    }
    unsigned char const c = static_cast<unsigned char>(text[pos]);
    ++gen;
    std::int32_t n_nxt = 0;
    if (nfa_step(p, c, cur, n_cur, pos + 1, nxt, n_nxt, closure)) {
      return true;
    }
    if (unanchored && closure(0, pos + 1, nxt, n_nxt)) {
      return true;
    }
    std::swap(cur, nxt);
    n_cur = n_nxt;
  }
  return false;
}

}  // namespace qtl::detail::re
