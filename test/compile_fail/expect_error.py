#!/usr/bin/env python3
"""Must-not-compile test runner.

usage: expect_error.py SOURCE -- COMPILER [ARGS...]

SOURCE's first line is `// expected-error: <regex>`. The test passes when
  1. compiling SOURCE fails and the diagnostic matches <regex> (so it fails for the intended reason), and
  2. compiling SOURCE with -DQTL_COMPILE_FAIL_TWIN succeeds (the twin that differs only in the
     offending detail compiles, so the error is not caused by something else in the file).
"""
import re
import subprocess
import sys

src = sys.argv[1]
compiler = sys.argv[sys.argv.index("--") + 1:]
first = open(src, encoding="utf-8").readline()
m = re.match(r"//\s*expected-error:\s*(.+)", first)
if not m:
    sys.exit(f"{src}: first line must be '// expected-error: <regex>'")
pattern = m.group(1).strip()

bad = subprocess.run(compiler + [src], capture_output=True, text=True)
if bad.returncode == 0:
    sys.exit(f"{src}: compiled, but it must fail with /{pattern}/")
if not re.search(pattern, bad.stderr):
    print(bad.stderr[-4000:])
    sys.exit(f"{src}: failed, but the diagnostic does not match /{pattern}/")

twin = subprocess.run(compiler + ["-DQTL_COMPILE_FAIL_TWIN", src], capture_output=True, text=True)
if twin.returncode != 0:
    print(twin.stderr[-4000:])
    sys.exit(f"{src}: the twin (-DQTL_COMPILE_FAIL_TWIN) does not compile")
print(f"{src}: fails with /{pattern}/ and its twin compiles")
