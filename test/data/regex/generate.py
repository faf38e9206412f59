#!/usr/bin/env python3
"""Differential corpus for qtl's regex engine: random patterns in the supported subset of
Python's `re`, random module names and short strings, and CPython's verdicts for re.match,
re.fullmatch and re.search. Patterns CPython rejects are recorded as errors (qtl must reject
them too, with qtl::regex_error). After the globs come the extended patterns (their own random
stream): lookbehinds, fixed-width or not, and constructs CPython accepts that qtl does not run
(qtl must throw qtl::regex_unsupported_error for them, never qtl::regex_error).

usage: generate.py [--seed N] [--patterns N] [--per-pattern N] [--texts N] [--globs N]
                   [--extended N] > corpus.txt

Format (one record per line; strings are %-encoded: bytes 0x21-0x7e except '%' as themselves,
everything else %XX):
  text <s>                      the next text of the pool (indexed from 0)
  pattern <s> <i>=<mfs> ...     a pattern and, for pool texts i, three digits: match,
                                fullmatch, search (1 = CPython finds a match)
  error <s>                     CPython raises re.error for this pattern
  lacking <s>                   CPython accepts this pattern; it holds a construct qtl does not run
  glob <s> <i>=<b> ...          a glob and fnmatch.fnmatchcase(text i, glob) for pool texts i
"""
import fnmatch
import argparse
import random
import re
import signal
import sys
import warnings

warnings.simplefilter("ignore")  # FutureWarning on '[[' and friends: semantics unchanged

LETTERS = "abdegmlopru_"
DIGITS = "0129"
PUNCT = ".-_"


def enc(s: str) -> str:
    out = []
    for o in s.encode("utf-8"):
        if 0x21 <= o <= 0x7E and o != ord("%"):
            out.append(chr(o))
        else:
            out.append("%%%02X" % o)
    return "".join(out)


