// Every golden case of quantize-weights, gptq-quantize-weights, permute-rows, sort-weights and
// convert-to-channelwise (outputs of the reference Python on CPU torch) reproduced byte for byte:
// same tensor names, dtypes, shapes and bytes, and no tensor the reference does not return.
#include <qtl/io/safetensors.hpp>
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <golden.hpp>

namespace {

using qtl::index_t;
using qtl::io::dtype;

/// One produced output: dtype, shape and bytes, compared with the expected file's tensor.
struct produced {
  dtype type;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

template <class T>
produced make_produced(qtl::host_tensor<T, 2> const& t, std::vector<std::int64_t> shape) {
  produced p{*qtl::io::dtype_of<T>, std::move(shape), {}};
  p.bytes.resize(t.storage().size() * sizeof(T));
  if (!p.bytes.empty()) {
    std::memcpy(p.bytes.data(), t.data(), p.bytes.size());
  }
  return p;
}
template <class T>
produced make_produced(std::vector<T> const& v) {
  produced p{*qtl::io::dtype_of<T>, {static_cast<std::int64_t>(v.size())}, {}};
  p.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) {  // memcpy from an empty vector's null data() is undefined even for 0 bytes
    std::memcpy(p.bytes.data(), v.data(), p.bytes.size());
  }
  return p;
}

void require_same(qtl::test::golden_case const& c, std::map<std::string, produced> const& mine) {
  std::set<std::string> want_names;
  for (auto const& t : c.expected.tensors()) {
    want_names.insert(t.name);
  }
  std::set<std::string> mine_names;
  for (auto const& [name, p] : mine) {
    mine_names.insert(name);
  }
  REQUIRE(mine_names == want_names);
  for (auto const& [name, p] : mine) {
    INFO("tensor " << name);
    auto const& want = c.expected.at(name);
    REQUIRE(qtl::io::dtype_name(p.type) == qtl::io::dtype_name(want.type));
    REQUIRE(p.shape == want.shape);
    REQUIRE(p.bytes.size() == want.bytes.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < p.bytes.size(); ++i) {
      mismatches += p.bytes[i] != want.bytes[i];
    }
    CHECK(mismatches == 0);
  }
}

template <class T>
std::vector<T> values(qtl::io::safetensors_file const& f, std::string const& name) {
  return qtl::test::tensor_values<T>(f, name);
}

/// Calls `fn.template operator()<Q>()` with the compile-time type named `name`.
template <class F>
void with_quant_type(std::string const& name, F&& fn) {
  if (name == "uint4b8") {
    fn.template operator()<qtl::uint4b8>();
  } else if (name == "uint8b128") {
    fn.template operator()<qtl::uint8b128>();
  } else if (name == "int4") {
    fn.template operator()<qtl::int4>();
  } else if (name == "int8") {
    fn.template operator()<qtl::int8>();
  } else if (name == "uint4") {
    fn.template operator()<qtl::uint4>();
  } else if (name == "uint8") {
    fn.template operator()<qtl::uint8>();
  } else {
    FAIL("quantization type not covered by this test: " << name);
  }
}

/// Calls `fn.template operator()<T>()` with the weight dtype of tensor `name`.
template <class F>
void with_weight_dtype(qtl::io::safetensors_file const& f, std::string const& name, F&& fn) {
  switch (f.at(name).type) {
    case dtype::F32: fn.template operator()<float>(); break;
    case dtype::F16: fn.template operator()<qtl::half_t>(); break;
    case dtype::BF16: fn.template operator()<qtl::bfloat16_t>(); break;
    default: FAIL("weight dtype not covered: " << qtl::io::dtype_name(f.at(name).type));
  }
}

std::optional<index_t> group_param(qtl::io::json const& params) {
  auto const it = params.find("group-size");
  if (it == params.end() || it->is_null()) {
    return std::nullopt;
  }
  return it->get<index_t>();
}
bool flag(qtl::io::json const& params, char const* name) {
  auto const it = params.find(name);
  return it != params.end() && it->get<bool>();
}

}  // namespace

