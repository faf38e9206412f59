// libFuzzer target for the safetensors reader (qtl/io/safetensors.hpp).
// Any input must either be rejected with qtl::format_error or be accepted as a file whose tensors
// lie inside the input (every byte is read, so ASan sees any over-read) and which survives a
// write -> read round trip unchanged. Anything else (a crash, another exception, a mismatch)
// aborts. Seeds: fuzz/corpus/safetensors/ (made by test/tools/make_hostile.py --seeds).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  using qtl::io::safetensors_file;
  std::span<std::byte const> const bytes(reinterpret_cast<std::byte const*>(data), size);
  safetensors_file file;
  try {
    file = safetensors_file::view(bytes, "fuzz-input");
  } catch (qtl::format_error const&) {
    return 0;  // rejected: the expected outcome for most inputs
  }
  // Accepted: touch every tensor byte, and check it lies in the input.
  unsigned sum = 0;
  for (auto const& t : file.tensors()) {
    if (!t.bytes.empty() && (t.bytes.data() < bytes.data() ||
                             t.bytes.data() + t.bytes.size() > bytes.data() + bytes.size())) {
      std::abort();
    }
    for (std::byte b : t.bytes) {
      sum += static_cast<unsigned>(b);
    }
  }
  // Round trip through the writer's header and re-read.
  std::vector<qtl::io::tensor_entry> entries(file.tensors().begin(), file.tensors().end());
  std::string header;
  try {
    header = qtl::io::safetensors_header(entries, file.metadata());
  } catch (qtl::error const&) {
    std::abort();  // an accepted file must be writable as is
  }
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  }
  out += header;
  for (auto const& t : entries) {
    out.append(reinterpret_cast<char const*>(t.bytes.data()), t.bytes.size());
  }
  auto const again = safetensors_file::view(
      {reinterpret_cast<std::byte const*>(out.data()), out.size()}, "fuzz-roundtrip");
  if (again.tensors().size() != entries.size() || again.metadata() != file.metadata()) {
    std::abort();
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto const& a = again.tensors()[i];
    auto const& e = entries[i];
    if (a.name != e.name || a.type != e.type || a.shape != e.shape ||
        a.bytes.size() != e.bytes.size() ||
        (!a.bytes.empty() && std::memcmp(a.bytes.data(), e.bytes.data(), a.bytes.size()) != 0)) {
      std::abort();
    }
  }
  return static_cast<int>(sum & 0);
}
