#pragma once
// The output folder of `qtl quantize` and `qtl convert`, committed all or nothing.
//
//   PARENT/OUT                  the target: at every instant the complete old checkpoint or the
//                               complete new one (or, on the fallback path, briefly absent)
//   PARENT/.OUT.qtl-new-PID     the staging folder this run writes, files under their final names
//   PARENT/.OUT.qtl-old-PID     the old checkpoint after the swap, removed at once
// A name OUT too long for these (NAME_MAX, 255 bytes, with a PID of 10 digits) is cut and followed
// by a hash of the whole name: ".OUT-PREFIX~HASH16.qtl-new-PID".
//
// Commit: the marker `.qtl-output` written, every file flushed (fsync), the staging folder
// flushed, then renameat2(staging, OUT, RENAME_EXCHANGE) swaps the two folders in one step, the
// parent is flushed and the old folder (now under the staging name's sibling) removed. Files of
// the old output that the new one lacks go with it. Where the kernel or filesystem has no
// RENAME_EXCHANGE (EINVAL, ENOSYS: e.g. some network filesystems), two renames: OUT ->
// .OUT.qtl-old-PID, staging -> OUT; between them OUT does not exist (never mixed), and a run
// killed there leaves the old folder under its hidden name, which the next run into OUT puts back.
//
// What may be replaced: a folder that is empty, holds the marker of an earlier output, or holds
// nothing but a checkpoint's files (`is_checkpoint_file`); anything else is refused, naming what
// is in the way, unless --force. A folder holding a file the run reads (resolved: a symlinked
// shard pointing into OUT counts) is refused always.
//
// Lock: flock(LOCK_EX | LOCK_NB) on OUT itself (created empty when missing); a second run into
// the same folder is refused at once, naming the folder. Crashes: SIGINT, SIGTERM and SIGHUP
// remove the staging folder (its files are registered for an async-signal-safe handler) and OUT
// when this run created it; what a SIGKILL leaves (hidden folders of processes that no longer
// exist) the next run into any folder of the same parent removes first.
//
// Test hook: QTL_TEST_STOP_AT=STEP[:TERM] raises SIGKILL (or SIGTERM) at a commit step:
//   staged   every file complete in the staging folder, nothing swapped
//   aside    fallback path only: OUT moved aside, the new folder not yet in place
//   swapped  the new output in place, the old one not yet removed
//   reading  the input mapped and planned, the workers not started (with :STOP, for truncation
//            or a signal sent meanwhile); inspect, explain and lint: the checkpoint open and its
//            mappings guarded
// QTL_TEST_NO_EXCHANGE=1 takes the fallback path; QTL_TEST_FAIL_AT=swap makes the swap fail
// (EACCES) as a rename into a folder this user may not change does.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace qtl::io {
class safetensors_checkpoint;
}  // namespace qtl::io