TEST_CASE("quantize_weights reproduces every golden case in fp32, fp16 and bf16", "[quantize][golden]") {
  std::set<std::string> dtypes_seen;
  for (auto const& c : qtl::test::golden_cases("quantize-weights")) {
    INFO(c.name << " " << c.params.dump());
    dtypes_seen.insert(std::string(qtl::io::dtype_name(c.in.at("w").type)));
    auto const gs = group_param(c.params);
    qtl::quantize_options opt;
    opt.zero_points = flag(c.params, "zero-points");
    opt.ref_zero_points_after_scales = flag(c.params, "ref-zero-points-after-scales");
    index_t const k = c.shape[0];
    index_t const n = c.shape[1];
    with_weight_dtype(c.in, "w", [&]<class T>() {
      auto const w = values<T>(c.in, "w");
      auto const wv = qtl::make_view(w.data(), k, n);
      with_quant_type(c.params.at("type").get<std::string>(), [&]<qtl::scalar_type Q>() {
        std::map<std::string, produced> mine;
        if (!gs) {
          qtl::host_tensor<float, 2> w_ref({k, n});
          qtl::host_tensor<std::int32_t, 2> w_q({k, n});
          qtl::quantize_weights<Q>(wv, std::nullopt, qtl::quantize_outputs<float>{w_ref.view(), w_q.view(), {}, {}}, opt);
          mine["w_ref"] = make_produced(w_ref, {k, n});
          mine["w_q"] = make_produced(w_q, {k, n});
        } else {
          index_t const g = (*gs == -1 || *gs >= k) ? k : *gs;
          qtl::host_tensor<T, 2> w_ref({k, n});
          qtl::host_tensor<std::int32_t, 2> w_q({k, n});
          qtl::host_tensor<T, 2> w_s({k / g, n});
          qtl::host_tensor<std::int32_t, 2> w_zp({opt.zero_points ? k / g : 0, n});
          qtl::quantize_weights<Q>(wv, gs, qtl::quantize_outputs<T>{w_ref.view(), w_q.view(), w_s.view(), w_zp.view()},
                                   opt);
          mine["w_ref"] = make_produced(w_ref, {k, n});
          mine["w_q"] = make_produced(w_q, {k, n});
          mine["w_s"] = make_produced(w_s, {k / g, n});
          if (opt.zero_points) {
            mine["w_zp"] = make_produced(w_zp, {k / g, n});
          }
        }
        require_same(c, mine);
      });
    });
  }
  CHECK(dtypes_seen == std::set<std::string>{"F32", "F16", "BF16"});
}

TEST_CASE("gptq_quantize_weights reproduces every golden case", "[quantize][golden]") {
  std::set<std::string> dtypes_seen;
  for (auto const& c : qtl::test::golden_cases("gptq-quantize-weights")) {
    INFO(c.name << " " << c.params.dump());
    dtypes_seen.insert(std::string(qtl::io::dtype_name(c.in.at("w").type)));
    index_t const k = c.shape[0];
    index_t const n = c.shape[1];
    index_t const gs = c.params.at("group-size").get<index_t>();
    bool const act_order = flag(c.params, "act-order");
    index_t const g = (gs == -1 || gs >= k) ? k : gs;
    with_weight_dtype(c.in, "w", [&]<class T>() {
      auto const w = values<T>(c.in, "w");
      with_quant_type(c.params.at("type").get<std::string>(), [&]<qtl::scalar_type Q>() {
        if constexpr (qtl::is_gptq_quant_type(Q)) {
          qtl::host_tensor<T, 2> w_ref({k, n});
          qtl::host_tensor<std::int32_t, 2> w_q({k, n});
          qtl::host_tensor<T, 2> w_s({k / g, n});
          std::vector<std::int32_t> g_idx(act_order ? static_cast<std::size_t>(k) : 0);
          std::vector<std::int64_t> rand_perm(g_idx.size());
          std::vector<std::int64_t> perm;
          qtl::gptq_options opt;
          opt.act_order = act_order;
          if (act_order) {
            perm = values<std::int64_t>(c.in, "perm");
            opt.perm = qtl::make_view(static_cast<std::int64_t const*>(perm.data()), k);
          }
          qtl::gptq_quantize_weights<Q>(
              qtl::make_view(w.data(), k, n), gs,
              qtl::gptq_outputs<T>{w_ref.view(), w_q.view(), w_s.view(),
                                   qtl::make_view(g_idx.data(), static_cast<index_t>(g_idx.size())),
                                   qtl::make_view(rand_perm.data(), static_cast<index_t>(rand_perm.size()))},
              opt);
          std::map<std::string, produced> mine;
          mine["w_ref"] = make_produced(w_ref, {k, n});
          mine["w_q"] = make_produced(w_q, {k, n});
          mine["w_s"] = make_produced(w_s, {k / g, n});
          mine["g_idx"] = make_produced(g_idx);
          mine["rand_perm"] = make_produced(rand_perm);
          require_same(c, mine);
        } else {
          FAIL("not a GPTQ type");
        }
      });
    });
  }
  CHECK(dtypes_seen == std::set<std::string>{"F32", "F16", "BF16"});
}

