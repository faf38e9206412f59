#!/usr/bin/env python3
"""Fails on a reference to a file of this repository that does not exist, and on a citation of a
section of docs/spec/ that does not exist (exit 1 naming each, with its file and line).

Usage: file_references.py ROOT        check the repository at ROOT
       file_references.py --self-test

What is read: the comments of the sources (C, C++, CUDA: // and /* */; Python: # and string
literals in triple quotes; Meson, shell, TOML, requirements files: #) and whole Markdown files,
under the repository's top-level folders and its top-level files; under test/data/ only the .py
and .md files (the rest is data). String literals in code are not read: the build and the tests
use those paths, so a wrong one fails there.

A reference is a token of path characters that is one of:
  * a path whose first folder is a top-level folder of the repository (include/, tools/, test/,
    docs/, ...) and whose second component exists there (so that other projects' paths that
    happen to start alike, such as sglang's python/sglang/..., are not read as ours), or one of
    the folders that are not in the repository (research/, reference/, golden/, shared/: notes
    kept outside it);
  * a header path qtl/...(.hpp|.cuh|.h), or one relative to include/qtl/ (x86/fp8.hpp);
  * any name or path ending in .md.
A token right after ':' or '@' is another project's (owner/repo:path, file@revision). A reference
resolves when the file exists relative to the referring file's folder or a folder above it (up to
the repository root), or, for a header, under include/ or include/qtl/.

Sections: a reference to a Markdown file of docs/spec/ followed by section numbers (`§2.4`,
`§4.1-§4.5`, `§6, §7`, `§8.2/§8.3`, `section 3.1`, `sections 3-4`) must name headings of that file
(`## 2. ...`, `### 2.4 ...`); so must a bare `§N.M` inside a docs/spec/ file (its own sections).

`--self-test` builds a small tree with one good and one bad reference of each kind and fails unless
exactly the bad ones are reported.
"""
import io
import pathlib
import re
import sys
import tempfile
import tokenize

import source_check

TOP_FOLDERS = ("include", "tools", "python", "test", "bench", "docs", "examples", "scripts", "fuzz",
               "cmake", ".ci")
ABSENT_FOLDERS = ("research", "reference", "golden", "shared")
C_LIKE = {".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh", ".c"}
HASH_LIKE = {".build", ".sh", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml"}
HASH_NAMES = {"run", "meson_options.txt", "meson.build"}
HEADER_EXT = (".hpp", ".cuh", ".h")

TOKEN = re.compile(r"(?<![\w./@:$-])((?:\.\./)*[\w.-]+(?:/[\w.-]+)*)")
NUM = r"\d+(?:\.\d+)*"
SECTIONS_SIGN = re.compile(rf"[`'\"*]*\s*(§\s?{NUM}(?:\s*(?:-|–|,|/|and)\s*§\s?{NUM})*)")
SECTIONS_WORD = re.compile(rf"[`'\"*]*\s*(sections?\s+{NUM}(?:\s*(?:-|–|,|and)\s*{NUM})*)")
BARE_SECTIONS = re.compile(rf"§\s?({NUM})")
HEADING = re.compile(rf"^#{{2,6}}\s+({NUM})\.?\s")


def language(path):
    """'c', 'py', 'hash', 'md' or None (not read), by the name (a trailing .in is looked through)."""
    name = path.name[:-3] if path.name.endswith(".in") else path.name
    suffix = pathlib.PurePath(name).suffix
    if suffix in C_LIKE:
        return "c"
    if suffix in (".py", ".pyi"):
        return "py"
    if suffix == ".md":
        return "md"
    if suffix in HASH_LIKE or name in HASH_NAMES:
        return "hash"
    return None


C_TOKENS = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|\bR"([^()\\\s]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"?"""
                      r"""|(?<!\w)'(?:\\.|[^'\\\n])*'?""", re.S)
NOT_NEWLINE = re.compile(r"[^\n]")


