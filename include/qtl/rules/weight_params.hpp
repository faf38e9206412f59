#pragma once
/// \file
/// The weight parameters a decision reports for a quantized layer (`qtl/rules/consumers.hpp`):
/// the integer storage types, each config family's base settings, compressed-tensors config groups,
/// ModelOpt algorithms (and the NVFP4 group size a ModelOpt mixed reader gives them), and GPTQ's
/// base parameters with the kernel family it picks.

#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/group_size.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumer.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/mixed.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/scalar_type.hpp>

namespace qtl {

/// The unsigned integer storage type of a `bits`-wide symmetric (biased by 2^(bits-1)) or
/// asymmetric (zero-point) weight: uint4b8, uint8b128, uint4, ...; nothing outside 1..16 bits.
constexpr std::optional<scalar_type> integer_weight_type(std::int64_t bits, bool sym) {
  if (bits < 1 || bits > 16) {
    return std::nullopt;
  }
  scalar_type t{};
  t.mantissa = static_cast<std::uint8_t>(bits);
  t.bias = sym ? static_cast<std::int32_t>(std::int64_t{1} << (bits - 1)) : 0;
  return t;
}

/// The weight parameters of a quantized (not skipped) layer under the config's base settings.
struct weight_params {
  std::optional<std::int64_t> bits;
  std::optional<std::int64_t> group_size;
  std::optional<bool> desc_act;
  std::optional<bool> sym;
  std::optional<scalar_type> quant_type;
};

/// compressed-tensors weight arguments as weight parameters: `type` "float" 8 bits
/// `float8_e4m3fn`, 4 bits `float4_e2m1f`; integers their storage type (symmetric by default).
inline weight_params ct_weights(std::optional<std::int64_t> bits, std::optional<std::int64_t> group_size,
                                std::optional<bool> sym, std::string_view type) {
  weight_params w;
  w.bits = bits;
  w.group_size = group_size;
  w.sym = sym;
  if (bits) {
    if (type == "float") {
      if (*bits == 8) {
        w.quant_type = float8_e4m3fn;
      } else if (*bits == 4) {
        w.quant_type = float4_e2m1f;
      }
    } else {
      w.quant_type = integer_weight_type(*bits, sym.value_or(true));
    }
  }
  return w;
}

/// The base weight parameters of the config's family (FP8: 8 bits `float8_e4m3fn`; MXFP4: 4 bits,
/// group 32, `float4_e2m1f`; ModelOpt NVFP4: 4 bits, group 16 unless given, `float4_e2m1f`;
/// integer families: their `bits`/`group_size`/`sym` and the integer storage type).
inline weight_params base_weights(quant_config const& cfg) {
  weight_params w;
  switch (cfg.family) {
    case quant_family::fp8:
      w.bits = 8;
      w.quant_type = float8_e4m3fn;
      break;
    case quant_family::mxfp4:
      w.bits = 4;
      w.group_size = 32;
      w.quant_type = float4_e2m1f;
      break;
    case quant_family::modelopt:
      if (cfg.quant_algo == "NVFP4" || cfg.quant_algo == "nvfp4") {
        w.bits = 4;
        w.group_size = cfg.group_size.value_or(16);
        w.quant_type = float4_e2m1f;
      } else if (cfg.quant_algo == "FP8" || cfg.quant_algo == "fp8" || cfg.quant_algo == "MXFP8") {
        w.bits = 8;
        w.quant_type = float8_e4m3fn;
        if (cfg.quant_algo == "MXFP8") {
          w.group_size = 32;
        }
      } else {
        w.bits = cfg.bits;
        w.group_size = cfg.group_size;
      }
      break;
    case quant_family::compressed_tensors:
      w = ct_weights(cfg.bits, cfg.group_size, cfg.sym, cfg.weight_type.value_or("int"));
      w.desc_act = cfg.desc_act;
      break;
    case quant_family::awq: {
      w.bits = cfg.bits.value_or(4);
      w.group_size = cfg.group_size.value_or(128);
      bool const zp = cfg.zero_point.value_or(true);
      w.sym = !zp;
      w.quant_type = integer_weight_type(*w.bits, !zp);
      break;
    }
    case quant_family::gptq:
    case quant_family::auto_round:
      w.bits = cfg.bits.value_or(4);
      w.group_size = cfg.group_size.value_or(128);
      w.sym = cfg.sym.value_or(true);
      w.desc_act = cfg.desc_act.value_or(false);
      w.quant_type = integer_weight_type(*w.bits, *w.sym);
      break;
  }
  return w;
}

/// The weight parameters of a compressed-tensors config group.
inline weight_params ct_group_weights(ct_config_group const& g) {
  return ct_weights(g.num_bits, g.group_size, g.symmetric, g.type);
}

/// The weight parameters of a ModelOpt algorithm (upper case): FP8 (`FP8`, `FP8_PB_WO`,
/// `FP8_PER_CHANNEL_PER_TOKEN`) 8 bits `float8_e4m3fn`, MXFP8 also group 32; NVFP4 and
/// W4A16_NVFP4 4 bits `float4_e2m1f` in groups of `nvfp4_group`; nothing for others.
inline weight_params modelopt_algo_weights(std::string const& algo, std::int64_t nvfp4_group) {
  weight_params w;
  if (algo == "FP8" || algo == "FP8_PB_WO" || algo == "FP8_PER_CHANNEL_PER_TOKEN" || algo == "MXFP8") {
    w.bits = 8;
    w.quant_type = float8_e4m3fn;
    if (algo == "MXFP8") {
      w.group_size = 32;
    }
  } else if (algo == "NVFP4" || algo == "W4A16_NVFP4") {
    w.bits = 4;
    w.group_size = nvfp4_group;
    w.quant_type = float4_e2m1f;
  }
  return w;
}

/// The NVFP4 group size a ModelOpt mixed reader gives every NVFP4 layer: vLLM the config's
/// `group_size`, else the first NVFP4 or W4A16_NVFP4 entry's (default 16); sglang the first
/// NVFP4 entry's (default 16).
inline std::int64_t modelopt_mixed_nvfp4_group(quant_config const& cfg, bool vllm) {
  if (vllm && cfg.group_size) {
    return *cfg.group_size;
  }
  for (modelopt_layer const& e : cfg.quantized_layers) {
    std::string const a = ascii_upper(e.quant_algo);
    if (a == "NVFP4" || (vllm && a == "W4A16_NVFP4")) {
      return e.group_size.value_or(16);
    }
  }
  return 16;
}

/// The GPTQ parameters of the config (the reference's config object before any override).
inline gptq_params gptq_base_params(quant_config const& cfg, std::optional<gptq_kernel> kernel) {
  gptq_params p;
  p.bits = cfg.bits.value_or(4);
  p.group_size = cfg.group_size.value_or(128);
  p.desc_act = cfg.desc_act.value_or(false);
  p.sym = cfg.sym.value_or(true);
  p.lm_head_quantized = cfg.lm_head_quantized;
  bool const marlin_ok = gptq_marlin_type(p.bits, p.sym).has_value() && is_gptq_group_size(p.group_size);
  p.kernel = kernel.value_or(marlin_ok ? gptq_kernel::gptq_marlin : gptq_kernel::gptq);
  p.pack_factor = p.bits > 0 ? 32 / p.bits : 0;
  p.quant_type =
      p.kernel == gptq_kernel::gptq_marlin ? gptq_marlin_type(p.bits, p.sym) : integer_weight_type(p.bits, p.sym);
  return p;
}

}  // namespace qtl
