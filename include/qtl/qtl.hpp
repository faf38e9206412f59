#pragma once
/// \file
/// Umbrella of every QTL header that compiles without nvcc and without nlohmann-json
/// (`qtl/cuda/*.cuh` need nvcc; `qtl/io/*.hpp` need nlohmann-json).

#include <qtl/blockscale.hpp>
#include <qtl/convert.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/error.hpp>
#include <qtl/fixed_string.hpp>
#include <qtl/fp4.hpp>
#include <qtl/fp8.hpp>
#include <qtl/macros.hpp>
#include <qtl/marlin.hpp>
#include <qtl/marlin_fp.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/module_path.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>
#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>
#include <qtl/numeric.hpp>
#include <qtl/pack.hpp>
#include <qtl/quantize.hpp>
#include <qtl/replace.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/transpose.hpp>
#include <qtl/view.hpp>
