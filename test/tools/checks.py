"""The check counter of the tool tests: each test script calls `check` for every expectation and
`finish` at the end, which prints "N checks, N failures" and exits 1 if any failed;
`run_in_temp_dir` does both around a script's tests, in a temporary folder it removes."""
import shutil
import sys
import tempfile

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


def run_in_temp_dir(prefix, body):
    """Calls body(tmp) with a new temporary folder named `prefix`..., removes the folder whatever
    happens, then finishes (prints the counts and exits)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()