def blank(text):
    return NOT_NEWLINE.sub(" ", text)


def mask_c(text):
    """The comments of C-family source, everything else (code, string and character literals)
    blanked, newlines kept. A quote after a letter or digit is a digit separator (1'000), not a
    character literal."""
    out, last = [], 0
    for m in C_TOKENS.finditer(text):
        out.append(blank(text[last:m.start()]))
        token = m.group(0)
        out.append(token if token.startswith(("//", "/*")) else blank(token))
        last = m.end()
    out.append(blank(text[last:]))
    return "".join(out)


def mask_hash(text):
    """The # comments of Meson, shell and the like (quoted strings skipped)."""
    lines = []
    for line in text.split("\n"):
        quote, cut = None, None
        for k, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                cut = k
                break
        lines.append(" " * cut + line[cut:] if cut is not None else "")
    return "\n".join(lines)


def mask_py(text):
    """Python's # comments and triple-quoted strings (docstrings), everything else blanked."""
    lines = text.split("\n")
    out = [[" "] * len(line) for line in lines]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    for tok in tokens:
        triple_quoted = tok.type == tokenize.STRING and re.match(r"^[rbuRBUfF]*('''|\"\"\")", tok.string)
        if tok.type == tokenize.COMMENT or triple_quoted:
            (r0, c0), (r1, c1) = tok.start, tok.end
            for r in range(r0, r1 + 1):
                line = lines[r - 1]
                a = c0 if r == r0 else 0
                b = c1 if r == r1 else len(line)
                out[r - 1][a:b] = line[a:b]
    return "\n".join("".join(row) for row in out)


def readable(text, lang):
    return {"c": mask_c, "hash": mask_hash, "py": mask_py, "md": lambda t: t}[lang](text)


def sources(root):
    """Every file the check reads, sorted."""
    found = [p for p in root.iterdir() if p.is_file()]
    for top in TOP_FOLDERS:
        if (root / top).is_dir():
            found += [p for p in (root / top).rglob("*") if p.is_file()]
    keep = []
    for p in found:
        rel = p.relative_to(root).parts
        if rel[:2] == ("test", "data") and p.suffix not in (".py", ".md"):
            continue
        if language(p):
            keep.append(p)
    return sorted(keep)


def bases(root, path):
    """The referring file's folder and every folder above it, up to the root."""
    out, d = [], path.parent
    while True:
        out.append(d)
        if d == root:
            return out
        d = d.parent


def is_reference(root, path, token):
    if "/" not in token and not token.endswith(".md"):
        return False
    parts = token.split("/")
    first = next((p for p in parts if p != ".."), "")
    if first in ABSENT_FOLDERS and len(parts) >= 2:
        return True
    if re.search(r"[\w-]\.md$", token):
        return True
    if token.startswith("qtl/") and token.endswith(HEADER_EXT):
        return True
    if first in TOP_FOLDERS and len(parts) >= 2 and "." in parts[-1]:
        if len(parts) == 2:
            return True
        return any((b / parts[0] / parts[1]).exists() for b in bases(root, path))
    if (root / "include" / "qtl" / first).is_dir() and token.endswith(HEADER_EXT):
        return True
    return False


def resolve(root, path, token):
    """The file `token` names, or None; a path that leaves the repository (../..) names none."""
    candidates = [b / token for b in bases(root, path)]
    if token.endswith(HEADER_EXT):
        candidates += [root / "include" / token, root / "include" / "qtl" / token]
    inside = (c.resolve() for c in candidates if c.is_file())
    return next((c for c in inside if c.is_relative_to(root)), None)


def headings(md_path, cache={}):
    if md_path not in cache:
        cache[md_path] = {m.group(1) for line in md_path.read_text(encoding="utf-8").splitlines()
                          for m in [HEADING.match(line)] if m}
    return cache[md_path]