namespace qtl::tool {

/// Raises the signal QTL_TEST_STOP_AT names when it names `step` (a no-op otherwise);
/// `STEP:STOP` stops the process (SIGSTOP) so that a test can change its input meanwhile.
void test_stop_point(char const* step);

/// Makes a SIGBUS (an input file truncated while its mapping is read) a clean failure: the
/// handler names the file whose mapping `si_addr` falls in (the newest guarded one), removes
/// the staging folder as the other handlers do and exits with code 2. Guards every shard of
/// `ckpt`, added to the files already guarded (`qtl quantize`, `inspect`, `explain` and `lint`
/// call it once a checkpoint is open).
void guard_checkpoint_mappings(qtl::io::safetensors_checkpoint const& ckpt);

/// Installs the SIGBUS handler before a checkpoint is opened (a file that shrinks while its
/// header is parsed: the message says "an input file", its mapping is not known yet).
void guard_opening_inputs();

/// The file qtl writes into every folder it commits (and `qtl demo` into its --out folder): a
/// JSON object {"tool": "qtl", "command": ..., "version": ..., "content": "checkpoint" | "demo"}.
/// A folder holding it, with the content expected, is qtl's own to replace or rewrite.
inline constexpr char const* output_marker = ".qtl-output";

/// The marker's text for an output of `qtl COMMAND` that holds `content` ("checkpoint", "demo").
std::string output_marker_text(std::string_view command, std::string_view content);

/// Whether a file named `name` belongs to a checkpoint folder, so that a folder of nothing else
/// may be replaced by a new checkpoint: `*.safetensors`, `*.safetensors.index.json`, the model,
/// generation and quantization configs (config.json, generation_config.json,
/// quantize_config.json, hf_quant_config.json, recipe.yaml) and the tokenizer's and processor's
/// files (tokenizer.json, tokenizer_config.json, tokenizer.model, special_tokens_map.json,
/// added_tokens.json, vocab.json, vocab.txt, merges.txt, chat_template.jinja,
/// chat_template.json, preprocessor_config.json, processor_config.json). Nothing else: no
/// README.md, no folders.
bool is_checkpoint_file(std::string_view name);

/// What in the folder `dir` stands in the way of qtl rewriting it: empty when `dir` is empty,
/// holds `output_marker` with this `content`, or (`content` "checkpoint") holds nothing but
/// checkpoint files; else the first few other entries, sorted ("docs/, notes.txt and 2 more").
/// @throws data_error when `dir` cannot be listed
std::string foreign_entries(std::filesystem::path const& dir, std::string_view content);

/// Every file a run reads to quantize or convert the checkpoint opened from `in_path`: `in_path`
/// itself, the index, the shards and, for a folder, its other files (the side files copied).
std::vector<std::filesystem::path> checkpoint_inputs(std::filesystem::path const& in_path,
                                                     qtl::io::safetensors_checkpoint const& ckpt);

/// Removes what runs killed by SIGKILL left beside `target` and beside every other folder of its
/// parent: hidden staging and old folders of processes that no longer exist, only folders whose
/// names follow the pattern above. A moved-aside old output is put back when it is `target`'s and
/// `target` is missing; another folder's is left while that folder is missing (the only copy),
/// and removed once it exists. Returns a line per thing done, "qtl COMMAND: ..." (empty: nothing).
std::string clean_stale_outputs(std::filesystem::path const& target, std::string_view command);

/// What a run that writes a staged output asks of it.
struct output_request {
  std::string command;                        ///< "quantize", "convert": in messages and the marker
  std::vector<std::filesystem::path> inputs;  ///< the files the run reads (`checkpoint_inputs`)
  bool force = false;                         ///< --force: replace a folder of other files too
};

/// The locked target and its staging folder; removes the staging folder unless committed.
class staged_output {
 public:
  /// Creates `target` when missing, locks it, checks that it is a folder a new checkpoint may
  /// replace (`foreign_entries` finds nothing, or `request.force`) and that no input file lies
  /// inside it (paths resolved), creates the staging folder. @throws data_error naming the folder
  /// and the problem (another run holds the lock, not a folder, holds other files or an input,
  /// cannot create); a folder this run created is removed again.
  staged_output(std::filesystem::path const& target, output_request const& request);
  staged_output(staged_output const&) = delete;
  staged_output& operator=(staged_output const&) = delete;
  ~staged_output();

  /// The staging folder: write every output file here, under its final name.
  std::filesystem::path const& dir() const { return staging_; }
  /// The target folder (absolute).
  std::filesystem::path const& target() const { return target_; }

  /// Registers a file in the staging folder for the signal handler to remove.
  void track(std::filesystem::path const& file);

  /// Writes the marker, flushes the staging folder and swaps it in for the target; removes the
  /// old output.
  /// Returns a warning when the old output could not be removed (the new one is in place).
  /// @throws data_error when the swap fails (the target is then untouched).
  std::string commit();

 private:
  /// Undoes the constructor's work (the staging folder, a target this run created, the lock).
  void abandon();

  std::string command_;
  std::filesystem::path target_;
  std::filesystem::path staging_;
  int lock_fd_ = -1;
  bool created_target_ = false;
  bool committed_ = false;
};

/// A file of the staged output, created (never replacing one) under its final name in the
/// staging folder and registered for removal on a signal.
class output_file {
 public:
  /// @throws data_error naming the file
  output_file(staged_output& out, std::string const& name);
  output_file(output_file const&) = delete;
  output_file& operator=(output_file const&) = delete;
  ~output_file();
  int fd() const { return fd_; }
  /// "OUT/NAME", the path it will have, for messages.
  std::string const& shown() const { return shown_; }
  /// Writes `size` bytes at `offset`, retrying short writes; a write of `writeback_chunk` bytes or
  /// more also starts its range's writeback (as `start_writeback`), so that on a disk the final
  /// `flush` finds most of the file written. @throws data_error
  void pwrite_all(void const* data, std::size_t size, std::uint64_t offset) const;
  static constexpr std::size_t writeback_chunk = std::size_t{1} << 20;
  /// Asks the kernel to start writing the file's dirty pages back, without waiting (Linux's
  /// `sync_file_range`; elsewhere nothing): starting every file's writeback before the first
  /// `flush` keeps the disk's queue full instead of flushing one file after another. Errors are
  /// left for `flush` to report.
  void start_writeback() const;
  /// Flushes to disk (fsync) and closes. @throws data_error
  void flush();

 private:
  std::filesystem::path path_;
  std::string shown_;
  int fd_ = -1;
};

}  // namespace qtl::tool
