"""End-to-end tests of `qtl explain`, `qtl lint` and `qtl inspect` on mixed-precision checkpoints.

  1. A compressed-tensors `mixed-precision` checkpoint laid out as llm-compressor's model_free_ptq
     writes it (attention FP8 `weight` + `weight_scale`, MLP W4A16 `weight_packed` +
     `weight_scale` + `weight_shape`): every linear module is listed (the packed ones too), norms
     are not decided, and each module's group is the one the compressed-tensors library attaches
     (test/data/mixed/ct_library_expected.json, recorded from the library itself); vLLM matches
     the fused qkv_proj by its class name (`Linear`, W4A16) before its FP8 shards, and lint
     reports that against the writer's decision.
  2. Overlapping targets (test/data/mixed/ct_fp8_nvfp4_overlap.json): the library orders targets
     by text, vLLM and sglang by the config: explain shows each reader's group and lint reports
     where they disagree; lm_head (FP8 for the library) stays unquantized in vLLM.
  3. ModelOpt MIXED_PRECISION (hf_quant_config.json and config.json forms): each module's
     algorithm and the quantized_layers key that decided it, a fused layer decided from its
     shards, experts from their `experts` key, algorithms a loader has no method for.
  4. inspect names the mixed config's groups and algorithms.
  5. Three published ModelOpt MIXED_PRECISION configs (test/data/mixed/real/, verbatim): a
     checkpoint with every linear module a model of that config has (names generated from the
     model's layer count, attention pattern, experts, vision tower and MTP layer), explained for
     vLLM and sglang: each module's decision (as the fused layer or the fused MoE layer the engine
     builds from it) against the config's own entry for the module.
  6. A published compressed-tensors mixed-precision config (RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8's
     config.json, verbatim): every layer vLLM's DeepSeek-V4 builds with the quant config,
     explained for vLLM (FP8 blocks for the attention, NVFP4 for the MLP and the fused experts,
     which take their first expert's projections' group) and sglang.

Usage: test_qtl_mixed.py QTL
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "mixed")
EXPECTED = json.load(open(os.path.join(DATA, "ct_library_expected.json")))["configs"]
H, I, V = 128, 256, 64


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def config_of(name):
    doc = json.load(open(os.path.join(DATA, name)))
    return doc.get("quantization_config", doc)


def shape_of(module):
    leaf = module.split(".")[-1]
    if leaf in ("down_proj",):
        return [H, I]
    if leaf in ("gate_proj", "up_proj"):
        return [I, H]
    if leaf == "gate":
        return [4, H]
    if module in ("lm_head", "model.embed_tokens"):
        return [V, H]
    return [H, H]


def zeros(name, dtype, shape):
    size = {"BF16": 2, "F32": 4, "I32": 4, "I64": 8, "F8_E4M3": 1, "U8": 1}[dtype]
    n = 1
    for d in shape:
        n *= d
    return (name, dtype, shape, bytes(n * size))


def quantized_tensors(module, group):
    """The tensors model_free_ptq writes for `module` under a config group (weights only)."""
    w = group["weights"]
    out, inp = shape_of(module)
    if w["type"] == "float" and w["num_bits"] == 8:
        return [zeros(module + ".weight", "F8_E4M3", [out, inp]), zeros(module + ".weight_scale", "BF16", [out, 1])]
    if w["type"] == "float" and w["num_bits"] == 4:
        return [zeros(module + ".weight_packed", "U8", [out, inp // 2]),
                zeros(module + ".weight_scale", "F8_E4M3", [out, inp // w["group_size"]]),
                zeros(module + ".weight_global_scale", "F32", [1])]
    return [zeros(module + ".weight_packed", "I32", [out, inp // 8]),
            zeros(module + ".weight_scale", "BF16", [out, inp // w["group_size"]]),
            ("%s.weight_shape" % module, "I64", [2], bytes(16))]


def make_checkpoint(folder, config_name):
    """The checkpoint of a config of test/data/mixed: each module as the library decided it."""
    q = config_of(config_name)
    tensors = []
    for module, group in EXPECTED[config_name].items():
        if group is not None:
            tensors += quantized_tensors(module, q["config_groups"][group])
        elif module.endswith("norm"):
            tensors.append(zeros(module + ".weight", "BF16", [H]))
        else:
            tensors.append(zeros(module + ".weight", "BF16", shape_of(module)))
    os.makedirs(folder)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(st.build(tensors))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_moe", "quantization_config": q}, f)
    return folder


def explain(*args):
    rc, out, err = run("explain", "--json", *args)
    check(rc == 0, "explain %s: exit 0 (%d: %s)" % (args, rc, err))
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def by_module(rows, consumer):
    return {r["module"]: r for r in rows if r["consumer"] == consumer}


def group_name(row):
    """The config group of a decision's `scheme` ("group_1 (pack-quantized)"), or None."""
    return row["scheme"].split(" ")[0] if row.get("scheme") else None


