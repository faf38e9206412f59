#pragma once
// The phases of a checkpoint job, shared by `qtl quantize` and `qtl convert` (internal to the
// commands library). Each command keeps only what is its own: its planning rules (which input
// tensors become which output tensors), the writers its workers run and the config it writes.
//
//   input     checkpoint_job(...)   stale outputs removed, the checkpoint opened, OUT_DIR refused when
//                                   it is the input's folder, the folder's config.json read, one
//                                   empty output shard per input shard
//   plan      the command           fills `shards[i].tensors` and makes its jobs
//   outputs   open_outputs(force)   the staged folder; every shard file created with its header
//   workers   run_workers(...)      the input's mappings guarded, the jobs run by the worker pool
//   configs   write_json(...)       config.json and the command's other small files
//   commit    commit()              the index, the input folder's side files, every shard flushed,
//                                   the folder swapped in (staged_output.hpp)

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint.hpp"
#include "quantize_plan.hpp"
#include "worker_pool.hpp"

namespace qtl::tool {

/// Where a job's notes go: lines for the user that are not errors, each ending in a newline
/// (never called with an empty text).
using note_fn = std::function<void(std::string const& line)>;

/// The phases of one quantize or convert run, in the order the members are called.
class checkpoint_job {
 public:
  /// Input phase: removes what killed runs left beside `out_dir` (noted), opens the checkpoint
  /// `in` (a .safetensors file, an index or a folder), reads its folder's config.json when there
  /// is one, and plans one output shard per input shard (`plan_shards`). `command` ("quantize",
  /// "convert") names the run in messages and the output marker; progress goes to `sink` (may be
  /// null), notes to `note`. @throws usage_error when `out_dir` is the input's folder;
  /// data_error, qtl::error for an input that cannot be read or a config.json that is not an object
  checkpoint_job(std::string command, std::filesystem::path in, std::filesystem::path out_dir, progress_sink* sink,
                 note_fn note);

  /// Output phase: creates the staged output folder (`force`: replace a folder of other files
  /// too) and every planned shard file with its header (`open_shards`).
  void open_outputs(bool force);

  /// Workers phase: guards the input's mappings (a file truncated meanwhile fails cleanly), runs
  /// `first_pass` when given, then `jobs` on `threads` threads (0: one per core), progress to the
  /// sink and a warning note when fewer threads start; the caller fills `run`, `bytes` and
  /// `describe`. Returns the threads that ran. @throws data_error with the first job's error
  unsigned run_workers(int threads, worker_pool_jobs jobs, std::function<void()> const& first_pass = {});

  /// Configs phase: `doc` written to the staged output as `name`, indented by 2, newline-ended.
  void write_json(std::string const& name, nlohmann::ordered_json const& doc);

  /// Commit phase: the index (a sharded output), the input folder's side files
  /// (`copy_input_extras`, skipped ones noted), every shard file flushed, the staged folder
  /// swapped in (noted).
  void commit();

  /// The bytes of the output's shard files.
  std::uint64_t bytes_out() const;

 private:
  // declared first: the input phase (the initializer of `ckpt`) notes what it cleaned
  std::string command_;
  note_fn note_;
  progress_sink* sink_;

 public:
  std::filesystem::path const in_path;  ///< the input as given
  std::filesystem::path const out_dir;  ///< OUT_DIR
  qtl::io::safetensors_checkpoint const ckpt;
  std::filesystem::path in_config;      ///< the input folder's config.json (whether or not it exists)
  bool has_config = false;              ///< `in_config` exists
  nlohmann::ordered_json model_config;  ///< its document (an object), else an empty object
  bool sharded = false;                 ///< the output is written as shards with an index (`sharded_output`)
  std::vector<shard_plan> shards;       ///< the output shards; the plan adds their tensors

 private:
  std::optional<staged_output> staged_;

  void say(std::string const& text) const;  ///< `note_(text)` unless it is empty
};

/// The command line's progress sink: notes to standard error; a bar of the bytes done when
/// standard error is a terminal.
class terminal_progress final : public progress_sink {
 public:
  terminal_progress();
  void progress(std::uint64_t done, std::uint64_t total) override;
  void note(std::string const& line) override;
  void finished() override;

 private:
  bool tty_;
};

}  // namespace qtl::tool