def cited_sections(rest):
    """The section numbers cited right after a reference (the text that follows it on its line)."""
    m = SECTIONS_SIGN.match(rest) or SECTIONS_WORD.match(rest)
    return re.findall(NUM, m.group(1)) if m else []


def check(root):
    root = pathlib.Path(root).resolve()
    spec = root / "docs" / "spec"
    problems = []
    for path in sources(root):
        rel = path.relative_to(root).as_posix()
        try:
            text = readable(path.read_text(encoding="utf-8"), language(path))
        except UnicodeDecodeError:
            continue
        in_spec = path.parent == spec
        for n, line in enumerate(text.split("\n"), 1):
            cited_here = set()
            for m in TOKEN.finditer(line):
                token = m.group(1).rstrip(".")
                if not is_reference(root, path, token):
                    continue
                target = resolve(root, path, token)
                if target is None:
                    problems.append(f"{rel}:{n}: {token} does not exist")
                    continue
                if target.suffix == ".md" and target.parent == spec:
                    tail = line[m.end():]
                    sections = cited_sections(tail)
                    cited_here.update(range(m.end(), m.end() + len(tail)) if sections else ())
                    for s in sections:
                        if s not in headings(target):
                            problems.append(f"{rel}:{n}: {token} has no section §{s}")
            if in_spec:
                for m in BARE_SECTIONS.finditer(line):
                    if m.start() not in cited_here and m.group(1) not in headings(path):
                        problems.append(f"{rel}:{n}: no section §{m.group(1)} in this file")
    return problems


def self_test():
    tree = {
        "include/qtl/a.hpp": "#pragma once\n/// see qtl/b.hpp and docs/spec/s.md §1.2, x86/c.hpp\n"
                             "/// vllm/model_executor/utils.py, python/sglang/x.py, owner/repo:README.md\n"
                             'char const* s = "research/ignored_in_code.md";\n',
        "include/qtl/b.hpp": "// qtl/missing.hpp (bad 1)\n/* research/semantics.md (bad 2) */\n",
        "include/qtl/x86/c.hpp": "// docs/spec/s.md §1.3 (bad 3), docs/spec/s.md §2 and §1.2\n",
        "docs/spec/s.md": "# S\n## 1. One\n### 1.2 Two\n## 2. Three\nSee §1.2, and §7 (bad 4); t.md (bad 5).\n",
        "test/t.py": '"""Uses include/qtl/a.hpp and include/qtl/gone.hpp (bad 6), ../../outside.md (bad 8)."""\n'
                     'x = "docs/none.md"  # docs/spec/s.md section 2\n',
        "test/meson.build": "# tools/meson.build: test/tools here; golden/README.md (bad 7)\n",
        "test/tools/meson.build": "\n",
        "test/data/blob.txt": "research/not_read.md\n",
    }
    expected = ["include/qtl/b.hpp:1: qtl/missing.hpp", "include/qtl/b.hpp:2: research/semantics.md",
                "include/qtl/x86/c.hpp:1: docs/spec/s.md has no section §1.3", "docs/spec/s.md:5: no section §7",
                "docs/spec/s.md:5: t.md", "test/t.py:1: include/qtl/gone.hpp", "test/meson.build:1: golden/README.md",
                "test/t.py:1: ../../outside.md"]
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d) / "repo"
        for rel, text in tree.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        (pathlib.Path(d) / "outside.md").write_text("a file beside the repository\n")
        found = check(root)
    missed = [e for e in expected if not any(p.startswith(e) for p in found)]
    extra = [p for p in found if not any(p.startswith(e) for e in expected)]
    for e in missed:
        print(f"self-test: not reported: {e}")
    for p in extra:
        print(f"self-test: reported wrongly: {p}")
    print("self-test: every bad reference reported, no good one" if not (missed or extra) else "self-test failed")
    return not (missed or extra)


if __name__ == "__main__":
    sys.exit(source_check.run(check, self_test, "references to missing files or sections",
                              "every reference resolves"))