def test_llmc_checkpoint(tmp):
    ckpt = make_checkpoint(os.path.join(tmp, "llmc"), "llmc_fp8_w4a16.json")
    expected = EXPECTED["llmc_fp8_w4a16.json"]
    rows = explain("--checkpoint", ckpt, "--consumer", "all")
    lib = by_module(rows, "compressed_tensors")
    for module, group in expected.items():
        row = lib.get(module)
        check(row is not None, "llmc: %s is listed" % module)
        if row is None:
            continue
        if module.endswith("norm") or module == "model.embed_tokens":
            check("kept" in row and row["bits"] is None, "llmc: %s is not decided: %s" % (module, row))
        elif module.endswith("mlp.gate"):
            check(row.get("kept") == "MoE router (the engines build it unquantized)" or row["skipped"],
                  "llmc: the router %s stays unquantized: %s" % (module, row))
        else:
            check(group_name(row) == group and row["skipped"] == (group is None),
                  "llmc: the library gives %s %s, explain %s" % (module, group, row))
    mlp = lib.get("model.layers.0.mlp.down_proj", {})
    check(mlp.get("bits") == 4 and mlp.get("group_size") == 128 and mlp.get("quant_type") == "uint4b8",
          "llmc: down_proj is W4A16 g128: %s" % mlp)
    norm = lib.get("model.layers.0.input_layernorm", {})
    check(norm.get("quant_type") is None, "llmc: input_layernorm is not quantized: %s" % norm)
    vllm = by_module(rows, "vllm_compressed_tensors")
    # vLLM's find_matched_target tries the class name (QKVParallelLinear contains "Linear") before
    # the fused layer's shards: qkv_proj gets group_1, though the library wrote q/k/v_proj FP8.
    q = vllm.get("model.layers.0.self_attn.q_proj", {})
    check(q.get("decided_as") == "model.layers.0.self_attn.qkv_proj" and group_name(q) == "group_1" and
          q.get("rule") == "Linear", "llmc: vLLM gives qkv_proj group_1 by its class: %s" % q)
    o = vllm.get("model.layers.0.self_attn.o_proj", {})
    check(group_name(o) == "group_0" and o.get("bits") == 8 and o.get("rule") == "re:.*self_attn\\.(q|k|v|o)_proj$",
          "llmc: vLLM gives o_proj group_0 by name: %s" % o)
    g = vllm.get("model.layers.0.mlp.gate_proj", {})
    check(g.get("decided_as") == "model.layers.0.mlp.gate_up_proj" and group_name(g) == "group_1" and
          g.get("rule") == "Linear", "llmc: vLLM gives gate_up_proj group_1 by its class: %s" % g)
    rc, out, err = run("lint", "--checkpoint", ckpt)
    check(rc == 3 and "disagree: model.layers.0.self_attn.q_proj: compressed_tensors (the writer)" in out and
          "[as model.layers.0.self_attn.qkv_proj]" in out and
          "disagree: model.layers.0.self_attn.o_proj: compressed_tensors (the writer)" not in out,
          "llmc: lint reports vLLM's qkv_proj scheme against the writer's, not o_proj's: %s" % out)
    sg = by_module(rows, "sglang_compressed_tensors").get("model.layers.0.mlp.down_proj", {})
    check((sg.get("error") or "").startswith("NotImplementedError"),
          "llmc: sglang has no scheme for the top-level format mixed-precision: %s" % sg)
    # The text form names the group.
    rc, out, err = run("explain", "--checkpoint", ckpt, "--consumer", "vllm")
    line = [x for x in out.splitlines() if x.startswith("model.layers.0.mlp.down_proj ")]
    check(rc == 0 and line and "group_1 (pack-quantized)" in line[0], "llmc: the text names the group: %s" % line)
    rc, out, err = run("inspect", ckpt)
    check(rc == 0 and "group_0" in out and "float-quantized" in out and "group_1" in out and "pack-quantized" in out,
          "llmc: inspect lists both groups and their formats: %s" % out[-800:])


