#pragma once
// `qtl inspect FILE...`: tensors, dtypes, shapes, bytes, metadata and the recognised quantization
// scheme of safetensors files, sharded checkpoints (an index.json or a folder) — as a table or JSON.

#include <iosfwd>
#include <string>
#include <vector>

namespace qtl::tool {

/// Prints the report of every path to `out`. @throws qtl::error for the first unreadable file.
void inspect(std::vector<std::string> const& paths, bool as_json, std::ostream& out);

}  // namespace qtl::tool
