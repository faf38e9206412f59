// The plan of a `qtl quantize` run: shard layout, refusing quantized input, the small files
// (see quantize_plan.hpp).

#include "quantize_plan.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <unordered_map>

#include <qtl/io/regular_file.hpp>

#include "../config_tools.hpp"
#include "../recognize.hpp"
#include "errors.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

/// A small file of the staged output, written whole and flushed.
void small_file(staged_output& out, std::string const& name, std::string const& text) {
  output_file f(out, name);
  f.pwrite_all(text.data(), text.size(), 0);
  f.flush();
}

/// Copies the regular file `from` into the staged output as `name`, reading it to its end.
/// @throws data_error naming `from` when it is not a regular file or cannot be read whole.
void copy_extra_file(fs::path const& from, staged_output& out, std::string const& name) {
  struct stat st {};
  std::string why;
  int const fd = qtl::io::open_regular_file(from, st, why);
  if (fd < 0) {
    throw data_error(from.string() + ": " + why + " (the input folder's other files are copied)");
  }
  output_file f(out, name);
  std::vector<char> buf(std::size_t{1} << 20);
  std::uint64_t off = 0;
  for (;;) {
    ssize_t const r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      int const err = errno;
      ::close(fd);
      throw data_error(from.string() + ": cannot read: " + std::strerror(err));
    }
    if (r == 0) {
      break;
    }
    f.pwrite_all(buf.data(), static_cast<std::size_t>(r), off);
    off += static_cast<std::uint64_t>(r);
  }
  ::close(fd);
  if (off != static_cast<std::uint64_t>(st.st_size)) {
    throw data_error(from.string() + ": read " + std::to_string(off) + " of its " + std::to_string(st.st_size) +
                     " bytes (it changed while it was copied)");
  }
  f.flush();
}

void write_shard_index(staged_output& out, std::vector<shard_plan> const& shards) {
  ojson index = {{"metadata", {{"total_size", 0}}}, {"weight_map", ojson::object()}};
  std::uint64_t data_bytes = 0;
  for (shard_plan const& s : shards) {
    data_bytes += s.total - s.header_bytes;  // 0 - 0 for a shard without tensors (never laid out)
    for (auto const& t : s.tensors) {
      index["weight_map"][t.name] = s.name;
    }
  }
  index["metadata"]["total_size"] = data_bytes;
  small_file(out, "model.safetensors.index.json", index.dump(2) + "\n");
}

bool other_weight_file(std::string_view name) {
  static constexpr std::string_view extensions[] = {".bin", ".pt",   ".pth",     ".ckpt", ".gguf",      ".ggml",
                                                    ".h5",  ".hdf5", ".msgpack", ".onnx", ".onnx_data", ".tflite",
                                                    ".pb",  ".ot",   ".pkl",     ".npz",  ".nemo",      ".pdparams"};
  std::size_t const dot = name.rfind('.');
  if (dot == std::string_view::npos) {
    return false;
  }
  std::string ext(name.substr(dot));
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(std::begin(extensions), std::end(extensions), ext) != std::end(extensions);
}

std::string side_file_skip_reason(fs::path const& path, bool& quiet) {
  std::string const name = path.filename().string();
  quiet = true;
  if (name.empty() || name[0] == '.' || name == "config.json" || name == "quantize_config.json" ||
      name == "hf_quant_config.json" || path.extension() == ".safetensors" ||
      name.find(".safetensors.index.json") != std::string::npos) {
    return "the checkpoint's own file";
  }
  std::error_code ec;
  fs::file_status const link = fs::symlink_status(path, ec);
  fs::file_status const st = fs::status(path, ec);
  if (fs::is_directory(st)) {
    return "a folder";
  }
  quiet = false;
  if (fs::is_symlink(link) && !fs::exists(st)) {
    return "a symbolic link to a missing file";
  }
  if (!fs::is_regular_file(st)) {
    return fs::is_fifo(st)                                      ? "a FIFO, not a regular file"
           : fs::is_socket(st)                                  ? "a socket, not a regular file"
           : fs::is_block_file(st) || fs::is_character_file(st) ? "a device, not a regular file"
                                                                : "not a regular file";
  }
  if (other_weight_file(name)) {
    return "a weight file of another format (not part of a safetensors checkpoint)";
  }
  std::uintmax_t const size = fs::file_size(path, ec);
  if (!ec && size > max_side_file_bytes) {
    return human_bytes(size) + ", larger than a side file (" + human_bytes(max_side_file_bytes) + ")";
  }
  return {};
}