def test_overlap(tmp):
    ckpt = make_checkpoint(os.path.join(tmp, "overlap"), "ct_fp8_nvfp4_overlap.json")
    rows = explain("--checkpoint", ckpt, "--consumer", "all")
    lib = by_module(rows, "compressed_tensors")
    for module, group in EXPECTED["ct_fp8_nvfp4_overlap.json"].items():
        row = lib.get(module, {})
        if "kept" not in row and not module.endswith("mlp.gate"):
            check(group_name(row) == group, "overlap: the library gives %s %s, explain %s" % (module, group, row))
    expert = "model.layers.1.mlp.experts.0.down_proj"
    check(group_name(lib.get(expert, {})) == "group_1", "overlap: the library's sorted targets give group_1")
    v = by_module(rows, "vllm_compressed_tensors").get(expert, {})
    check(group_name(v) == "group_0" and v.get("bits") == 8,
          "overlap: vLLM's config order gives %s group_0 (FP8): %s" % (expert, v))
    head = by_module(rows, "vllm_compressed_tensors").get("lm_head", {})
    check(head.get("skipped") is True and group_name(lib.get("lm_head", {})) == "group_0",
          "overlap: lm_head FP8 in the library, unquantized in vLLM: %s" % head)
    rc, out, err = run("lint", "--checkpoint", ckpt)
    check(rc == 3 and "disagree" in out and expert in out, "overlap: lint reports the disagreement: %s" % out)


def test_modelopt(tmp):
    cfg = os.path.join(DATA, "modelopt_dsv4_nvfp4_config.json")
    modules = os.path.join(tmp, "dsv4_modules.txt")
    names = ["model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.kv_a_proj_with_mqa",
             "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.shared_experts.gate_up_proj",
             "model.layers.0.mlp.experts", "model.layers.0.mlp.gate", "lm_head"]
    with open(modules, "w") as f:
        f.write("\n".join(names) + "\n")
    rows = explain("--config", cfg, "--modules", modules, "--consumer", "all")
    v, s = by_module(rows, "vllm_modelopt"), by_module(rows, "sglang_modelopt")
    kv = v["model.layers.0.self_attn.kv_a_proj_with_mqa"]
    check(kv["scheme"] == "FP8" and kv["bits"] == 8 and kv["rule"] == "model.layers.0.self_attn.kv_a_proj_with_mqa",
          "dsv4: kv_a_proj_with_mqa FP8 by its key: %s" % kv)
    su = v["model.layers.0.mlp.shared_experts.gate_up_proj"]
    check(su["scheme"] == "FP8" and su["rule"] == "model.layers.0.mlp.shared_experts.gate_proj",
          "dsv4: gate_up_proj from its shards' keys: %s" % su)
    ex = v["model.layers.0.mlp.experts"]
    check(ex["scheme"] == "NVFP4" and ex["group_size"] == 16 and ex["rule"] == "model.layers.0.mlp.experts.0.gate_proj",
          "dsv4: experts from the first key under them: %s" % ex)
    for name in ("model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.o_proj"):
        check(v[name]["skipped"] and "built unquantized" in (v[name]["scheme"] or ""),
              "dsv4: %s's algorithm has no method in vLLM: %s" % (name, v[name]))
    check(v["lm_head"]["skipped"] and v["lm_head"]["rule"] == "lm_head", "dsv4: lm_head excluded")
    check(s["model.layers.0.mlp.experts"]["scheme"] == "NVFP4", "dsv4: sglang gives the experts NVFP4")
    hf = os.path.join(DATA, "modelopt_qwen3_6_hf_quant_config.json")
    with open(modules, "w") as f:
        f.write("language_model.model.layers.1.self_attn.qkv_proj\nmodel.language_model.layers.0.mlp.experts\n"
                "model.language_model.layers.0.mlp.shared_expert.gate_up_proj\nlm_head\n")
    rows = explain("--config", hf, "--modules", modules, "--consumer", "all")
    v, s = by_module(rows, "vllm_modelopt"), by_module(rows, "sglang_modelopt")
    qkv = "language_model.model.layers.1.self_attn.qkv_proj"
    check(v[qkv]["scheme"] == "FP8" and s[qkv]["skipped"] and s[qkv]["scheme"] is None,
          "qwen3.6: vLLM finds the shards under model.language_model., sglang does not: %s / %s" % (v[qkv], s[qkv]))
    sh = "model.language_model.layers.0.mlp.shared_expert.gate_up_proj"
    check(v[sh]["scheme"] == "W4A16_NVFP4" and v[sh]["bits"] == 4 and s[sh]["skipped"],
          "qwen3.6: W4A16_NVFP4 loads in vLLM, not in sglang: %s / %s" % (v[sh], s[sh]))
    rc, out, err = run("lint", "--config", hf, "--modules", modules)
    check(rc == 3 and "disagree" in out and sh in out, "qwen3.6: lint reports the loaders' disagreement: %s" % out)


