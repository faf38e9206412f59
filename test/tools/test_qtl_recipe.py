"""`qtl quantize --recipe`: ordered groups of targets, each in its own format, written as one
compressed-tensors checkpoint (tools/qtl/lib/recipe.hpp). On the tiny Qwen3-shaped checkpoint of
test/data/llmcompressor/input:
  - every quantized module's tensors are the bytes a --format run of its group's format writes
    (NVFP4's global scale shared over gate/up inside a group as there); the modules no group
    matches are copied and listed in `ignore`; the config has one group per recipe group with
    its own format, top-level "mixed-precision";
  - overlapping targets resolve as compressed-tensors resolves them (exact names before regexes,
    regexes in sorted order, then Linear; a target in two groups belongs to the later one), and a
    recipe where vLLM would pick another group is refused naming the module;
  - a recipe that splits a fused layer (q/k/v, gate/up) over two schemes is refused naming it;
  - against llm-compressor's model_free_ptq given the same config groups (recorded in
    test/data/llmcompressor/RECIPE.*): each group's tensors as test_qtl_llmc.py requires of its
    single scheme (equal, or llmc_rules' known relation), the rest equal;
  - "form": "modelopt": a ModelOpt MIXED_PRECISION checkpoint (config.json and hf_quant_config.json,
    quantized_layers W4A16_NVFP4 group 16): each module's weight and weight_scale the bytes of
    --format nvfp4's weight_packed and weight_scale, weight_scale_2 = 1 / weight_global_scale;
    read back by qtl explain as vLLM's and sglang's ModelOpt mixed loaders decide it;
  - malformed recipes: exit 2 with a message naming the file and key; flags beside --recipe:
    exit 1; random mutations of a valid recipe: exit 0, 1 or 2, never a crash, no output left on
    failure.

Usage: test_qtl_recipe.py QTL LLMC_DATA_DIR   (standard library only)
"""
import json
import os
import random
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, run_in_temp_dir  # noqa: E402
import llmc_rules  # noqa: E402

