// Compile-time tests of qtl/match/{regex,glob,module_path}.hpp: building this file is the test.
#include <qtl/match/glob.hpp>
#include <qtl/match/module_path.hpp>
#include <qtl/match/regex.hpp>

namespace {

// The three verbs (re.match / re.fullmatch / re.search)
static_assert(qtl::re_match(R"(model\.layers\.\d+\.mlp)", "model.layers.3.mlp.down_proj"));
static_assert(!qtl::re_fullmatch(R"(model\.layers\.\d+\.mlp)", "model.layers.3.mlp.down_proj"));
static_assert(!qtl::re_match(R"(layers\.\d+)", "model.layers.3"));
static_assert(qtl::re_search(R"(layers\.\d+)", "model.layers.3"));
static_assert(qtl::re_fullmatch(R"(model\.layers\.\d+)", "model.layers.3"));

// GPTQ dynamic rules from real configs (test/data/golden/configs/gptq_*.json)
static_assert(qtl::re_match(R"(.*\.18\..*gate.*)", "model.layers.18.mlp.gate_up_proj"));
static_assert(!qtl::re_match(R"(.*\.18\..*gate.*)", "model.layers.18.mlp.down_proj"));
static_assert(qtl::re_match(R"(.*\.(?:[1-9]|1[0-9]|2[0-1])\..*)", "model.layers.21.self_attn.o_proj"));
static_assert(!qtl::re_match(R"(.*\.(?:[1-9]|1[0-9]|2[0-1])\..*)", "model.layers.0.self_attn.o_proj"));
static_assert(!qtl::re_match(R"(.*\.(?:[1-9]|1[0-9]|2[0-1])\..*)", "model.layers.22.self_attn.o_proj"));
// negative lookahead (GPTQModel writes it into quantize_config.json)
static_assert(!qtl::re_match(R"(^model\.layers\.(?!(?:0|2)\.)\d+\.)", "model.layers.0.mlp.down_proj"));
static_assert(qtl::re_match(R"(^model\.layers\.(?!(?:0|2)\.)\d+\.)", "model.layers.1.mlp.down_proj"));
static_assert(!qtl::re_match(R"(^model\.layers\.(?!(?:0|2)\.)\d+\.)", "model.layers.2.mlp.down_proj"));
static_assert(qtl::re_match(R"(^model\.layers\.(?!(?:0|2)\.)\d+\.)", "model.layers.20.mlp.down_proj"));
static_assert(qtl::re_match("a(?=b)", "ab") && !qtl::re_match("a(?=b)", "ac"));
// unescaped '.' matches any character (GPTQModel#1680, prime-rl#2442)
static_assert(qtl::re_match(".*.mlp.gate.*", "model.layers.0.mlp.gate_proj"));
static_assert(qtl::re_search("mlp.gate.", "model.layers.0.mlp.gate_proj"));
static_assert(!qtl::re_search(R"(mlp\.gate\.)", "model.layers.0.mlp.gate_proj"));
// $ is needed for an end anchor under re.match, and it also matches before a final '\n'
static_assert(qtl::re_match(".*mlp.gate", "model.layers.0.mlp.gate_up_proj"));
static_assert(!qtl::re_match(".*mlp.gate$", "model.layers.0.mlp.gate_up_proj"));
static_assert(qtl::re_match("a$", "a\n") && !qtl::re_match(R"(a\Z)", "a\n"));
// repetition counts, lazy forms, literal braces
static_assert(qtl::re_fullmatch("a{2,3}", "aaa") && !qtl::re_fullmatch("a{2,3}", "aaaa"));
static_assert(qtl::re_fullmatch("a{,2}b{2,}", "bb") && qtl::re_fullmatch("a{2}?b*?", "aabb"));
static_assert(qtl::re_fullmatch("a{", "a{") && qtl::re_fullmatch("a{1,x}", "a{1,x}") && qtl::re_fullmatch("{}", "{}"));
// classes and escapes
static_assert(qtl::re_fullmatch(R"([^\d.]+)", "abc_") && !qtl::re_fullmatch(R"([^\d.]+)", "a.b"));
static_assert(qtl::re_fullmatch(R"([]a-c-]+)", "]-ab") && qtl::re_fullmatch(R"(\W\S\D)", ".xa"));
static_assert(qtl::re_fullmatch(R"(\s)", "\x1c"));  // Python's default mode on ASCII text
static_assert(qtl::re_search(R"(\bmlp\b)", "x.mlp.y") && !qtl::re_search(R"(\bmlp\b)", "x_mlp_y"));
// no exponential blow-up, even in constant evaluation
static_assert(!qtl::re_search("(a*)*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
static_assert(!qtl::re_fullmatch("(a|aa)*c", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));

// static_regex: checked once, used many times
using first_layer_kept = qtl::static_regex<R"(^model\.layers\.(?!0\.)\d+\.)">;
static_assert(first_layer_kept::match("model.layers.7.mlp.down_proj"));
static_assert(!first_layer_kept::match("model.layers.0.mlp.down_proj"));
static_assert(!first_layer_kept::search("x.model.layers.7.mlp"));
static_assert(qtl::static_regex<"(gate|up)_proj$">{}.search("model.layers.0.mlp.experts.3.up_proj"));
static_assert(qtl::static_regex<"x">::program_size() == 2);  // byte 'x', match

// glob (fnmatch.fnmatchcase)
static_assert(qtl::glob_match("model.layers.*.mlp.*", "model.layers.3.mlp.gate_up_proj"));
static_assert(!qtl::glob_match("model.layers.*.mlp.*", "model.layers.3.mlp"));
static_assert(qtl::glob_match("*.attn.*", "layers.0.attn.wo"));
static_assert(qtl::glob_match("lm_head*", "lm_head") && qtl::glob_match("*", ""));
static_assert(qtl::glob_match("layers.[0-9].?", "layers.5.x") && !qtl::glob_match("layers.[!0-9].?", "layers.5.x"));
static_assert(qtl::glob_match("[z-a!b]", "x") && !qtl::glob_match("[z-a!b]", "b"));  // CPython's quirk
static_assert(qtl::glob_match("a.b(c)+", "a.b(c)+") && !qtl::glob_match("a.b", "axb"));  // no regex leaks

// module paths (sglang _module_path_match)
static_assert(qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate"));
static_assert(!qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate_up_proj"));  // sglang#23467
static_assert(qtl::module_path_match("model.layers.34.", "model.layers.34.mlp.down_proj"));  // sglang#26287
static_assert(!qtl::module_path_match("model.layers.1", "model.layers.10.mlp"));
static_assert(qtl::module_path_match("", "") && !qtl::module_path_match("", "a.b"));

}  // namespace
