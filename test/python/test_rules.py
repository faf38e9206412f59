"""is_layer_skipped, get_dynamic_override and override_config through the Python API: hand-worked
cases of the reference's semantics (dotted boundaries, fused shards, the fallback fused map, the
GPTQ `dynamic` quirks) and every sglang column of test/data/golden/configs that these functions
decide (docs/spec/matchers.md §6 is the contract of `expected`)."""

import copy
import json
import pathlib

import pytest

import qtl

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "data" / "golden" / "configs"


def golden(name):
    return json.loads((CONFIGS / (name + ".json")).read_text())


# --- is_layer_skipped ----------------------------------------------------------------------------

def test_is_layer_skipped_dotted_boundaries():
    assert qtl.is_layer_skipped("lm_head", ["lm_head"])
    assert qtl.is_layer_skipped("model.layers.0.mlp.gate", ["mlp.gate"])
    # `mlp.gate` does not match `mlp.gate_up_proj` (nor its shards gate_proj / up_proj).
    assert not qtl.is_layer_skipped("model.layers.0.mlp.gate_up_proj", ["mlp.gate"])
    assert qtl.is_layer_skipped("model.layers.3.self_attn.o_proj", ["model.layers.3"])
    assert not qtl.is_layer_skipped("model.layers.31.self_attn.o_proj", ["model.layers.3"])
    assert qtl.is_layer_skipped("model.layers.3.self_attn.o_proj", ["model.layers.3."])  # trailing dot dropped
    assert not qtl.is_layer_skipped("model.layers.0.self_attn.o_proj", [])


def test_is_layer_skipped_fused_shards():
    attn = "model.layers.0.self_attn."
    shards = [attn + "q_proj", attn + "k_proj", attn + "v_proj"]
    # The fallback map (no fused_mapping): qkv_proj -> q/k/v; all shards listed -> skipped.
    assert qtl.is_layer_skipped(attn + "qkv_proj", shards)
    # The fused name itself is never compared (sglang#26213).
    assert not qtl.is_layer_skipped(attn + "qkv_proj", [attn + "qkv_proj"])
    with pytest.raises(ValueError, match="Detected some but not all shards of model.layers.0.self_attn.qkv_proj"):
        qtl.is_layer_skipped(attn + "qkv_proj", shards[:2])
    # A mapping of the model's own names; the fallback still serves names the mapping lacks.
    mapping = {"fused_qkv": ["q_a", "kv_a"]}
    assert qtl.is_layer_skipped(attn + "fused_qkv", [attn + "q_a", attn + "kv_a"], mapping)
    assert qtl.is_layer_skipped(attn + "qkv_proj", shards, mapping)
    with pytest.raises(qtl.Error):
        qtl.is_layer_skipped(attn + "fused_qkv", [attn + "q_a"], mapping)
    # gate_up_proj: both shards listed literally.
    mlp = "model.layers.0.mlp."
    assert qtl.is_layer_skipped(mlp + "gate_up_proj", [mlp + "gate_proj", mlp + "up_proj"])


def test_is_layer_skipped_experts_superstring():
    # One listed expert leaf skips the whole fused MoE (prefix a substring of an "experts" entry).
    assert qtl.is_layer_skipped("model.layers.1.mlp.experts", ["model.layers.1.mlp.experts.7.down_proj"])
    assert not qtl.is_layer_skipped("model.layers.1.mlp.experts", ["model.layers.2.mlp.experts.7.down_proj"])


def test_is_layer_skipped_argument_errors():
    with pytest.raises(TypeError):
        qtl.is_layer_skipped("lm_head", "lm_head")  # a str is not a list of names
    with pytest.raises(TypeError):
        qtl.is_layer_skipped("lm_head", [1])
    with pytest.raises(TypeError):
        qtl.is_layer_skipped("lm_head", ["lm_head"], ["not", "a", "mapping"])


@pytest.mark.parametrize("name,column", [("awq_mixtral_gate_substring", "sglang_dot_boundary"),
                                         ("mxfp4_gpt_oss_120b_wildcards", "sglang_dot_boundary_literal")])
def test_is_layer_skipped_golden(name, column):
    doc = golden(name)
    skip_list = doc["quantization_config"]["modules_to_not_convert"]
    for module, verdict in doc["expected"][column].items():
        assert qtl.is_layer_skipped(module, skip_list) == (verdict == "skip"), module


# --- get_dynamic_override ------------------------------------------------------------------------

GPTQ_GOLDEN = ["gptq_gptqmodel_readme_dynamic", "gptq_issue904_tinyllama_skip_1_21",
               "gptq_gptqmodel_layers_0_and_2_lookahead"]


@pytest.mark.parametrize("name", GPTQ_GOLDEN)
def test_get_dynamic_override_golden(name):
    doc = golden(name)
    qc = doc["quantization_config"]
    for module, want in doc["expected"]["sglang_get_dynamic_override"].items():
        got = qtl.get_dynamic_override(qc, module)
        if want == "base":
            assert got is None, module
            assert qtl.get_dynamic_override(qc, module, "bits", qc["bits"]) == qc["bits"]
        elif want == "skip":
            assert got is False, module
            assert qtl.get_dynamic_override(qc, module, "bits", qc["bits"]) is False
        else:
            assert got is qc["dynamic"][want["rule"]], module  # the body itself, as the reference
            for field, value in want["override"].items():
                assert qtl.get_dynamic_override(qc, module, field, -1) == value


