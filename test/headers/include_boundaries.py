#!/usr/bin/env python3
"""The layering of architecture.md, checked on the headers under INCLUDE_DIR (exit 1 naming every
line that crosses a forbidden boundary):

  1. no header outside qtl/cuda/ includes qtl/cuda/ (host headers need no CUDA Toolkit);
  2. no header outside qtl/io/ includes qtl/io/ (only qtl/io/ needs nlohmann-json);
  3. qtl/match/ includes only qtl/match/ and the core macros, error and fixed-string headers;
  4. a core header includes only core headers;
  5. qtl/element/ includes only core and element headers (it lies below every executor);
  6. qtl/x86/ includes only core, element, qtl/detail/band_executor.hpp and qtl/x86/ headers;
  7. x86 intrinsics, their headers and the CPU-feature check appear only under qtl/x86/ (the
     check itself only in qtl/x86/isa.hpp).

`--self-test` builds small trees that break each rule once and fails unless every one is caught.
"""
import pathlib
import re
import sys
import tempfile

import source_check

CORE = {"qtl/macros.hpp", "qtl/error.hpp", "qtl/fixed_string.hpp", "qtl/view.hpp", "qtl/numeric.hpp",
        "qtl/exact.hpp", "qtl/group_size.hpp", "qtl/scalar_type.hpp", "qtl/dispatch.hpp", "qtl/type_list.hpp"}
MATCH_MAY = {"qtl/macros.hpp", "qtl/error.hpp", "qtl/fixed_string.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
INTRINSIC = re.compile(r"\b(_mm\w*|__m(128|256|512)\w*)\b|<(imm|emm|xmm|pmm|tmm|smm|nmm|wmm|zmm)intrin\.h>|<cpuid\.h>")
CPU_CHECK = re.compile(r"__builtin_cpu_supports|__get_cpuid|\bcpuid\b")


def strip_comment(line):
    return line.split("//", 1)[0]


def check(root):
    root = pathlib.Path(root)
    problems = []
    for path in sorted(root.glob("qtl/**/*")):
        if path.suffix not in (".hpp", ".cuh") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        in_dir = lambda d: rel.startswith(d)  # noqa: E731
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{rel}:{n}"
            code = strip_comment(line)
            m = INCLUDE.match(code)
            inc = m.group(1) if m else None
            if inc and inc.startswith("qtl/"):
                if inc.startswith("qtl/cuda/") and not in_dir("qtl/cuda/"):
                    problems.append(f"{where}: a host header includes {inc} (rule 1)")
                if inc.startswith("qtl/io/") and not in_dir("qtl/io/"):
                    problems.append(f"{where}: includes {inc} outside qtl/io/ (rule 2)")
                if in_dir("qtl/match/") and not (inc.startswith("qtl/match/") or inc in MATCH_MAY):
                    problems.append(f"{where}: qtl/match/ includes {inc} (rule 3)")
                if rel in CORE and inc not in CORE:
                    problems.append(f"{where}: core header includes {inc} (rule 4)")
                if in_dir("qtl/element/") and not (inc in CORE or inc.startswith("qtl/element/")):
                    problems.append(f"{where}: element header includes {inc} (rule 5)")
                if in_dir("qtl/x86/") and not (inc in CORE or inc.startswith("qtl/element/") or
                                               inc.startswith("qtl/x86/") or inc == "qtl/detail/band_executor.hpp"):
                    problems.append(f"{where}: x86 header includes {inc} (rule 6)")
            if not in_dir("qtl/x86/") and INTRINSIC.search(code):
                problems.append(f"{where}: x86 intrinsics outside qtl/x86/ (rule 7)")
            if rel != "qtl/x86/isa.hpp" and CPU_CHECK.search(code):
                problems.append(f"{where}: a CPU-feature check outside qtl/x86/isa.hpp (rule 7)")
    return problems


def self_test():
    clean = {"qtl/macros.hpp": "", "qtl/view.hpp": '#include <qtl/macros.hpp>\n',
             "qtl/x86/isa.hpp": "#include <immintrin.h>\nbool f() { return __builtin_cpu_supports(\"avx2\"); }\n"}
    breaks = {
        "rule 1": {"qtl/pack.hpp": "#include <qtl/cuda/pack.cuh>\n"},
        "rule 2": {"qtl/rules/config.hpp": "#include <qtl/io/quant_config.hpp>\n"},
        "rule 3": {"qtl/match/glob.hpp": "#include <qtl/quantize.hpp>\n"},
        "rule 4": {"qtl/numeric.hpp": "#include <qtl/pack.hpp>\n"},
        "rule 5": {"qtl/element/pack.hpp": "#include <qtl/x86/isa.hpp>\n"},
        "rule 6": {"qtl/x86/pack.hpp": "#include <qtl/pack.hpp>\n"},
        "rule 7": {"qtl/fp8.hpp": "inline __m128 f();\n"},
    }
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        base = pathlib.Path(d) / "clean"
        for rel, text in clean.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        if check(base):
            print("self-test: the clean tree is flagged:", check(base))
            failed += 1
        for rule, files in breaks.items():
            tree = pathlib.Path(d) / rule.replace(" ", "_")
            for rel, text in {**clean, **files}.items():
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_text(text)
            found = check(tree)
            if not any(f"({rule})" in p for p in found):
                print(f"self-test: a break of {rule} went unnoticed ({found})")
                failed += 1
    print(f"self-test: {len(breaks)} rules, {failed} not caught" if failed else f"self-test: all {len(breaks)} rules fire")
    return failed == 0


if __name__ == "__main__":
    sys.exit(source_check.run(check, self_test, "include-boundary problems",
                              "no include crosses a boundary"))