# vLLM's Qwen3.5 packed_modules_mapping (Qwen3_5ForCausalLMBase, models/qwen3_5.py).
QWEN3_5_PACKED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
                  "in_proj_qkvz": ["in_proj_qkv", "in_proj_z"], "in_proj_ba": ["in_proj_b", "in_proj_a"]}


def qwen3_5_modules(layers, experts):
    """The linear modules of a Qwen3.5/3.6 checkpoint: every fourth layer full attention, the
    others Gated DeltaNet; MoE MLPs with the experts numbered `experts` (each decided as the fused
    MoE layer: the unit test takes all of them, this one the first and the last), else dense; 27
    vision blocks; one MTP layer."""
    out = []

    def mlp(p):
        if not experts:
            out.extend(p + "mlp." + leaf for leaf in ("gate_proj", "up_proj", "down_proj"))
            return
        out.extend([p + "mlp.gate", p + "mlp.shared_expert_gate"])
        for leaf in ("gate_proj", "up_proj", "down_proj"):
            out.append(p + "mlp.shared_expert." + leaf)
            out.extend("%smlp.experts.%d.%s" % (p, e, leaf) for e in experts)

    for i in range(layers):
        p = "model.language_model.layers.%d." % i
        if i % 4 == 3:
            out.extend(p + "self_attn." + leaf for leaf in ("q_proj", "k_proj", "v_proj", "o_proj"))
        else:
            out.extend(p + "linear_attn." + leaf for leaf in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a",
                                                              "out_proj"))
        mlp(p)
    out.append("lm_head")
    for b in range(27):
        out.extend("model.visual.blocks.%d.%s" % (b, leaf)
                   for leaf in ("attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"))
    out.extend(["model.visual.merger.linear_fc1", "model.visual.merger.linear_fc2", "mtp.fc"])
    out.extend("mtp.layers.0.self_attn." + leaf for leaf in ("q_proj", "k_proj", "v_proj", "o_proj"))
    mlp("mtp.layers.0.")
    return out


