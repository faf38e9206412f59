#pragma once
// `qtl inspect FILE...`: tensors, dtypes, shapes, bytes, metadata and the recognised quantization
// scheme of safetensors files, sharded checkpoints (an index.json or a folder) — as a table or JSON;
// for a checkpoint whose config mixes schemes (compressed-tensors `mixed-precision`, ModelOpt
// MIXED_PRECISION) also the config's groups or algorithms (`mixed_config`).

#include <iosfwd>
#include <string>
#include <vector>

#include <qtl/io/safetensors.hpp>

namespace qtl::tool {

/// Prints the report of every path to `out`. `assume` "marlin" adds the logical shapes of
/// Marlin-repacked tensors (inspect_marlin.cpp). @throws qtl::error for the first unreadable file.
void inspect(std::vector<std::string> const& paths, bool as_json, std::ostream& out, std::string const& assume = "");

/// `--assume marlin`: one entry per Marlin weight (inspect_marlin.cpp), and its table line.
qtl::io::json marlin_report(std::vector<qtl::io::tensor_info const*> const& tensors);
std::string marlin_line(qtl::io::json const& entry);

}  // namespace qtl::tool
