"""The command line of the source checks of test/headers/ (include_boundaries.py,
file_references.py): `SCRIPT ROOT` runs the check on the tree at ROOT and prints each problem and
a summary; `SCRIPT --self-test` runs the check's self-test. Exit status 1 on any problem or a
failed self-test."""
import sys


def run(check, self_test, problems_are, clean):
    """`check(root)` returns the problems as lines; `self_test()` returns whether it passed."""
    if sys.argv[1:2] == ["--self-test"]:
        return 0 if self_test() else 1
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    print(f"{len(problems)} {problems_are}" if problems else clean)
    return 1 if problems else 0
