#pragma once
/// \file
/// The regex engine's matcher (internal): a Thompson-NFA set simulation over a `program_view`,
/// with lookaheads answered from per-position tables computed by backward passes.
///
/// Cost, for a text of n bytes and a program of m instructions:
///   * forward simulation: each position visits each instruction at most once -> O(n * m);
///   * each lookahead `(?=X)`/`(?!X)` is evaluated at every position at once by one backward
///     pass over the text, simulating X's reversed NFA -> O(n * |X|); nested lookaheads are
///     solved innermost first. Total O(n * m * (1 + d)), d = the lookahead nesting depth
///     (d = 1 for every pattern seen in real configs, so O(n * m)).
/// No recursion on the system stack (an explicit stack of at most m entries), and no heap: the
/// caller passes the scratch memory (fixed arrays in constant evaluation, vectors at run time).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <qtl/match/detail/regex_program.hpp>

namespace qtl::detail::re {

enum class verb : std::uint8_t { match, fullmatch, search };

/// Scratch memory for one run: `mark`, `list_a`, `list_b`, `stack` hold program-size entries;
/// `look_bits` holds n_looks * (text size + 1) bits.
struct scratch_view {
  std::uint32_t* mark;
  std::int32_t* list_a;
  std::int32_t* list_b;
  std::int32_t* stack;
  std::uint64_t* look_bits;
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
constexpr bool run_nfa(program_view const& p, std::string_view text, verb v, scratch_view s) {
  std::size_t const n = text.size();
  std::size_t const row = n + 1;
  std::uint32_t gen = 0;
  for (std::int32_t k = 0; k != p.size; ++k) {
    s.mark[k] = 0;
  }
  auto look_ok = [&](inst const& in, std::size_t pos) {
    std::size_t const bit = static_cast<std::size_t>(in.y) * row + pos;
    bool const sub_matches = ((s.look_bits[bit >> 6] >> (bit & 63)) & 1u) != 0;
    return sub_matches != (in.arg != 0);
  };

  // 1. Lookahead tables, innermost first (a nested lookahead has a larger pc than its parent).
  if (p.n_looks > 0) {
    std::size_t const words = look_words(p.n_looks, n);
    for (std::size_t k = 0; k != words; ++k) {
      s.look_bits[k] = 0;
    }
    for (std::int32_t L = p.size - 1; L >= 0; --L) {
      inst const& look = p.code[L];
      if (look.code != op::look) {
        continue;
      }
      std::int32_t const end = look.x - 1;  // its look_end
      // R_pos = { pc in (L, end] : from pc at pos the sub-program reaches look_end }.
      // R_pos members carry mark == gen; R_{pos+1}'s carried gen - 1.
      for (std::size_t pos = n + 1; pos-- > 0;) {
        ++gen;
        std::int32_t sp = 0;
        if (pos < n) {
          unsigned char const c = static_cast<unsigned char>(text[pos]);
          for (std::int32_t q = L + 1; q < end; ++q) {
            inst const& in = p.code[q];
            if (is_consuming(in.code) && s.mark[q + 1] == gen - 1 && consumes(in, p.sets, c)) {
              s.stack[sp++] = q;
            }
          }
          for (std::int32_t k = 0; k != sp; ++k) {
            s.mark[s.stack[k]] = gen;
          }
        }
        if (s.mark[end] != gen) {
          s.mark[end] = gen;
          s.stack[sp++] = end;
        }
        while (sp > 0) {
          std::int32_t const t = s.stack[--sp];
          for (std::int32_t e = p.pred_begin[t]; e != p.pred_begin[t + 1]; ++e) {
            std::int32_t const q = p.preds[e];
            if (s.mark[q] == gen) {
              continue;
            }
            inst const& in = p.code[q];
            bool ok = true;
            if (in.code == op::assert_at) {
              ok = anchor_holds(in.arg, text, pos);
            } else if (in.code == op::look) {
              ok = look_ok(in, pos);
            }
            if (ok) {
              s.mark[q] = gen;
              s.stack[sp++] = q;
            }
          }
        }
        if (s.mark[L + 1] == gen) {
          std::size_t const bit = static_cast<std::size_t>(look.y) * row + pos;
          s.look_bits[bit >> 6] |= std::uint64_t{1} << (bit & 63);
        }
      }
    }
  }

  // 2. Forward simulation. A closure adds the consuming instructions reachable from `start` at
  //    `pos` to `list`; it reports whether `match` is reachable (and counts for the verb).
  auto closure = [&](std::int32_t start, std::size_t pos, std::int32_t* list, std::int32_t& count) {
    if (s.mark[start] == gen) {
      return false;
    }
    s.mark[start] = gen;
    std::int32_t sp = 0;
    s.stack[sp++] = start;
    auto push = [&](std::int32_t t) {
      if (s.mark[t] != gen) {
        s.mark[t] = gen;
        s.stack[sp++] = t;
      }
    };
    while (sp > 0) {
      std::int32_t const pc = s.stack[--sp];
      inst const& in = p.code[pc];
      switch (in.code) {
        case op::byte:
        case op::any:
        case op::set: list[count++] = pc; break;
        case op::match:
          if (v != verb::fullmatch || pos == n) {
            return true;
          }
          break;
        case op::jmp: push(in.x); break;
        case op::split: push(in.y); push(in.x); break;
        case op::assert_at:
          if (anchor_holds(in.arg, text, pos)) {
            push(pc + 1);
          }
          break;
        case op::look:
          if (look_ok(in, pos)) {
            push(in.x);
          }
          break;
        case op::look_end: break;
      }
    }
    return false;
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
    for (std::int32_t k = 0; k != n_cur; ++k) {
      std::int32_t const pc = cur[k];
      if (consumes(p.code[pc], p.sets, c) && closure(pc + 1, pos + 1, nxt, n_nxt)) {
        return true;
      }
    }
    if (unanchored && closure(0, pos + 1, nxt, n_nxt)) {
      return true;
    }
    std::int32_t* const t = cur;
    cur = nxt;
    nxt = t;
    n_cur = n_nxt;
  }
  return false;
}

}  // namespace qtl::detail::re
