#!/usr/bin/env python3
"""Hand-made hostile safetensors files: each breaks one rule of the format (qtl/io/safetensors.hpp).

    make_hostile.py OUT_DIR            writes NAME.safetensors for each case and cases.json
                                       ({NAME: expected message fragment})
    make_hostile.py --seeds OUT_DIR    also valid files, all under 4 KiB: the fuzzer's seed corpus

Used by test_qtl_hostile.py (every case must make `qtl inspect` and `qtl op` exit 2 with the
message, writing nothing) and to make fuzz/corpus/safetensors/.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_py import build, raw  # noqa: E402


def t(name, dt, shape, b, e):
    return '"%s":{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (name, dt, shape, b, e)


OK = "{" + t("q_w", "I32", "[2]", 0, 8) + "}"
D8 = b"\x01\x00\x00\x00\x02\x00\x00\x00"

# name -> (file bytes, fragment of the expected message)
HOSTILE = {
    "empty": (b"", "too short"),
    "short-length": (b"\x08\x00\x00", "too short"),
    "length-past-end": (raw(OK, D8, length=1000), "reaches past the end"),
    "huge-length": (raw(OK, D8, length=2**64 - 1), "exceeds the limit"),
    "length-100MB-plus-1": (raw(OK, D8, length=100_000_001), "exceeds the limit"),
    "truncated-header": (raw(OK, D8)[:20], "reaches past the end"),
    "truncated-data": (raw(OK, D8)[:-3], "reach past the data section"),
    "bad-json": (raw('{"q_w": ', b""), "not valid JSON"),
    "json-trailing-garbage": (raw(OK + "}", D8), "not valid JSON"),
    "bad-utf8": (raw(b'{"\xff\xfe":{}}'), "not valid JSON"),
    "header-array": (raw("[1,2]"), "not an object"),
    "header-string": (raw('"q_w"'), "not an object"),
    "deep-nesting": (raw("[" * 100000 + "]" * 100000), "nests deeper"),
    "duplicate-name": (raw("{" + t("q_w", "I32", "[1]", 0, 4) + "," + t("q_w", "I32", "[1]", 4, 8) + "}", D8),
                       "more than once"),
    "duplicate-field": (raw('{"q_w":{"dtype":"I32","shape":[2],"shape":[2],"data_offsets":[0,8]}}', D8),
                        "more than once"),
    "tensor-not-object": (raw('{"q_w":[0,8]}', D8), "not an object"),
    "missing-dtype": (raw('{"q_w":{"shape":[2],"data_offsets":[0,8]}}', D8), "lacks dtype"),
    "missing-offsets": (raw('{"q_w":{"dtype":"I32","shape":[2]}}', D8), "lacks data_offsets"),
    "unsupported-dtype": (raw("{" + t("q_w", "F4", "[2]", 0, 8) + "}", D8), "unsupported dtype"),
    "dtype-number": (raw('{"q_w":{"dtype":3,"shape":[2],"data_offsets":[0,8]}}', D8), "dtype is not a string"),
    "negative-shape": (raw("{" + t("q_w", "I32", "[-2]", 0, 8) + "}", D8), "not an integer"),
    "float-shape": (raw("{" + t("q_w", "I32", "[2.0]", 0, 8) + "}", D8), "not an integer"),
    "shape-overflow": (raw("{" + t("q_w", "I32", "[4294967296,4294967296]", 0, 8) + "}", D8),
                       "more bytes than 64 bits"),
    "shape-dtype-mismatch": (raw("{" + t("q_w", "I32", "[3]", 0, 8) + "}", D8), "needs 12"),
    "dtype-size-mismatch": (raw("{" + t("q_w", "I64", "[2]", 0, 8) + "}", D8), "needs 16"),
    "offsets-out-of-range": (raw("{" + t("q_w", "I32", "[2]", 0, 8) + "}", D8[:4]), "reach past"),
    "offsets-reversed": (raw("{" + t("q_w", "I32", "[0]", 8, 0) + "}", D8), "end before they begin"),
    "offsets-negative": (raw('{"q_w":{"dtype":"I32","shape":[2],"data_offsets":[-8,0]}}', D8),
                         "is not [begin, end]"),
    "offsets-three": (raw('{"q_w":{"dtype":"I32","shape":[2],"data_offsets":[0,8,8]}}', D8),
                      "is not [begin, end]"),
    "overlap": (raw("{" + t("q_w", "I32", "[2]", 0, 8) + "," + t("x", "I32", "[1]", 4, 8) + "}", D8),
                "overlap"),
    "gap": (raw("{" + t("q_w", "I32", "[1]", 0, 4) + "," + t("x", "U8", "[2]", 6, 8) + "}", D8), "gap"),
    "trailing-bytes": (raw(OK, D8 + b"\x00\x00"), "trailing bytes"),
    "metadata-not-object": (raw('{"__metadata__":"x"}'), "__metadata__ is not an object"),
    "metadata-value-number": (raw('{"__metadata__":{"a":1}}'), "not a string"),
    # the safetensors library's reader (0.8.0) rejects these two; whitespace padding it accepts
    "bom-before-header": (raw(b"\xef\xbb\xbf" + OK.encode(), D8), "byte-order mark"),
    "nul-padded-header": (raw(OK.encode() + b"\x00\x00\x00", D8), "NUL byte"),
}


def seeds():
    """Valid files, one per dtype family and corner (0-dim, zero-size, metadata)."""
    return {
        "valid-i32": build([("q_w", "I32", [2, 2], bytes(range(16)))]),
        "valid-all": build([("a", "F32", [], b"\x00\x00\x80\x3f"), ("b", "F16", [2], b"\x00\x3c\x00\xc0"),
                            ("c", "BF16", [1, 1], b"\x80\x3f"), ("d", "F8_E4M3", [3], b"\x38\x40\x7e"),
                            ("e", "I64", [1], bytes(8)), ("z", "U8", [0, 5], b"")],
                           metadata={"format": "pt"}),
        "valid-empty": build([]),
    }


def main():
    args = sys.argv[1:]
    with_seeds = "--seeds" in args
    args = [a for a in args if a != "--seeds"]
    out = args[0]
    os.makedirs(out, exist_ok=True)
    files = {k: v[0] for k, v in HOSTILE.items()}
    if with_seeds:
        files.update(seeds())
    for name, data in files.items():
        if with_seeds and len(data) > 4096:
            continue  # seeds stay small
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)
    if not with_seeds:
        with open(os.path.join(out, "cases.json"), "w") as f:
            json.dump({k: v[1] for k, v in HOSTILE.items()}, f, indent=1)


if __name__ == "__main__":
    main()