std::string copy_input_extras(fs::path const& in_path, staged_output& out, std::string_view command) {
  std::error_code ec;
  fs::path folder = fs::is_directory(in_path, ec) ? in_path : in_path.parent_path();
  if (folder.empty()) {
    folder = ".";
  }
  std::string warnings;
  for (auto const& entry : fs::directory_iterator(folder)) {
    bool quiet = false;
    std::string const why = side_file_skip_reason(entry.path(), quiet);
    if (why.empty()) {
      copy_extra_file(entry.path(), out, entry.path().filename().string());
    } else if (!quiet) {
      warnings += "qtl " + std::string(command) + ": warning: " + qtl::io::printable(entry.path().string()) +
                  " not copied: " + why + "\n";
    }
  }
  return warnings;
}

std::string scale_group_name(compiled_config const& cc, std::string const& module) {
  if (auto f = fused_name(cc, module)) {
    return *std::move(f);
  }
  // module = parent.leaf; an expert's parent is `...experts.E` (E a number)
  std::string_view const m(module);
  std::size_t const dot = m.rfind('.');
  std::string_view const parent = dot == std::string_view::npos ? std::string_view() : m.substr(0, dot);
  std::string_view const leaf = m.substr(dot + 1);  // npos + 1 == 0: the whole name
  std::size_t const pdot = parent.rfind('.');
  std::string_view const index = pdot == std::string_view::npos ? std::string_view() : parent.substr(pdot + 1);
  bool const expert = !index.empty() && index.find_first_not_of("0123456789") == std::string_view::npos &&
                      parent.substr(0, pdot).ends_with("experts");
  auto in_parent = [&](char const* fused) {
    return parent.empty() ? std::string(fused) : std::string(parent) + "." + fused;
  };
  if (leaf == "w1" || leaf == "w3" || (expert && (leaf == "gate_proj" || leaf == "up_proj"))) {
    return in_parent("w13");
  }
  if (leaf == "q_a_proj" || leaf == "kv_a_proj_with_mqa") {
    return in_parent("fused_qkv_a_proj");
  }
  return {};
}