def test_get_dynamic_override_hand_worked():
    cfg = {"dynamic": {"+:.*\\.1\\..*": {"bits": 8}, "-:.*down.*": {}, ".*gate.*": True}}
    assert qtl.get_dynamic_override(cfg, "model.layers.1.mlp.down_proj", "bits", 4) == 8  # first match wins
    assert qtl.get_dynamic_override(cfg, "model.layers.1.mlp.down_proj", "group_size", 128) == 128
    assert qtl.get_dynamic_override(cfg, "model.layers.2.mlp.down_proj", "bits", 4) is False
    assert qtl.get_dynamic_override(cfg, "model.layers.2.self_attn.o_proj", "bits", 4) == 4
    assert qtl.get_dynamic_override(cfg, "model.layers.2.self_attn.o_proj") is None
    # re.match is anchored at the start only.
    assert qtl.get_dynamic_override({"dynamic": {"layers": {}}}, "model.layers.0") is None
    # A positive rule whose body is not a dict: the body itself, and .get fails as in Python.
    assert qtl.get_dynamic_override(cfg, "model.layers.2.mlp.gate_up_proj") is True
    with pytest.raises(AttributeError):
        qtl.get_dynamic_override(cfg, "model.layers.2.mlp.gate_up_proj", "bits", 4)
    # The reference's QuantizationConfig: any object with `dynamic`.
    class Config:
        dynamic = cfg["dynamic"]
    assert qtl.get_dynamic_override(Config(), "model.layers.1.x", "bits") == 8
    assert qtl.get_dynamic_override({}, "model.layers.1.x", "bits", 3) == 3  # no "dynamic": no rules
    with pytest.raises(qtl.RegexError):
        qtl.get_dynamic_override({"dynamic": {"-:(unclosed": {}}}, "model.layers.0")


# --- override_config -----------------------------------------------------------------------------

def marlin(qc, **extra):
    cfg = copy.deepcopy(qc)
    cfg.update(quant_method="gptq_marlin", **extra)
    cfg.setdefault("sym", True)
    cfg.setdefault("desc_act", False)
    return cfg


def test_override_config_readme_dynamic():
    qc = golden("gptq_gptqmodel_readme_dynamic")["quantization_config"]
    cfg = marlin(qc)
    assert qtl.override_config(cfg, "model.layers.18.mlp.gate_up_proj") is None
    assert (cfg["bits"], cfg["group_size"], cfg["pack_factor"], cfg["quant_type"]) == (4, 32, 8, qtl.scalar_types.uint4b8)
    cfg = marlin(qc)
    qtl.override_config(cfg, "model.layers.19.mlp.gate_up_proj")
    assert (cfg["bits"], cfg["group_size"], cfg["pack_factor"], cfg["quant_type"]) == (8, 64, 4, qtl.scalar_types.uint8b128)
    cfg = marlin(qc)
    qtl.override_config(cfg, "model.layers.17.self_attn.o_proj")  # no rule: the base
    assert (cfg["bits"], cfg["group_size"], cfg["desc_act"], cfg["sym"]) == (4, 128, False, True)
    # A negative rule makes every lookup False: bits = False, then 32 // False (the reference's quirk;
    # get_linear_quant_method never calls override_config there).
    cfg = marlin(qc)
    with pytest.raises(ZeroDivisionError):
        qtl.override_config(cfg, "model.layers.20.mlp.gate_up_proj")
    assert cfg["bits"] is False and cfg["group_size"] is False and "pack_factor" not in cfg


def test_override_config_errors_and_quirks():
    base = {"bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    cfg = dict(base, quant_method="gptq_marlin", dynamic={".*": {"sym": False}})
    with pytest.raises(ValueError, match="Unsupported quantization config: bits=4, sym=False"):
        qtl.override_config(cfg, "model.layers.0.mlp.down_proj")
    assert cfg["sym"] is False and cfg["pack_factor"] == 8 and "quant_type" not in cfg
    cfg = dict(base, quant_method="gptq", dynamic={".*": {"bits": 5}})
    with pytest.raises(ValueError, match="only 2/3/4/8-bit"):
        qtl.override_config(cfg, "x")
    cfg = dict(base, quant_method="awq", dynamic={".*": {"bits": 5}})  # neither branch: no check
    qtl.override_config(cfg, "x")
    assert cfg["bits"] == 5 and cfg["pack_factor"] == 6
    # isinstance rules: desc_act 1 is not a bool (ignored); group_size True is an int (1).
    cfg = dict(base, quant_method="gptq", dynamic={".*": {"desc_act": 1, "group_size": True, "bits": 4.0}})
    qtl.override_config(cfg, "x")
    assert (cfg["desc_act"], cfg["group_size"], cfg["bits"]) == (False, 1, 4) and cfg["group_size"] is True
    cfg = dict(base, quant_method="gptq_marlin", dynamic={".*": True})
    with pytest.raises(AttributeError):
        qtl.override_config(cfg, "x")
    with pytest.raises(qtl.ConfigError, match="bits"):
        qtl.override_config({"group_size": 128}, "x")


def test_override_config_on_a_config_object():
    """The reference's QuantizationConfig attributes, and its own TYPE_MAP values."""
    class GPTQMarlinConfig:
        TYPE_MAP = {(4, True): "u4b8", (8, True): "u8b128"}

        def __init__(self):
            self.weight_bits, self.group_size, self.desc_act, self.is_sym = 4, 128, False, True
            self.dynamic = {"+:.*\\.1\\..*": {"bits": 8, "group_size": 64}}

        def get_name(self):
            return "gptq_marlin"

    c = GPTQMarlinConfig()
    qtl.override_config(c, "model.layers.1.mlp.down_proj")
    assert (c.weight_bits, c.group_size, c.pack_factor, c.is_sym, c.quant_type) == (8, 64, 4, True, "u8b128")