def deepseek_v4_modules(layers, experts):
    """The linear modules of a DeepSeek-V4 checkpoint in DeepSeek's names (the experts numbered
    `experts`), one MTP layer."""
    out = []
    for p in ["layers.%d." % i for i in range(layers)] + ["mtp.0."]:
        out.extend(p + "attn." + leaf for leaf in ("wq_a", "wq_b", "wkv", "wo_a", "wo_b"))
        out.append(p + "ffn.gate")
        for leaf in ("w1", "w2", "w3"):
            out.append(p + "ffn.shared_experts." + leaf)
            out.extend("%sffn.experts.%d.%s" % (p, e, leaf) for e in experts)
        if p == "layers.%d." % (layers - 1):
            out.append("head")
    return out


def expert_parent(module):
    """X.experts for X.experts.E.leaf, else None."""
    parts = module.split(".")
    if len(parts) > 3 and parts[-3] == "experts" and parts[-2].isdigit():
        return ".".join(parts[:-2])
    return None


def check_real_config(tmp, name, modules, excluded):
    """Explains a checkpoint of `modules` under the real config `name` for vLLM and sglang and
    checks each row against the config's entry for the module (`excluded(module)`: the config's
    exclude patterns cover it). Returns the number of rows."""
    folder = os.path.join(tmp, name)
    os.makedirs(folder)
    q = json.load(open(os.path.join(DATA, "real", name)))["quantization"]
    layers = q["quantized_layers"]
    with open(os.path.join(folder, "hf_quant_config.json"), "wb") as f:
        f.write(open(os.path.join(DATA, "real", name), "rb").read())
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(st.build([(m + ".weight", "BF16", [1, 1], bytes(2)) for m in modules]))
    mapping = os.path.join(tmp, "qwen3_5_packed.json")
    with open(mapping, "w") as f:
        json.dump(QWEN3_5_PACKED, f)
    rows = []
    for consumer in ("vllm_modelopt", "sglang_modelopt"):
        rows += explain("--checkpoint", folder, "--packed-modules-mapping", mapping, "--consumer", consumer)
    check(len(rows) == 2 * len(modules), "%s: one row per module and loader (%d)" % (name, len(rows)))
    used = set()
    bad = []
    for r in rows:
        m, vllm = r["module"], r["consumer"] == "vllm_modelopt"
        key = m if m in layers else expert_parent(m)
        algo = layers[key]["quant_algo"] if key in layers else None
        if algo:
            used.add(key)
        if r.get("kept"):
            ok = m.endswith("gate") and not algo  # the MoE routers: not in the map either
        elif excluded(m):
            ok = r["skipped"] and r["rule"] in q["exclude_modules"]
        elif algo is None:
            ok = r["skipped"] and r["rule"] is None and r["scheme"] is None
        elif not vllm and m == "lm_head":
            ok = r["skipped"]  # sglang's ParallelLMHead is no LinearBase
        elif algo in ("FP8", "NVFP4") or (vllm and algo == "W4A16_NVFP4"):
            ok = (not r["skipped"] and r["scheme"] == algo and r["bits"] == (8 if algo == "FP8" else 4) and
                  r["group_size"] == (None if algo == "FP8" else 16))
        else:
            ok = r["skipped"] and r["scheme"] == algo + " (no method for it in this loader: built unquantized)"
        ok = ok and r["error"] is None
        if not ok:
            bad.append(r)
    check(not bad, "%s: %d rows differ from the config's entries, e.g. %s" % (name, len(bad), bad[:3]))
    check(used == set(layers), "%s: every quantized_layers entry names a module (%d of %d)" %
          (name, len(used), len(layers)))
    return len(rows)