QTL, DATA = sys.argv[1], sys.argv[2]
INPUT = os.path.join(DATA, "input")
L = "model.layers.0."
ATTN = [L + "self_attn." + p for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
MLP = [L + "mlp." + p for p in ("gate_proj", "up_proj", "down_proj")]


def quantize(tmp, name, args, recipe=None):
    """Runs qtl quantize into tmp/name (with `recipe` written to tmp/name.json); returns the
    process, the output's tensors and its quantization_config (None when it failed)."""
    out = os.path.join(tmp, name)
    if recipe is not None:
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            f.write(recipe if isinstance(recipe, str) else json.dumps(recipe))
        args = ["--recipe", path] + args
    p = subprocess.run([QTL, "quantize", INPUT, out, "--threads", "2"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        return p, None, None
    with open(os.path.join(out, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    return p, llmc_rules.read_folder(out), qc


def tensors_of(tensors, module):
    return {k: v for k, v in tensors.items() if k.startswith(module + ".")}


def test_mixed(tmp):
    recipe = {"groups": [{"targets": ["re:.*self_attn\\.(q|k|v|o)_proj$"], "format": "fp8", "fp8_scheme": "ct-block"},
                         {"targets": ["re:.*mlp\\.(gate|up)_proj$"], "format": "nvfp4", "name": "gate_up"},
                         {"targets": [L + "mlp.down_proj"], "format": "w4a16", "group_size": 64,
                          "symmetric": False}],
              "ignore": ["re:.*embed_tokens$"]}
    p, ours, qc = quantize(tmp, "mixed", [], recipe)
    check(p.returncode == 0, "mixed recipe: rc %d: %s" % (p.returncode, p.stderr))
    if ours is None:
        return
    singles = {}
    for name, args in (("fp8", ["--format", "fp8", "--fp8-scheme", "ct-block"]), ("nvfp4", ["--format", "nvfp4"]),
                       ("w4a16", ["--format", "w4a16", "--group-size", "64", "--asym"])):
        singles[name] = quantize(tmp, name, args)[1]
    for modules, single in ((ATTN, "fp8"), (MLP[:2], "nvfp4"), (MLP[2:], "w4a16")):
        for m in modules:
            mine, theirs = tensors_of(ours, m), tensors_of(singles[single], m)
            check(mine and mine == theirs, "%s: the tensors of --format %s (%s against %s)"
                  % (m, single, sorted(mine), sorted(theirs)))
    g = ours[L + "mlp.gate_proj.weight_global_scale"][2]
    check(g == ours[L + "mlp.up_proj.weight_global_scale"][2], "gate/up share one NVFP4 global scale")
    for kept in ("lm_head.weight", "model.embed_tokens.weight"):
        check(ours.get(kept) == llmc_rules.read_folder(INPUT)[kept], "%s copied unchanged" % kept)
    check(qc["format"] == "mixed-precision" and qc["quant_method"] == "compressed-tensors",
          "top-level format mixed-precision: %s" % qc.get("format"))
    groups = qc["config_groups"]
    check(list(groups) == ["group_0", "gate_up", "group_2"], "one config group per recipe group: %s" % list(groups))
    check([g["format"] for g in groups.values()] == ["float-quantized", "nvfp4-pack-quantized", "pack-quantized"],
          "each group's own format")
    check(groups["group_2"]["weights"]["group_size"] == 64 and groups["group_2"]["weights"]["symmetric"] is False,
          "the group's options in its weights: %s" % groups["group_2"]["weights"])
    check(groups["gate_up"]["targets"] == recipe["groups"][1]["targets"], "targets as the recipe gives them")
    check(qc["ignore"][0] == "re:.*embed_tokens$" and "lm_head" in qc["ignore"],
          "ignore: the recipe's entries, and lm_head (matched by no group): %s" % qc["ignore"])
    check("lm_head  " in p.stdout and "matched by no recipe group" in p.stdout, "the report names why lm_head is kept")


def test_resolution(tmp):
    # A target named in two groups belongs to the later; an exact name in an earlier group wins over
    # Linear (both compressed-tensors and vLLM agree there).
    recipe = {"groups": [{"targets": [L + "mlp.down_proj"], "format": "w8a16"},
                         {"targets": ["Linear"], "format": "mxfp4"},
                         {"targets": ["Linear"], "format": "w4a16"}],
              "ignore": ["lm_head"]}
    p, ours, qc = quantize(tmp, "resolve", [], recipe)
    check(p.returncode == 0, "resolution: rc %d: %s" % (p.returncode, p.stderr))
    if ours is not None:
        check(ours[L + "mlp.down_proj.weight_packed"][1] == [16, 64], "down_proj by its exact name: w8a16")
        check(ours[L + "self_attn.q_proj.weight_scale"][0] == "BF16", "Linear of the later group: w4a16")
        check(not any(k.startswith("lm_head.weight_") for k in ours), "lm_head ignored")
    # A regex that reaches the embeddings: they stay unquantized and `ignore` names them (else
    # compressed-tensors, which quantizes Embedding modules too, would look for their tensors).
    p, ours, qc = quantize(tmp, "everything", [], {"groups": [{"targets": ["re:.*"], "format": "w8a16"}]})
    check(p.returncode == 0 and ours is not None and "model.embed_tokens" in qc["ignore"]
          and "model.embed_tokens.weight" in ours and "lm_head.weight_packed" in ours,
          "re:.* quantizes lm_head, keeps the embeddings and lists them in ignore: %s %s"
          % (p.stderr, qc and qc["ignore"]))
    # Two regexes: compressed-tensors takes the first in sorted order (re:.*down_proj$ before
    # re:.*mlp.*), vLLM the first in the config's order: refused, naming the module.
    recipe = {"groups": [{"targets": ["re:.*mlp.*"], "format": "w4a16"},
                         {"targets": ["re:.*down_proj$"], "format": "w8a16"}]}
    p, _, _ = quantize(tmp, "disagree", [], recipe)
    check(p.returncode == 2 and "mlp.down_proj" in p.stderr and "vLLM" in p.stderr and "group_1" in p.stderr,
          "engines' disagreement refused naming module and groups: rc %d %s" % (p.returncode, p.stderr))
    check(not os.path.exists(os.path.join(tmp, "disagree")), "no output after a refusal")
    # vLLM looks a fused layer up by its own name (gate_up_proj), then by class: a regex naming the
    # shards only, beside Linear, gives the fused layer Linear's group there.
    shards_only = {"groups": [{"targets": ["re:.*mlp\\.(gate|up)_proj$"], "format": "nvfp4"},
                              {"targets": ["Linear"], "format": "w4a16"}], "ignore": ["lm_head"]}
    p, _, _ = quantize(tmp, "shards_only", [], shards_only)
    check(p.returncode == 2 and "gate_up_proj too" in p.stderr, "shard-only regex beside Linear: %s" % p.stderr)
    shards_only["groups"][0]["targets"] = ["re:.*mlp\\.(gate|up|gate_up)_proj$"]
    p, ours, _ = quantize(tmp, "fused_too", [], shards_only)
    check(p.returncode == 0 and ours and L + "mlp.up_proj.weight_global_scale" in ours,
          "the regex matching gate_up_proj too: accepted: %s" % p.stderr)
    # An exact name in a later group than a regex: compressed-tensors takes the name, vLLM the regex.
    recipe = {"groups": [{"targets": ["re:.*mlp.*"], "format": "w4a16"},
                         {"targets": [L + "mlp.down_proj"], "format": "w8a16"}]}
    p, _, _ = quantize(tmp, "disagree2", [], recipe)
    check(p.returncode == 2 and "mlp.down_proj" in p.stderr, "exact-after-regex refused: %s" % p.stderr)


def test_fused_split(tmp):
    for targets, layer in ((["re:.*q_proj$"], "qkv_proj"), (["re:.*gate_proj$"], "gate_up_proj")):
        recipe = {"groups": [{"targets": targets, "format": "fp8"},
                             {"targets": ["re:.*(k|v|up|o|down)_proj$"], "format": "w4a16"}]}
        p, _, _ = quantize(tmp, "split_" + layer, [], recipe)
        check(p.returncode == 2 and layer in p.stderr and "one scheme" in p.stderr,
              "%s split over two formats refused: rc %d %s" % (layer, p.returncode, p.stderr))
    # half a fused layer quantized, half matched by no group
    p, _, _ = quantize(tmp, "half", [], {"groups": [{"targets": ["re:.*(q|k)_proj$"], "format": "nvfp4"}]})
    check(p.returncode == 2 and "qkv_proj" in p.stderr and "no group" in p.stderr, "half of q/k/v: %s" % p.stderr)


BAD = [
    ("not json", "{groups", "not valid JSON"),
    ("a list", "[]", "expected an object"),
    ("unknown key", {"groups": [{"targets": ["Linear"], "format": "w4a16"}], "igonre": []}, "unknown key \"igonre\""),
    ("no groups", {"ignore": []}, "groups must be"),
    ("empty groups", {"groups": []}, "groups must be"),
    ("group not object", {"groups": [3]}, "groups[0] must be an object"),
    ("no targets", {"groups": [{"format": "w4a16"}]}, "groups[0] has no targets"),
    ("no format", {"groups": [{"targets": ["Linear"]}]}, "groups[0] has no format"),
    ("empty targets", {"groups": [{"targets": [], "format": "w4a16"}]}, "targets must be a non-empty list"),
    ("target number", {"groups": [{"targets": [1], "format": "w4a16"}]}, "targets[0] must be a non-empty string"),
    ("unknown format", {"groups": [{"targets": ["Linear"], "format": "int3"}]}, "not a format qtl quantize writes"),
    ("gptq", {"groups": [{"targets": ["Linear"], "format": "gptq"}]}, "not written as compressed-tensors"),
    ("format number", {"groups": [{"targets": ["Linear"], "format": 4}]}, "format must be a string"),
    ("option of another format", {"groups": [{"targets": ["Linear"], "format": "nvfp4", "group_size": 32}]},
     "group_size does not apply to format nvfp4"),
    ("bad group size", {"groups": [{"targets": ["Linear"], "format": "w4a16", "group_size": 0}]},
     "group_size must be -1"),
    ("symmetric text", {"groups": [{"targets": ["Linear"], "format": "w4a16", "symmetric": "yes"}]},
     "symmetric must be true or false"),
    ("mxfp8 group size", {"groups": [{"targets": ["Linear"], "format": "mxfp8", "group_size": 16}]},
     "group_size does not apply to format mxfp8"),
    ("hf fp8 block", {"groups": [{"targets": ["Linear"], "format": "fp8", "fp8_scheme": "block"}]},
     "fp8_scheme must be"),
    ("unknown option", {"groups": [{"targets": ["Linear"], "format": "w4a16", "bits": 4}]}, "bits: unknown key"),
    ("bad regex", {"groups": [{"targets": ["re:(mlp"], "format": "w4a16"}]}, "targets[0] 're:(mlp'"),
    ("class", {"groups": [{"targets": ["Qwen3MLP"], "format": "w4a16"}]}, "a class name qtl cannot see"),
    ("two names", {"groups": [{"targets": ["Linear"], "format": "w4a16", "name": "a"},
                              {"targets": ["lm_head"], "format": "fp8", "name": "a"}]}, "a second group named \"a\""),
    ("ignore not list", {"groups": [{"targets": ["Linear"], "format": "w4a16"}], "ignore": "lm_head"},
     "ignore must be a list"),
    ("unknown form", {"form": "gguf", "groups": [{"targets": ["Linear"], "format": "nvfp4"}]},
     "form must be \"compressed-tensors\" or \"modelopt\""),
    ("modelopt fp8", {"form": "modelopt", "groups": [{"targets": ["Linear"], "format": "fp8"}]},
     "groups[0].format \"fp8\": the modelopt form writes nvfp4 only"),
]


def test_bad_recipes(tmp):
    for what, recipe, message in BAD:
        p, _, _ = quantize(tmp, "bad", [], recipe)
        check(p.returncode == 2 and p.stderr.startswith("qtl: error: --recipe ") and message in p.stderr,
              "%s: exit 2 naming %r: rc %d %s" % (what, message, p.returncode, p.stderr.strip()))
    check(not os.path.exists(os.path.join(tmp, "bad")), "no output from a bad recipe")
    good = {"groups": [{"targets": ["Linear"], "format": "w4a16"}]}
    for flags in (["--format", "w4a16"], ["--group-size", "32"], ["--asym"], ["--fp8-scheme", "tensor"]):
        p, _, _ = quantize(tmp, "flags", flags, good)
        check(p.returncode == 1 and flags[0] + " does not apply with --recipe" in p.stderr,
              "%s beside --recipe: exit 1: %s" % (flags[0], p.stderr.strip()))
    p = subprocess.run([QTL, "quantize", INPUT, os.path.join(tmp, "none")], capture_output=True, text=True)
    check(p.returncode == 1 and "--format" in p.stderr and "--recipe" in p.stderr, "neither --format nor --recipe")
    p = subprocess.run([QTL, "quantize", INPUT, os.path.join(tmp, "none"), "--recipe", os.path.join(tmp, "missing")],
                       capture_output=True, text=True)
    check(p.returncode == 2 and "missing" in p.stderr, "a missing recipe file: exit 2 naming it")


def test_mutations(tmp):
    text = json.dumps({"groups": [{"targets": ["re:.*self_attn\\..*", "Linear"], "format": "fp8",
                                   "fp8_scheme": "tensor", "name": "g"},
                                  {"targets": [L + "mlp.down_proj"], "format": "w4a16", "group_size": -1,
                                   "symmetric": True}], "ignore": ["lm_head", "re:.*gate$"]})
    rng = random.Random(5)
    alphabet = '{}[]":,\\.-01 aeLrz' + "\x00\xff"
    outcomes = {}
    for i in range(40):
        t = list(text)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(t))
            op = rng.randrange(3)
            if op == 0:
                del t[at]
            elif op == 1:
                t.insert(at, rng.choice(alphabet))
            else:
                t[at] = rng.choice(alphabet)
        mutated = "".join(t) if i % 8 else text[:rng.randrange(len(text))]
        p, _, _ = quantize(tmp, "m%d" % i, [], mutated)
        outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
        ok = p.returncode == 0 or (p.returncode in (1, 2) and p.stderr.startswith("qtl: error: "))
        check(ok, "mutation %d %r: rc %d %s" % (i, mutated, p.returncode, p.stderr[-300:]))
        check(p.returncode == 0 or not os.path.exists(os.path.join(tmp, "m%d" % i)), "mutation %d: no output" % i)
    print("mutated recipes: exit codes %s" % dict(sorted(outcomes.items())))


def test_llmc(tmp):
    """llm-compressor's model_free_ptq given the same groups (RECIPE.*, recorded): per group, the
    bytes or the known relation of its single scheme (llmc_rules.compare); the rest equal; the
    config groups equal but the known keys."""
    recipe = {"groups": [dict(name=n, targets=t, **opts) for n, t, _, opts in llmc_rules.RECIPE],
              "ignore": llmc_rules.IGNORE}
    p, ours, qc = quantize(tmp, "llmc", [], recipe)
    check(p.returncode == 0, "llmc recipe: rc %d: %s" % (p.returncode, p.stderr))
    if ours is None:
        return
    theirs = llmc_rules.st.read(os.path.join(DATA, "RECIPE.safetensors"))[0]
    with open(os.path.join(DATA, "RECIPE.json")) as f:
        theirs_qc = json.load(f)
    inp = llmc_rules.read_folder(INPUT)
    check(set(ours) == set(theirs), "tensor names: only qtl %s, only llm-compressor %s"
          % (sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))))
    grouped = set()
    for name, targets, preset, _ in llmc_rules.RECIPE:
        modules = {k.rsplit(".", 1)[0] for k in ours if k.endswith(".weight_scale")
                   and any(re.match(t[3:], k.rsplit(".", 1)[0]) for t in targets)}
        check(modules, "%s: modules quantized" % name)
        sub = lambda d: {k: v for k, v in d.items() if k.rsplit(".", 1)[0] in modules}  # noqa: E731
        grouped |= set(sub(ours))
        one = lambda q: dict(q, config_groups={name: q["config_groups"].get(name)})  # noqa: E731
        equal, notes, failures = llmc_rules.compare(preset, inp, sub(ours), sub(theirs), one(qc), one(theirs_qc))
        for f in failures:
            check(False, "recipe group %s (%s): %s" % (name, preset, f))
        print("recipe group %s (%s, %d modules): %d tensors equal of %d%s"
              % (name, preset, len(modules), equal, len(sub(ours)), "".join("; " + n for n in notes)))
    rest = sorted(k for k in ours if k not in grouped)
    check(all(ours[k] == theirs.get(k) for k in rest), "the tensors no group quantizes are equal")
    check(qc["format"] == theirs_qc["format"] == "mixed-precision", "both mixed-precision")
    check(sorted(qc["config_groups"]) == sorted(theirs_qc["config_groups"]), "the same config groups")


def test_modelopt(tmp):
    recipe = {"form": "modelopt", "groups": [{"targets": ["re:.*mlp\\.(gate|up|down)_proj$"], "format": "nvfp4"},
                                             {"targets": [L + "self_attn.o_proj"], "format": "nvfp4"}],
              "ignore": ["lm_head"]}
    p, ours, qc = quantize(tmp, "modelopt", [], recipe)
    check(p.returncode == 0, "modelopt recipe: rc %d: %s" % (p.returncode, p.stderr))
    if ours is None:
        return
    p, single, _ = quantize(tmp, "nvfp4_single", ["--format", "nvfp4"])
    written = MLP + [L + "self_attn.o_proj"]
    for m in written:
        w, s2 = ours.get(m + ".weight"), ours.get(m + ".weight_scale_2")
        gs = single[m + ".weight_global_scale"]
        check(w == single[m + ".weight_packed"] and ours.get(m + ".weight_scale") == single[m + ".weight_scale"],
              "%s: weight and weight_scale the bytes of --format nvfp4's weight_packed and weight_scale" % m)
        expected = struct.pack("<f", 1.0 / struct.unpack("<f", gs[2])[0])
        check(s2 is not None and s2[:2] == ("F32", []) and s2[2] == expected,
              "%s: weight_scale_2 F32 [] = 1 / weight_global_scale: %s, %s" % (m, s2, gs))
        check(not tensors_of(ours, m).keys() - {m + ".weight", m + ".weight_scale", m + ".weight_scale_2"},
              "%s: ModelOpt's tensor names only: %s" % (m, sorted(tensors_of(ours, m))))
    inp = llmc_rules.read_folder(INPUT)
    for m in ATTN[:3] + ["lm_head"]:
        check(tensors_of(ours, m) == {m + ".weight": inp[m + ".weight"]}, "%s: copied unquantized" % m)
    layers = {m: {"quant_algo": "W4A16_NVFP4", "group_size": 16} for m in written}
    check(qc["quant_method"] == "modelopt" and qc["quant_algo"] == "MIXED_PRECISION" and
          qc["quantized_layers"] == layers and qc["ignore"] == [], "config.json's quantization_config: %s" % qc)
    with open(os.path.join(tmp, "modelopt", "hf_quant_config.json")) as f:
        hf = json.load(f)
    check(hf["quantization"] == {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None, "exclude_modules": [],
                                 "quantized_layers": layers}, "hf_quant_config.json: %s" % hf)
    # Read back as the ModelOpt mixed loaders read it: vLLM builds every written module (the fused
    # gate_up_proj from its shards' keys) W4A16_NVFP4 and leaves the rest unquantized; sglang has no
    # W4A16_NVFP4 method.
    r = subprocess.run([QTL, "explain", "--checkpoint", os.path.join(tmp, "modelopt"), "--consumer", "all",
                        "--json"], capture_output=True, text=True)
    rows = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    vllm = {x["module"]: x for x in rows if x["consumer"] == "vllm_modelopt"}
    sglang = {x["module"]: x for x in rows if x["consumer"] == "sglang_modelopt"}
    check(r.returncode == 0 and all(vllm[m]["scheme"] == "W4A16_NVFP4" and vllm[m]["bits"] == 4 and
                                    vllm[m]["group_size"] == 16 and not vllm[m]["skipped"] for m in written),
          "explain: vLLM loads the written modules W4A16_NVFP4: %s" % [vllm.get(m) for m in written])
    check(all(vllm[m]["skipped"] and vllm[m]["scheme"] is None for m in ATTN[:3] + ["lm_head"]),
          "explain: vLLM leaves the others unquantized")
    check(all(sglang[m]["skipped"] and "no method" in (sglang[m]["scheme"] or "") for m in written),
          "explain: sglang has no W4A16_NVFP4 method")
    r = subprocess.run([QTL, "inspect", os.path.join(tmp, "modelopt")], capture_output=True, text=True)
    check(r.returncode == 0 and "NVFP4 (ModelOpt, group 16): 4 modules" in r.stdout and
          "W4A16_NVFP4: 4 quantized_layers entries" in r.stdout, "inspect: %s" % r.stdout[-400:])


def test_mxfp8(tmp):
    """--format mxfp8 and a recipe's mxfp8 group: compressed-tensors mxfp8-quantized, each layer's
    weight (E4M3) and weight_scale (E8M0) those of `qtl op ct-mxfp8-quantize` (whose golden cases
    come from compressed-tensors) on the layer's weight."""
    p, ours, qc = quantize(tmp, "mxfp8", ["--format", "mxfp8"])
    check(p.returncode == 0, "--format mxfp8: rc %d: %s" % (p.returncode, p.stderr))
    if ours is None:
        return
    inp = llmc_rules.read_folder(INPUT)
    (group,) = qc["config_groups"].values()
    check(qc["format"] == group["format"] == "mxfp8-quantized", "format mxfp8-quantized: %s" % qc["format"])
    check(group["weights"] == {"num_bits": 8, "type": "float", "symmetric": True, "group_size": 32,
                               "strategy": "group", "dynamic": False, "scale_dtype": "torch.uint8"},
          "MXFP8 weights args: %s" % group["weights"])
    for m in ATTN + MLP:
        dt, shape, raw = inp[m + ".weight"]
        src, dst = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "q.safetensors")
        with open(src, "wb") as f:
            f.write(llmc_rules.st.build([("weight", dt, shape, raw)]))
        r = subprocess.run([QTL, "op", "ct-mxfp8-quantize", src, dst], capture_output=True, text=True)
        op = llmc_rules.st.read(dst)[0] if r.returncode == 0 else {}
        check(r.returncode == 0 and ours[m + ".weight"] == op["weight"] and ours[m + ".weight_scale"] == op["weight_scale"],
              "%s: mxfp8 tensors those of qtl op ct-mxfp8-quantize (%s)" % (m, r.stderr))
        check(ours[m + ".weight"][0] == "F8_E4M3" and ours[m + ".weight_scale"][:2] == ("U8", [shape[0], shape[1] // 32]),
              "%s: weight F8_E4M3, weight_scale U8 [N, K/32]" % m)
    recipe = {"groups": [{"targets": ["re:.*mlp\\..*"], "format": "mxfp8"},
                         {"targets": ["re:.*self_attn\\..*"], "format": "w8a16", "group_size": -1}]}
    p, mixed, qc = quantize(tmp, "mxfp8_recipe", [], recipe)
    check(p.returncode == 0 and mixed is not None, "a recipe with an mxfp8 group: %s" % p.stderr)
    if mixed is not None:
        check(all(tensors_of(mixed, m) == tensors_of(ours, m) for m in MLP), "the mxfp8 group's tensors as --format mxfp8's")
        check(qc["format"] == "mixed-precision" and qc["config_groups"]["group_0"]["format"] == "mxfp8-quantized",
              "mixed-precision with an mxfp8-quantized group")


def main():
    def tests(tmp):
        test_mixed(tmp)
        test_modelopt(tmp)
        test_mxfp8(tmp)
        test_llmc(tmp)
        test_resolution(tmp)
        test_fused_split(tmp)
        test_bad_recipes(tmp)
        test_mutations(tmp)
    run_in_temp_dir("qtl_recipe_", tests)


if __name__ == "__main__":
    main()