def gen_class(r: random.Random) -> str:
    items = []
    for _ in range(r.randint(1, 3)):
        k = r.random()
        if k < 0.3:
            a, b = sorted(r.sample("abdeglmopru", 2))
            items.append(f"{a}-{b}")
        elif k < 0.45:
            a, b = sorted(r.sample("0129", 2))
            items.append(f"{a}-{b}")
        elif k < 0.6:
            items.append(r.choice([r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", r"\.", r"\-", r"\]", r"\\", r"\n"]))
        else:
            items.append(r.choice(LETTERS + DIGITS + ".-_^ "))
    body = "".join(items)
    neg = "^" if r.random() < 0.3 else ""
    if body.startswith("^") and not neg:
        body = "\\" + body
    if r.random() < 0.05:
        body = "]" + body  # ']' first is a literal
    if r.random() < 0.05:
        body = body + "-"  # trailing '-' is a literal
    return f"[{neg}{body}]"


def gen_atom(r: random.Random, depth: int) -> str:
    k = r.random()
    if depth < 3 and k < 0.18:
        inner = gen_alt(r, depth + 1)
        kind = r.choice(["(", "(?:", "(?:", "(?=", "(?!", "(?P<g%d>" % r.randint(0, 99)])
        return f"{kind}{inner})"
    if k < 0.45:
        return r.choice(LETTERS + DIGITS)
    if k < 0.55:
        return "."
    if k < 0.65:
        return r.choice([r"\.", r"\_", r"\-", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", r"\x2e", r"\t", r"\n", r"\056", r"\0"])
    if k < 0.8:
        return gen_class(r)
    if k < 0.88:
        return r.choice(["^", "$", r"\A", r"\Z", r"\b", r"\B"])
    if k < 0.9:
        return r.choice(["{", "}", "a{", "{1", "{x}", "{}", "]"])
    return r.choice(LETTERS)


def gen_quant(r: random.Random) -> str:
    k = r.random()
    if k < 0.55:
        return ""
    q = r.choice(["*", "+", "?", "*", "+", "{%d}" % r.randint(0, 3), "{%d,}" % r.randint(0, 2),
                  "{,%d}" % r.randint(0, 3), "{%d,%d}" % (lambda a: (a, a + r.randint(0, 2)))(r.randint(0, 2)),
                  "{,}"])
    if r.random() < 0.25:
        q += "?"
    return q


def gen_seq(r: random.Random, depth: int) -> str:
    parts = []
    for _ in range(r.randint(0 if depth else 1, 4)):
        a = gen_atom(r, depth)
        if a not in ("^", "$", r"\A", r"\Z", r"\b", r"\B"):
            a += gen_quant(r)
        parts.append(a)
    return "".join(parts)


def gen_alt(r: random.Random, depth: int) -> str:
    alts = [gen_seq(r, depth)]
    while r.random() < 0.25:
        alts.append(gen_seq(r, depth))
    return "|".join(alts)


REAL = [
    r"^model\.layers\.(?!0\.)\d+\.",
    r"^model\.layers\.(?!(?:0|2)\.)\d+\.",
    r".*\.(?:[1-9]|1[0-9]|2[0-1])\..*",
    r".*\.18\..*gate.*",
    r".*down.*",
    r".*mlp\.(gate|up|gate_up|down)_proj.*",
    r".*mlp[.]gate$",
    r"model.layers.*.self_attn",
    r"(?:.*\.)?(?:q|k|v)_proj$",
    r"^(?!.*(?:lm_head|embed)).*proj$",
]


def gen_pattern(r: random.Random):
    """(pattern, mutated): a mutated pattern is kept only when CPython rejects it."""
    if r.random() < 0.03:
        return r.choice(REAL), False
    p = gen_alt(r, 0)
    if r.random() < 0.1:
        i = r.randint(0, len(p))
        return p[:i] + r.choice("()[]{}*+?|\\") + p[i:], True
    return p, False


def gen_text(r: random.Random) -> str:
    k = r.random()
    if k < 0.55:
        layer = r.choice([0, 1, 2, 9, 12, 18, 19, 20, 21, 22, r.randint(0, 93)])
        tail = r.choice([
            "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "self_attn.qkv_proj", "mlp.gate", "mlp.gate_up_proj", "mlp.down_proj",
            "mlp.experts.%d.%s" % (r.randint(0, 127), r.choice(["gate_proj", "up_proj", "down_proj"])),
        ])
        t = f"model.layers.{layer}.{tail}"
        if r.random() < 0.1:
            t = r.choice(["lm_head", "model.embed_tokens", "language_model." + t, t + "."])
    else:
        alphabet = LETTERS + DIGITS + PUNCT + " \t"
        t = "".join(r.choice(alphabet) for _ in range(r.randint(0, 12)))
    if r.random() < 0.05:
        t += "\n"
    if r.random() < 0.02:
        t = t[:len(t) // 2] + "\x1c" + t[len(t) // 2:]
    return t


# Extended patterns -------------------------------------------------------------------------

FIXED_ATOMS = ["a", "b", "e", "l", "m", "o", "p", "r", "_", ".", "0", "1", "2", "9", r"\.", r"\d", r"\w", r"\D",
               "[a-e]", "[^.]", r"\_", "[0-9]", r"\x2e", "(?:ab)"]
ZERO_WIDTH = ["^", "$", r"\b", r"\B", r"\A", r"\Z", "(?#c)"]
# CPython accepts each of these where a backreference's group exists (group 1, named g1, when
# the pattern opens it first); qtl does not run any of them.
LACKING = [r"\1", "(?P=g1)", "(?>a|ab)", "a*+", "b?+", "[0-9]{1,2}+", "(?i:ab)", "(?-i:a)", "(?s:.)",
           "\u00e9", r"\u00e9", r"\xe9", r"\N{EM DASH}", "[\u00e0-\u00e9]", r"[a-\xff]", r"\351"]


def gen_fixed(r: random.Random, depth: int) -> str:
    """A subpattern of fixed width (CPython's getwidth lo == hi)."""
    parts = []
    for _ in range(r.randint(0, 3)):
        k = r.random()
        if k < 0.55:
            a = r.choice(FIXED_ATOMS)
            if r.random() < 0.15:
                a = "(?:%s){%d}" % (a, r.randint(0, 3))
            parts.append(a)
        elif k < 0.7:
            parts.append(r.choice(ZERO_WIDTH))
        elif k < 0.8 and depth < 3:
            parts.append(r.choice(["(?=", "(?!"]) + gen_alt(r, 2) + ")")
        elif k < 0.9 and depth < 3:
            w = r.randint(1, 3)
            alts = ["".join(r.choice(FIXED_ATOMS) for _ in range(w)) for _ in range(r.randint(2, 3))]
            parts.append(r.choice(["(?:", "("]) + "|".join(alts) + ")")
        elif depth < 3:
            parts.append(gen_lookbehind(r, depth + 1))
    return "".join(parts)


def gen_lookbehind(r: random.Random, depth: int) -> str:
    body = gen_fixed(r, depth) if r.random() < 0.85 else gen_alt(r, 2)  # the latter: often variable
    return r.choice(["(?<=", "(?<!"]) + body + ")"


def gen_extended(r: random.Random):
    """(pattern, mutated, lacking): `lacking` when a construct qtl does not run was put in."""
    parts = []
    lacking = False
    if r.random() < 0.08:
        parts.append(r.choice(["(?i)", "(?m)", "(?a)", "(?s)", "(?u)"]))
        lacking = True
    if r.random() < 0.3:
        parts.append(r.choice(["(", "(?P<g1>"]) + gen_alt(r, 2) + ")")
    for _ in range(r.randint(1, 4)):
        k = r.random()
        if k < 0.5:
            a = gen_lookbehind(r, 0)
            if r.random() < 0.1:
                a = r.choice(["(?=", "(?!", "(?:"]) + a + ")" + r.choice(["", "*", "?"])
            parts.append(a)
        elif k < 0.62:
            parts.append(r.choice(LACKING))
            lacking = True
        else:
            parts.append(gen_seq(r, 1))
    p = "".join(parts)
    if r.random() < 0.1 and "\\N{" not in p:  # a name's validity is Unicode's: not qtl's to judge
        i = r.randint(0, len(p))
        return p[:i] + r.choice("()[]{}*+?|\\") + p[i:], True, lacking
    return p, False, lacking


def verdicts(r: random.Random, c, texts, per_pattern: int):
    """CPython's match / fullmatch / search on `per_pattern` pool texts, or None (too slow)."""
    idx = sorted(r.sample(range(len(texts)), per_pattern))
    res = []
    # CPython backtracks: a pattern that takes it too long is dropped (qtl does not care).
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        for i in idx:
            t = texts[i]
            res.append("%d=%d%d%d" % (i, c.match(t) is not None, c.fullmatch(t) is not None,
                                      c.search(t) is not None))
    except Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return res


def write_patterns(out, r: random.Random, gen, count: int, texts, per_pattern: int, seen: set):
    """Writes `count` records of the patterns of `gen(r)`, (pattern, mutated, lacking) each, not in
    `seen`: an error, a lacking pattern, or a pattern with CPython's verdicts. A mutated pattern
    is kept only when CPython rejects it, since a mutation may produce valid syntax outside the
    subset (possessive repeats, backreferences)."""
    made = 0
    while made < count:
        p, mutated, lacking = gen(r)
        if p in seen:
            continue
        seen.add(p)
        try:
            c = re.compile(p)
        except re.error:
            out.write("error %s\n" % enc(p))
            made += 1
            continue
        except (OverflowError, RecursionError):
            continue
        if mutated:
            continue
        if lacking:
            out.write("lacking %s\n" % enc(p))
            made += 1
            continue
        res = verdicts(r, c, texts, per_pattern)
        if res is None:
            continue
        out.write("pattern %s %s\n" % (enc(p), " ".join(res)))
        made += 1


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def glob_from_text(r: random.Random, t: str) -> str:
    """A glob that a pool text is likely to match: pieces of the text, wildcards between."""
    out = []
    i = 0
    while i < len(t):
        k = r.random()
        if k < 0.1:
            out.append("*")
            i += r.randint(0, 6)
        elif k < 0.15:
            out.append("?")
            i += 1
        elif k < 0.2:
            c = t[i]
            lo, hi = chr(max(33, ord(c) - r.randint(0, 3))), chr(min(126, ord(c) + r.randint(-1, 3)))
            out.append("[" + r.choice(["", "!"]) + lo + "-" + hi + "]")
            i += 1
        else:
            out.append(t[i])
            i += 1
    return "".join(out)


def gen_glob(r: random.Random, texts) -> str:
    if r.random() < 0.5:
        src = r.randrange(len(texts))
        return glob_from_text(r, texts[src]), src
    parts = []
    for _ in range(r.randint(1, 6)):
        k = r.random()
        if k < 0.25:
            parts.append("*")
        elif k < 0.35:
            parts.append("?")
        elif k < 0.6:
            body = "".join(r.choice("abdeglmopru0129.-_!^]\\[&~|") for _ in range(r.randint(0, 5)))
            parts.append("[" + body + ("]" if r.random() < 0.9 else ""))
        else:
            parts.append(r.choice(["model", "layers", ".", "mlp", "gate", "proj", "_", "1", "2",
                                   "experts", "self_attn", "a", "b", "e"]))
    return "".join(parts), None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--patterns", type=int, default=3000)
    ap.add_argument("--per-pattern", type=int, default=24)
    ap.add_argument("--texts", type=int, default=400)
    ap.add_argument("--globs", type=int, default=1000)
    ap.add_argument("--extended", type=int, default=1500)
    a = ap.parse_args()
    signal.signal(signal.SIGALRM, on_alarm)
    r = random.Random(a.seed)
    texts = [gen_text(r) for _ in range(a.texts)]
    out = sys.stdout
    out.write("# generated by test/data/regex/generate.py --seed %d --patterns %d --per-pattern %d --texts %d --globs %d"
              " --extended %d (CPython %s)\n" % (a.seed, a.patterns, a.per_pattern, a.texts, a.globs, a.extended,
                                                 sys.version.split()[0]))
    for t in texts:
        out.write("text %s\n" % enc(t))
    seen = set()
    write_patterns(out, r, lambda r: (*gen_pattern(r), False), a.patterns, texts, a.per_pattern, seen)
    for _ in range(a.globs):
        g, src = gen_glob(r, texts)
        idx = r.sample(range(len(texts)), a.per_pattern)
        if src is not None and src not in idx:
            idx[0] = src
        idx = sorted(idx)
        res = ["%d=%d" % (i, fnmatch.fnmatchcase(texts[i], g)) for i in idx]
        out.write("glob %s %s\n" % (enc(g), " ".join(res)))
    write_patterns(out, random.Random(a.seed + 1), gen_extended, a.extended, texts, a.per_pattern, seen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