TEST_CASE("permute_rows reproduces every golden case", "[quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("permute-rows")) {
    INFO(c.name << " " << c.params.dump());
    index_t const k = c.shape[0];
    index_t const n = c.shape[1];
    index_t const gs = c.params.at("group-size").get<index_t>();
    auto const q_w = values<std::int32_t>(c.in, "q_w");
    auto const perm = values<std::int64_t>(c.in, "perm");
    with_weight_dtype(c.in, "w_ref", [&]<class T>() {
      auto const w_ref = values<T>(c.in, "w_ref");
      qtl::host_tensor<T, 2> o_ref({k, n});
      qtl::host_tensor<std::int32_t, 2> o_q({k, n});
      std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
      std::vector<std::int64_t> rand_perm(static_cast<std::size_t>(k));
      qtl::permute_rows(qtl::make_view(q_w.data(), k, n), qtl::make_view(w_ref.data(), k, n), gs,
                        qtl::make_view(perm.data(), k),
                        qtl::permute_rows_outputs<T>{o_ref.view(), o_q.view(), qtl::make_view(g_idx.data(), k),
                                                     qtl::make_view(rand_perm.data(), k)});
      std::map<std::string, produced> mine;
      mine["w_ref"] = make_produced(o_ref, {k, n});
      mine["q_w"] = make_produced(o_q, {k, n});
      mine["g_idx"] = make_produced(g_idx);
      mine["rand_perm"] = make_produced(rand_perm);
      require_same(c, mine);
    });
  }
}

TEST_CASE("sort_weights reproduces every golden case (distinct keys, so any correct sort agrees)",
          "[quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("sort-weights")) {
    INFO(c.name);
    index_t const k = c.shape[0];
    index_t const n = c.shape[1];
    auto const q_w = values<std::int32_t>(c.in, "q_w");
    auto const g_idx = values<std::int32_t>(c.in, "g_idx");
    qtl::host_tensor<std::int32_t, 2> o_q({k, n});
    std::vector<std::int32_t> o_g(static_cast<std::size_t>(k));
    std::vector<std::int32_t> si(static_cast<std::size_t>(k));
    qtl::sort_weights(qtl::make_view(q_w.data(), k, n), qtl::make_view(g_idx.data(), k),
                      qtl::sort_weights_outputs{o_q.view(), qtl::make_view(o_g.data(), k), qtl::make_view(si.data(), k)});
    std::map<std::string, produced> mine;
    mine["q_w"] = make_produced(o_q, {k, n});
    mine["g_idx"] = make_produced(o_g);
    mine["sort_indices"] = make_produced(si);
    require_same(c, mine);
  }
}

TEST_CASE("convert_to_channelwise reproduces every golden case", "[quantize][golden]") {
  for (auto const& c : qtl::test::golden_cases("convert-to-channelwise")) {
    INFO(c.name << " " << c.params.dump());
    std::vector<index_t> widths;
    std::string const spec = c.params.at("logical-widths").get<std::string>();
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      std::size_t const comma = std::min(spec.find(',', pos), spec.size());
      widths.push_back(std::stoll(spec.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    auto const& in = c.in.at("weight_scale");
    auto const scale = values<float>(c.in, "weight_scale");
    qtl::host_tensor<float, 2> out =
        in.shape.empty() ? qtl::convert_to_channelwise(scale.at(0), widths)
                         : qtl::convert_to_channelwise(qtl::make_view(scale.data(), in.shape[0]), widths);
    std::map<std::string, produced> mine;
    mine["weight_scale"] = make_produced(out, {out.extent(0), 1});
    require_same(c, mine);
  }
}
