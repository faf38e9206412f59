#!/usr/bin/env python3
"""Prints the files under DIR whose names match one of the glob PATTERNs, relative to DIR, sorted.

Meson has no glob; the build files call this at configure time so that a new test, benchmark,
example or header is picked up by dropping the file in its folder (no build file to edit).
"""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
found = set()
for pattern in sys.argv[2:]:
    for p in root.glob(pattern):
        if p.is_file():
            found.add(p.relative_to(root).as_posix())
print("\n".join(sorted(found)))
