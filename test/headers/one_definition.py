#!/usr/bin/env python3
"""One definition each, checked by grep over the source tree at ROOT: every shared rule
is written in exactly one place, and no other file spells it out again.

  exact-rounding arithmetic   the CUDA `_rn` intrinsics are called only in qtl/exact.hpp
  group-size rule             "-1 or >= K means one group per column" only in qtl/group_size.hpp
  GPTQ group-size set         "-1, 32, 64, 128" as code only in qtl/group_size.hpp
  memcpy baseline             the timed memcpy loop of the host benchmarks only in bench/support/
  D2D copy baseline           the device-to-device copy of the CUDA benchmarks only in bench/cuda/support/
  CPU-feature check           only in qtl/x86/isa.hpp

Comments are not code: `//` tails are ignored. KNOWN lists places that still repeat a rule in files
this change does not own (each names the file, the line's text and who owns it); a KNOWN entry
that no longer matches anything is an error too, so that the list shrinks as they are fixed.
"""
import pathlib
import re
import sys

RULES = [
    ("exact-rounding arithmetic", re.compile(r"__f(add|sub|mul|div)_rn\s*\("), {"include/qtl/exact.hpp"}),
    ("group-size rule", re.compile(r"==\s*-1\s*\|\|\s*[\w.]+\s*>=\s*k\b"), {"include/qtl/group_size.hpp"}),
    ("GPTQ group-size set", re.compile(r"==\s*32\s*\|\|[^;]*==\s*64\s*\|\|[^;]*==\s*128"), {"include/qtl/group_size.hpp"}),
    ("memcpy baseline", re.compile(r"std::memcpy\(\s*dst[\w.()]*,\s*src"), {"bench/support/memcpy_baseline.hpp"}),  # bench/ only
    ("D2D copy baseline", re.compile(r"cudaMemcpyDeviceToDevice"),
     {"bench/cuda/support/device_bench.cuh"}),  # bench/ only
    ("CPU-feature check", re.compile(r"__builtin_cpu_supports|__get_cpuid"), {"include/qtl/x86/isa.hpp"}),
]
# (rule, file, owner): repeats left in files owned by other work (the lead removes them on merge).
KNOWN = {
}
FOLDERS = ("include", "tools", "bench")  # not test/: tests may restate a rule as an independent oracle
# the library copies bytes too; only benchmarks time it
ONLY_IN = {"memcpy baseline": "bench/", "D2D copy baseline": "bench/"}


def main():
    root = pathlib.Path(sys.argv[1])
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".hpp", ".cuh", ".cpp", ".cu") or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                code = line.split("//", 1)[0]
                for name, pattern, homes in RULES:
                    if not rel.startswith(ONLY_IN.get(name, "")):
                        continue
                    if pattern.search(code):
                        found.setdefault((name, rel), []).append(n)
    problems = []
    for name, _, homes in RULES:
        for home in homes:
            if (name, home) not in found:
                problems.append(f"{name}: its one definition is missing from {home}")
    for (name, rel), lines in sorted(found.items()):
        homes = next(h for r, _, h in RULES if r == name)
        if rel in homes or (name, rel) in KNOWN:
            continue
        problems.append(f"{name}: written again in {rel}:{','.join(map(str, lines))}")
    for (name, rel), owner in sorted(KNOWN.items()):
        if (name, rel) not in found:
            problems.append(f"{name}: KNOWN lists {rel} ({owner}), which no longer repeats it: drop the entry")
        else:
            print(f"known repeat, left to {owner}: {name} in {rel}")
    for p in problems:
        print(p)
    print(f"{len(problems)} problems" if problems else "one definition each")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