std::uint64_t numel_of(std::vector<std::int64_t> const& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) {
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

namespace {

/// The header text of `s` with its tensors' offsets assigned (see `open_shards`).
std::string lay_out(shard_plan& s) {
  std::vector<std::size_t> order(s.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return qtl::io::dtype_size(s.tensors[a].type) > qtl::io::dtype_size(s.tensors[b].type);
  });
  ojson header = ojson::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t off = 0;
  for (std::size_t i : order) {
    auto& t = s.tensors[i];
    t.bytes = numel_of(t.shape) * qtl::io::dtype_size(t.type);
    header[t.name] = {{"dtype", std::string(qtl::io::dtype_name(t.type))},
                      {"shape", t.shape},
                      {"data_offsets", {off, off + t.bytes}}};
    t.offset = off;
    off += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  s.header_bytes = 8 + text.size();
  for (auto& t : s.tensors) {
    t.offset += s.header_bytes;
  }
  s.total = s.header_bytes + off;
  return text;
}

/// Refuses two output tensors of one name, in one shard or in two (the header of one would hold
/// the name once, leaving a gap in its data; the index could point at one file only).
void refuse_duplicate_names(std::vector<shard_plan> const& shards) {
  std::unordered_map<std::string_view, out_tensor const*> seen;
  for (shard_plan const& s : shards) {
    for (out_tensor const& t : s.tensors) {
      auto const [it, fresh] = seen.emplace(t.name, &t);
      if (!fresh) {
        using qtl::io::printable;
        throw data_error("two output tensors are named '" + printable(t.name) + "': one written for input tensor '" +
                         printable(it->second->source) + "', one for input tensor '" + printable(t.source) +
                         "' (an input tensor has the name of another's output; rename or remove it)");
      }
    }
  }
}

void open_shard(staged_output& out, shard_plan& s) {
  std::string const header = lay_out(s);
  s.file = std::make_unique<output_file>(out, s.name);
  if (::ftruncate(s.file->fd(), static_cast<off_t>(s.total)) != 0) {
    throw data_error(s.file->shown() + ": cannot size the file: " + std::strerror(errno));
  }
  unsigned char len[8];  // the header's length, little-endian
  std::uint64_t const hn = header.size();
  for (int b = 0; b < 8; ++b) {
    len[b] = static_cast<unsigned char>(hn >> (8 * b));
  }
  s.file->pwrite_all(len, 8, 0);
  s.file->pwrite_all(header.data(), header.size(), 8);
}

}  // namespace

bool sharded_output(qtl::io::safetensors_checkpoint const& ckpt, fs::path const& in_path) {
  return ckpt.shards().size() > 1 || (in_path.string().size() > 5 && in_path.extension() == ".json") ||
         (fs::is_directory(in_path) && fs::exists(in_path / "model.safetensors.index.json"));
}

std::vector<shard_plan> plan_shards(qtl::io::safetensors_checkpoint const& ckpt, bool sharded) {
  std::vector<shard_plan> shards(ckpt.shards().size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    shards[i].name = sharded ? ckpt.shards()[i].path().filename().string() : std::string("model.safetensors");
  }
  return shards;
}

void open_shards(staged_output& out, std::vector<shard_plan>& shards) {
  refuse_duplicate_names(shards);
  for (shard_plan& s : shards) {
    if (!s.tensors.empty()) {
      open_shard(out, s);
    }
  }
}

void refuse_quantized_input(qtl::io::safetensors_checkpoint const& ckpt, ojson const& model_config,
                            fs::path const& config_path) {
  std::vector<tensor_info const*> all;
  all.reserve(ckpt.tensors().size());
  std::vector<std::string> found;
  for (auto const& e : ckpt.tensors()) {
    all.push_back(e.tensor);
  }
  for (auto const& m : recognize(all)) {
    for (auto const& t : m.tensors) {
      found.push_back(t + " (" + m.scheme + ")");
    }
  }
  if (found.empty()) {
    for (auto const* t : all) {
      if (t->type == dtype::F8_E4M3 || t->type == dtype::F8_E5M2 || t->type == dtype::F8_E8M0) {
        found.push_back(t->name + " (" + std::string(qtl::io::dtype_name(t->type)) + ")");
      }
    }
  }
  if (!found.empty()) {
    std::string list;
    for (std::size_t i = 0; i < found.size() && i < 4; ++i) {
      list += (i == 0 ? "" : ", ") + qtl::io::printable(found[i]);
    }
    if (found.size() > 4) {
      list += " and " + std::to_string(found.size() - 4) + " more";
    }
    throw data_error("the input is quantized already: " + list +
                     "; qtl quantize takes a float (F32, F16, BF16) checkpoint");
  }
  if (model_config.is_object() && model_config.contains("quantization_config")) {
    auto const& q = model_config["quantization_config"];
    std::string const method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>()
                                   : std::string("unknown");
    throw data_error(config_path.string() + ": the input is quantized already (its quantization_config says '" +
                     qtl::io::printable(method) + "'); qtl quantize takes a float checkpoint");
  }
}

void release(std::span<std::byte const> bytes) {
  auto const page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto b = reinterpret_cast<std::uintptr_t>(bytes.data());
  auto e = b + bytes.size();
  b = (b + page - 1) / page * page;
  e = e / page * page;
  if (e > b) {
    ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }
}

void copy_released(std::span<std::byte const> bytes, output_file& file, std::uint64_t offset) {
  std::size_t const slice = std::size_t{64} << 20;
  for (std::size_t off = 0; off < bytes.size(); off += slice) {
    std::size_t const len = std::min(slice, bytes.size() - off);
    file.pwrite_all(bytes.data() + off, len, offset + off);
    release(bytes.subspan(off, len));
  }
}

std::string human_bytes(std::uint64_t b) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(b >= (1u << 30) ? 2 : 1);
  if (b >= (std::uint64_t{1} << 30)) {
    o << static_cast<double>(b) / (1u << 30) << " GiB";
  } else if (b >= (1u << 20)) {
    o << static_cast<double>(b) / (1u << 20) << " MiB";
  } else if (b >= 1024) {
    o << static_cast<double>(b) / 1024 << " KiB";
  } else {
    o << b << " B";
  }
  return o.str();
}

}  // namespace qtl::tool
