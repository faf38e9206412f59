// The phases of a checkpoint job (see checkpoint_job.hpp).

#include "checkpoint_job.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <system_error>

#include "../config_tools.hpp"
#include "errors.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

/// The checkpoint `in`, opened after removing what killed runs left beside `out_dir` (so that a
/// bad input cannot keep it), under the SIGBUS guard of a file that shrinks while it is parsed.
qtl::io::safetensors_checkpoint open_job_input(fs::path const& in, fs::path const& out_dir, std::string const& command,
                                               note_fn const& note) {
  std::string const cleaned = clean_stale_outputs(out_dir, command);
  if (!cleaned.empty()) {
    note(cleaned);
  }
  guard_opening_inputs();
  return qtl::io::safetensors_checkpoint::open(in);
}

}  // namespace

checkpoint_job::checkpoint_job(std::string command, fs::path in, fs::path out, progress_sink* sink, note_fn note)
    : command_(std::move(command)),
      note_(std::move(note)),
      sink_(sink),
      in_path(std::move(in)),
      out_dir(std::move(out)),
      ckpt(open_job_input(in_path, out_dir, command_, note_)) {
  fs::path const in_dir = fs::is_directory(in_path) ? in_path : in_path.parent_path();
  std::error_code ec;
  if (fs::equivalent(in_dir.empty() ? fs::path(".") : in_dir, out_dir, ec)) {
    throw usage_error("OUT_DIR must differ from the input's folder (the input is read while the output is written)");
  }
  model_config = ojson::object();
  in_config = in_dir / "config.json";
  has_config = fs::exists(fs::symlink_status(in_config, ec));
  if (has_config) {
    model_config = read_json_document(in_config, "the input's config");
    if (!model_config.is_object()) {
      throw data_error(in_config.string() + ": the model config is a JSON " + model_config.type_name() +
                       ", not an object");
    }
  }
  sharded = sharded_output(ckpt, in_path);
  shards = plan_shards(ckpt, sharded);
}

void checkpoint_job::open_outputs(bool force) {
  staged_.emplace(out_dir, output_request{command_, checkpoint_inputs(in_path, ckpt), force});
  open_shards(*staged_, shards);
}

unsigned checkpoint_job::run_workers(int threads, worker_pool_jobs jobs, std::function<void()> const& first_pass) {
  if (sink_ != nullptr) {
    jobs.progress = [this](std::uint64_t done, std::uint64_t total) { sink_->progress(done, total); };
  }
  jobs.fewer_threads = [this](unsigned started, unsigned asked, std::string const& why) {
    say("qtl " + command_ + ": warning: could start only " + std::to_string(started) + " of " + std::to_string(asked) +
        " threads (" + why + "); going on with " + std::to_string(started) + "\n");
  };
  guard_checkpoint_mappings(ckpt);
  test_stop_point("reading");
  if (first_pass) {
    first_pass();
  }
  worker_pool_result const pool = run_worker_pool(static_cast<unsigned>(threads), jobs);
  if (sink_ != nullptr) {
    sink_->finished();
  }
  if (pool.failed) {
    throw data_error(pool.first_error);
  }
  return pool.threads;
}

void checkpoint_job::write_json(std::string const& name, ojson const& doc) {
  small_file(*staged_, name, doc.dump(2) + "\n");
}

void checkpoint_job::commit() {
  if (sharded) {
    write_shard_index(*staged_, shards);
  }
  for (auto const& s : shards) {  // every shard's writeback under way before the first fsync
    if (s.file) {
      s.file->start_writeback();
    }
  }
  // The input folder's side files (tokenizer, generation_config.json, ...), copied; what a
  // checkpoint does not need is skipped with a warning. Each is read to its end or the run fails
  // naming it (never a short copy).
  say(copy_input_extras(in_path, *staged_, command_));
  for (auto& s : shards) {
    if (s.file) {
      s.file->flush();
    }
  }
  say(staged_->commit());
}

void checkpoint_job::say(std::string const& text) const {
  if (!text.empty()) {
    note_(text);
  }
}

std::uint64_t checkpoint_job::bytes_out() const {
  std::uint64_t total = 0;
  for (auto const& s : shards) {
    total += s.total;  // 0 for a shard without tensors (no file)
  }
  return total;
}

terminal_progress::terminal_progress() : tty_(::isatty(2) != 0) {}

void terminal_progress::progress(std::uint64_t done, std::uint64_t total) {
  if (!tty_) {
    return;
  }
  int const width = 40;
  int const fill = total == 0 ? width : static_cast<int>(width * done / total);
  std::fprintf(stderr, "\r[%s%s] %3d%% %s", std::string(static_cast<std::size_t>(fill), '#').c_str(),
               std::string(static_cast<std::size_t>(width - fill), ' ').c_str(),
               total == 0 ? 100 : static_cast<int>(100 * done / total), human_bytes(done).c_str());
  std::fflush(stderr);
}

void terminal_progress::note(std::string const& line) { std::cerr << line << std::flush; }

void terminal_progress::finished() {
  if (tty_) {
    std::fprintf(stderr, "\n");
  }
}

}  // namespace qtl::tool
