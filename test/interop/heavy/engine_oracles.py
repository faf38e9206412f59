"""vLLM's and sglang's own rule functions, taken from their released wheels (downloaded, never
installed: docs/spec/interop.md section 6): the module source is parsed and only its top-level
functions are executed, with annotations and decorators dropped, so no torch and no engine import."""
import ast
import os
import pathlib
import re
import zipfile
from collections.abc import Mapping
from types import MappingProxyType

import regex

WHEELS = pathlib.Path(os.environ.get("QTL_INTEROP_WHEELS", pathlib.Path(__file__).resolve().parents[3]
                                     / ".venv-interop-heavy" / "wheels"))


def wheel(prefix):
    found = sorted(WHEELS.glob(prefix + "-*.whl"))
    if not found:
        raise FileNotFoundError("no %s wheel in %s (scripts/interop.sh downloads it)" % (prefix, WHEELS))
    return found[-1]


def load_funcs(whl, member, re_module, names):
    """The functions `names` of `member`, and the module's functions they call (transitively)."""
    tree = ast.parse(zipfile.ZipFile(whl).read(member).decode())
    defs = {}
    for n in tree.body:
        if isinstance(n, ast.FunctionDef):
            defs[n.name] = n
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            defs[n.targets[0].id] = n          # module constants the functions read
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            defs[n.target.id] = ast.copy_location(ast.Assign(targets=[ast.Name(n.target.id, ast.Store())], value=n.value), n)
    want, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in want:
            continue
        want.add(n)
        todo += [x.id for x in ast.walk(defs[n]) if isinstance(x, ast.Name) and x.id in defs]
    body = [defs[n] for n in defs if n in want]
    funcs = [b for b in body if isinstance(b, ast.FunctionDef)]
    for f in funcs:
        f.returns = None
        f.decorator_list = []
        a = f.args
        for arg in a.args + a.kwonlyargs + a.posonlyargs + ([a.vararg] if a.vararg else []) + ([a.kwarg] if a.kwarg else []):
            arg.annotation = None
    ns = {"re": re_module, "Mapping": Mapping, "MappingProxyType": MappingProxyType,
          "Optional": object, "Any": object}
    exec(compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])), member, "exec"), ns)
    return ns


Q = "vllm/model_executor/layers/quantization/utils/"


def vllm():
    w = wheel("vllm")
    ns = load_funcs(w, Q + "gptq_utils.py", regex, ["get_dynamic_override"])        # vLLM: `import regex as re`
    ns2 = load_funcs(w, Q + "quant_utils.py", regex, ["is_layer_skipped"])
    return {"get_dynamic_override": ns["get_dynamic_override"], "is_layer_skipped": ns2["is_layer_skipped"],
            "wheel": w.name}


def sglang():
    w = wheel("sglang")
    ns = load_funcs(w, "sglang/srt/layers/quantization/utils.py", re,
                    ["get_dynamic_override", "is_layer_skipped"])   # sglang: stdlib re
    return {"get_dynamic_override": ns["get_dynamic_override"], "is_layer_skipped": ns["is_layer_skipped"],
            "wheel": w.name}