def test_real_modelopt(tmp):
    n = check_real_config(tmp, "nvidia_Qwen3.6-35B-A3B-NVFP4_hf_quant_config.json", qwen3_5_modules(40, (0, 255)),
                          lambda m: m.startswith("mtp"))
    n += check_real_config(tmp, "nvidia_Qwen3.6-27B-NVFP4_hf_quant_config.json", qwen3_5_modules(64, ()),
                           lambda m: m.startswith("mtp"))
    n += check_real_config(tmp, "nvidia_DeepSeek-V4-Flash-NVFP4_hf_quant_config.json",
                           deepseek_v4_modules(43, (0, 255)),
                           lambda m: (m.startswith("mtp.") or ".attn." in m or ".shared_experts." in m or
                                      m == "head"))
    # Modules: attention (10 layers of 4, 30 of 5 for 40 layers; 16 and 48 for 64), MLP (11 per MoE
    # layer: router, shared-expert gate, 3 shared, 2 experts of 3; 3 dense), lm_head, 27 vision
    # blocks of 4 and 2 merger linears, MTP (fc, 4 attention, the MLP); DeepSeek: 44 blocks of 15
    # (5 attention, router, 3 shared, 2 experts of 3) and head. Two loaders each.
    qwen_moe = 10 * 4 + 30 * 5 + 40 * 11 + 1 + 27 * 4 + 2 + 1 + 4 + 11
    qwen_dense = 16 * 4 + 48 * 5 + 64 * 3 + 1 + 27 * 4 + 2 + 1 + 4 + 3
    check(n == 2 * (qwen_moe + qwen_dense + 44 * 15 + 1), "real configs: every module explained (%d rows)" % n)


def test_real_compressed_tensors(tmp):
    name = "RedHatAI_DeepSeek-V4-Flash-NVFP4-FP8_config.json"
    model = json.load(open(os.path.join(DATA, "real", name)))
    fp8, nvfp4 = [], []
    for i, ratio in enumerate(model["compress_ratios"]):
        p = "model.layers.%d." % i
        fp8 += [p + "attn." + leaf for leaf in ("fused_wqa_wkv", "wq_b", "wo_a", "wo_b")]
        fp8 += [p + "attn.indexer.wq_b"] if ratio == 4 else []
        nvfp4 += [p + "ffn.shared_experts.gate_up_proj", p + "ffn.shared_experts.down_proj", p + "ffn.experts"]
    modules = os.path.join(tmp, "dsv4_vllm_layers.txt")
    with open(modules, "w") as f:
        f.write("\n".join(fp8 + nvfp4 + ["lm_head"]) + "\n")
    mapping = os.path.join(tmp, "dsv4_packed.json")
    with open(mapping, "w") as f:
        json.dump({"fused_wqa_wkv": ["wq_a", "wkv"], "gate_up_proj": ["gate_proj", "up_proj"]}, f)
    rows = []
    for consumer in ("vllm_compressed_tensors", "sglang_compressed_tensors"):
        rows += explain("--config", os.path.join(DATA, "real", name), "--modules", modules,
                        "--packed-modules-mapping", mapping, "--consumer", consumer)
    check(len(rows) == 2 * (len(fp8) + len(nvfp4) + 1), "real ct: one row per layer and loader (%d)" % len(rows))
    vllm, sg = by_module(rows, "vllm_compressed_tensors"), by_module(rows, "sglang_compressed_tensors")
    bad = [vllm.get(m) for m in fp8 if not (group_name(vllm.get(m, {})) == "group_0" and vllm[m]["bits"] == 8 and
                                            vllm[m]["error"] is None)]
    bad += [vllm.get(m) for m in nvfp4 if not (group_name(vllm.get(m, {})) == "group_1" and vllm[m]["bits"] == 4 and
                                               vllm[m]["group_size"] == 16 and vllm[m]["error"] is None)]
    check(not bad and vllm["lm_head"]["skipped"], "real ct: vLLM's decisions (%d differ), e.g. %s" % (len(bad), bad[:2]))
    experts = vllm["model.layers.0.ffn.experts"]
    check(experts["rule"] == "re:.*ffn.*(gate|up|down)_proj$",
          "real ct: the fused experts take the rule of their projections: %s" % experts)
    check(all((sg[m]["error"] or "").startswith("NotImplementedError") for m in fp8) and
          (sg["model.layers.0.ffn.experts"]["error"] or "").startswith("qtl::unsupported_error"),
          "real ct: sglang reads the top-level format for linear layers; its fused MoE is not modelled")


def main(tmp):
    test_llmc_checkpoint(tmp)
    test_overlap(tmp)
    test_modelopt(tmp)
    test_real_modelopt(tmp)
    test_real_compressed_tensors(tmp)


run_in_temp_dir("qtl_mixed_", main)
