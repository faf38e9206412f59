"""The check counter of the tool tests: each test script calls `check` for every expectation and
`finish` at the end, which prints "N checks, N failures" and exits 1 if any failed."""
import sys

failures = []
checks = 0


def check(cond, what):
    """Counts one expectation; prints and records `what` when `cond` is false."""
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def finish():
    print("%d checks, %d failures" % (checks, len(failures)))
    sys.exit(1 if failures else 0)
