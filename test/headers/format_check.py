#!/usr/bin/env python3
"""The house format, enforced: every C++ and CUDA source of the repository (include/, tools/,
python/src/, test/, bench/, examples/, fuzz/; not test/compile_fail/, whose snippets are compared
with compiler messages by line, nor test/data/) must be as clang-format 14 writes it with the
repository's .clang-format, except the files listed in format_exempt.txt beside this script: the
sources written before the check, each formatted and taken off the list when it is next worked on.
A listed file that is already formatted fails too (take it off), so the list only shrinks and a
new file is checked from its first commit.

Usage: format_check.py ROOT        exit 0 clean, 1 naming each file to format (and how), 77 when
                                   clang-format 14 is not installed (Debian: apt-get install clang-format)
"""
import pathlib
import shutil
import subprocess
import sys

FOLDERS = ("include", "tools", "python/src", "test", "bench", "examples", "fuzz")
SKIP = ("test/compile_fail/", "test/data/")
SUFFIXES = {".hpp", ".cpp", ".cuh", ".cu", ".h"}


def clang_format():
    for name in ("clang-format-14", "clang-format"):
        path = shutil.which(name)
        if path:
            out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
            if " 14." in out:
                return path
    return None


def sources(root):
    for folder in FOLDERS:
        for p in sorted((root / folder).rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and p.suffix in SUFFIXES and not rel.startswith(SKIP):
                yield rel


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    tool = clang_format()
    if tool is None:
        print("clang-format 14 is not installed: the format is not checked (apt-get install clang-format)")
        return 77
    exempt_file = pathlib.Path(__file__).with_name("format_exempt.txt")
    exempt = {line.strip() for line in exempt_file.read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")}
    problems = []
    seen = set()
    for rel in sources(root):
        seen.add(rel)
        clean = subprocess.run([tool, "--dry-run", "-Werror", str(root / rel)], cwd=root,
                               capture_output=True).returncode == 0
        if rel in exempt and clean:
            problems.append(f"{rel}: formatted now: take it off test/headers/format_exempt.txt")
        elif rel not in exempt and not clean:
            problems.append(f"{rel}: not as clang-format 14 writes it (clang-format-14 -i {rel})")
    for rel in sorted(exempt - seen):
        problems.append(f"test/headers/format_exempt.txt lists {rel}, which is not a checked source")
    for p in problems:
        print(p)
    print(f"{len(seen)} sources, {len(exempt)} exempt, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
