"""The package's surface is the extension's: every public name of qtl._qtl is exported by `qtl` and
has a stub in qtl/__init__.pyi (a function bound from a family's list, such as a new block format's
<name>_quantize, fails here until both name it)."""

import pathlib
import re

import qtl
import qtl._qtl as ext

STUBS = (pathlib.Path(qtl.__file__).parent / "__init__.pyi").read_text(encoding="utf-8")


def public_names():
    return sorted(n for n in dir(ext) if not n.startswith("_"))


def test_every_extension_name_is_exported():
    assert [n for n in public_names() if not hasattr(qtl, n)] == []


def test_every_extension_name_has_a_stub():
    stubbed = set(re.findall(r"^(?:def|class) (\w+)", STUBS, re.M)) | set(re.findall(r"^(\w+)\s*[:=]", STUBS, re.M))
    assert [n for n in public_names() if n not in stubbed] == []


def test_each_block_format_has_its_pair():
    # the bindings walk qtl::block_formats: each format gives <name>_quantize and <name>_dequantize
    quantizers = {n[:-len("_quantize")] for n in public_names() if n.endswith("_quantize")}
    for fmt in ("nvfp4", "mxfp4", "mxfp8"):
        assert fmt in quantizers and hasattr(ext, fmt + "_dequantize")
