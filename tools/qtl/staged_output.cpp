// The all-or-nothing output folder of qtl quantize and convert (see staged_output.hpp).

#include "staged_output.hpp"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include <qtl/io/safetensors.hpp>

#include "common.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// ------------------------------------------------------------------------------------------------
// What a signal handler removes: the registered files, then the staging folder, then the target
// when this run created it and it is still empty (fixed arrays of C strings, each written before
// the count or pointer that publishes it).

constexpr int max_tracked = 4096;
char* tracked[max_tracked];
std::atomic<int> tracked_count{0};
std::atomic<char*> staging_path{nullptr};
std::atomic<char*> created_target_path{nullptr};

/// Async-signal-safe: what a run killed by a signal must not leave behind.
void remove_staged() {
  int const n = tracked_count.load();
  for (int i = 0; i < n; ++i) {
    if (tracked[i] != nullptr) {
      ::unlink(tracked[i]);
    }
  }
  if (char const* s = staging_path.load(); s != nullptr) {
    ::rmdir(s);
  }
  if (char const* t = created_target_path.load(); t != nullptr) {
    ::rmdir(t);  // only when empty
  }
}

extern "C" void remove_staging_and_die(int sig) {
  remove_staged();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void forget_tracked() {
  int const n = tracked_count.exchange(0);
  for (int i = 0; i < n; ++i) {
    char* p = tracked[i];
    tracked[i] = nullptr;
    std::free(p);
  }
  std::free(staging_path.exchange(nullptr));
  std::free(created_target_path.exchange(nullptr));
}

bool process_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

/// The most digits of a PID in a hidden name (pid_t is 32 bits).
constexpr std::size_t max_pid_digits = 10;

/// A hidden folder of a run: ".OUT.qtl-KIND-PID" (see staged_output.hpp).
struct hidden_folder {
  std::string prefix;  ///< ".OUT.qtl-KIND-", as `hidden` makes it
  bool old = false;    ///< KIND "old" (an old output moved aside), else "new" (staging)
  long pid = 0;
};

/// `name` read as a hidden folder's name, or nothing when it does not follow the pattern.
std::optional<hidden_folder> parse_hidden(std::string const& name) {
  std::size_t const at = name.rfind(".qtl-");
  if (name.empty() || name[0] != '.' || at == std::string::npos || at < 2) {
    return std::nullopt;
  }
  std::string_view const rest = std::string_view(name).substr(at + 5);
  std::string_view const digits = rest.size() > 4 ? rest.substr(4) : std::string_view();
  if ((rest.substr(0, 4) != "new-" && rest.substr(0, 4) != "old-") || digits.empty() ||
      digits.size() > max_pid_digits || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return hidden_folder{name.substr(0, at + 9), rest[0] == 'o', std::strtol(std::string(digits).c_str(), nullptr, 10)};
}

void fsync_dir(fs::path const& dir) {
  int const fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Whether `file` is a marker of an earlier qtl output holding `content`.
bool is_marker_of(fs::path const& file, std::string_view content) {
  std::string why;
  struct stat st {};
  int const fd = qtl::io::open_regular_file(file, st, why);
  if (fd < 0) {
    return false;
  }
  std::string text(4096, '\0');
  ssize_t const n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (n <= 0) {
    return false;
  }
  text.resize(static_cast<std::size_t>(n));
  auto const doc = qtl::io::json::parse(text, nullptr, false);
  return doc.is_object() && doc.value("tool", "") == "qtl" && doc.value("content", "") == content;
}

/// Whether `inner` (resolved) is `outer` (resolved) or lies inside it.
bool inside(fs::path const& inner, fs::path const& outer) {
  fs::path const rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}

fs::path absolute_target(fs::path const& target) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(target), ec);
  if (ec) {
    p = fs::absolute(target).lexically_normal();
  }
  if (!p.has_filename()) {
    p = p.parent_path();
  }
  return p;
}

/// ".OUT.qtl-KIND-": the hidden name's prefix (the PID follows), cut to fit NAME_MAX.
std::string hidden(fs::path const& target, char const* kind) {
  std::string name = target.filename().string();
  std::string const tail = std::string(".qtl-") + kind + "-";
  if (1 + name.size() + tail.size() + max_pid_digits > NAME_MAX) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a of the whole name
    for (char c : name) {
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    char hash[18];
    std::snprintf(hash, sizeof hash, "~%016llx", static_cast<unsigned long long>(h));
    std::size_t cut = NAME_MAX - 1 - 17 - tail.size() - max_pid_digits;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) {
      --cut;  // not inside a UTF-8 sequence
    }
    name = name.substr(0, cut) + hash;
  }
  return "." + name + tail;
}

}  // namespace

void test_stop_point(char const* step) {
  char const* want = std::getenv("QTL_TEST_STOP_AT");
  if (want == nullptr) {
    return;
  }
  std::string_view w(want);
  int sig = SIGKILL;
  for (auto const& [suffix, s] : {std::pair{std::string_view(":TERM"), SIGTERM}, std::pair{std::string_view(":STOP"), SIGSTOP}}) {
    if (w.size() > suffix.size() && w.substr(w.size() - suffix.size()) == suffix) {
      w.remove_suffix(suffix.size());
      sig = s;
    }
  }
  if (w == step) {
    std::raise(sig);
  }
}

namespace {

constexpr int max_guarded = 4096;
struct guarded_range {
  std::uintptr_t begin;
  std::uintptr_t end;
  char const* path;
};
guarded_range guarded[max_guarded];
int guarded_count = 0;

void write_str(char const* s) {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t const w = ::write(2, s, n);
    if (w <= 0) {
      return;
    }
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

extern "C" void input_bus_error(int, siginfo_t* info, void*) {
  auto const addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  char const* path = nullptr;
  for (int i = 0; i < guarded_count; ++i) {
    if (addr >= guarded[i].begin && addr < guarded[i].end) {
      path = guarded[i].path;
    }
  }
  write_str("qtl: error: ");
  write_str(path != nullptr ? path : "an input file");
  write_str(": the file shrank while it was read (truncated or replaced during the run); nothing was written\n");
  remove_staged();
  ::_exit(2);
}

}  // namespace

namespace {
void install_bus_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = input_bus_error;
  sa.sa_flags = SA_SIGINFO;
  ::sigaction(SIGBUS, &sa, nullptr);
}

struct mapped_input {
  void const* begin;
  std::size_t size;
  std::string path;
};

void add_guarded(std::vector<mapped_input> const& files) {
  for (auto const& f : files) {
    if (guarded_count == max_guarded) {
      break;
    }
    auto const b = reinterpret_cast<std::uintptr_t>(f.begin);
    guarded[guarded_count] = {b, b + f.size, ::strdup(f.path.c_str())};
    ++guarded_count;  // published after the entry is complete (the handler reads [0, count))
  }
}
}  // namespace

void guard_opening_inputs() { install_bus_handler(); }

void guard_checkpoint_mappings(qtl::io::safetensors_checkpoint const& ckpt) {
  install_bus_handler();
  std::vector<mapped_input> files;
  for (auto const& f : ckpt.shards()) {
    files.push_back({f.file_bytes().data(), f.file_bytes().size(), f.path().string()});
  }
  add_guarded(files);
}

std::string output_marker_text(std::string_view command, std::string_view content) {
  ojson const doc = {{"tool", "qtl"}, {"command", command}, {"version", QTL_VERSION}, {"content", content}};
  return doc.dump() + "\n";
}

bool is_checkpoint_file(std::string_view name) {
  static std::set<std::string_view, std::less<>> const side_files = {
      "config.json", "generation_config.json", "quantize_config.json", "hf_quant_config.json", "recipe.yaml",
      "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json", "added_tokens.json",
      "vocab.json", "vocab.txt", "merges.txt", "chat_template.jinja", "chat_template.json",
      "preprocessor_config.json", "processor_config.json"};
  return side_files.count(name) != 0 || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json");
}

std::string foreign_entries(fs::path const& dir, std::string_view content) {
  std::vector<std::string> foreign;
  bool marked = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string const name = it->path().filename().string();
    std::error_code ec2;
    bool const folder = fs::is_directory(it->symlink_status(ec2));
    if (!folder && name == output_marker && is_marker_of(it->path(), content)) {
      marked = true;
    } else if (folder || content != "checkpoint" || !is_checkpoint_file(name)) {
      foreign.push_back(name + (folder ? "/" : ""));
    }
  }
  if (ec) {
    throw data_error(dir.string() + ": cannot list the output folder: " + ec.message());
  }
  if (marked || foreign.empty()) {
    return {};
  }
  std::sort(foreign.begin(), foreign.end());
  constexpr std::size_t shown = 3;
  std::string out;
  for (std::size_t i = 0; i < foreign.size() && i < shown; ++i) {
    out += (i == 0 ? "" : ", ") + foreign[i];
  }
  if (foreign.size() > shown) {
    out += " and " + std::to_string(foreign.size() - shown) + " more";
  }
  return out;
}

std::vector<fs::path> checkpoint_inputs(fs::path const& in_path, qtl::io::safetensors_checkpoint const& ckpt) {
  std::vector<fs::path> files = {in_path};
  std::error_code ec;
  fs::path const in_dir = fs::is_directory(in_path, ec) ? in_path : in_path.parent_path();
  files.push_back((in_dir.empty() ? fs::path(".") : in_dir) / "config.json");
  if (fs::is_directory(in_path, ec)) {
    files.push_back(in_path / "model.safetensors.index.json");
    for (fs::directory_iterator it(in_path, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code ec2;
      if (!fs::is_directory(it->status(ec2))) {  // the side files copied (folders are not)
        files.push_back(it->path());
      }
    }
  }
  for (auto const& f : ckpt.shards()) {
    files.push_back(f.path());
  }
  return files;
}

std::string clean_stale_outputs(fs::path const& target_in, std::string_view command) {
  fs::path const target = absolute_target(target_in);
  fs::path const parent = target.parent_path();
  std::string const own_old = hidden(target, "old");
  std::string const say = "qtl " + std::string(command) + ": ";
  std::string report;
  std::error_code ec;
  std::vector<fs::path> stale_new, stale_old;
  std::set<std::string> present_old;  // the old-folder prefixes of the folders that exist
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    std::string const name = it->path().filename().string();
    std::error_code ec2;
    auto const h = parse_hidden(name);
    if (!h) {
      present_old.insert(hidden(it->path(), "old"));
    } else if (fs::is_directory(it->symlink_status(ec2)) && process_gone(h->pid)) {
      (h->old ? stale_old : stale_new).push_back(it->path());
    }
  }
  for (auto const& p : stale_new) {
    if (fs::remove_all(p, ec) != static_cast<std::uintmax_t>(-1) && !ec) {
      report += say + "removed " + p.string() + ", the unfinished output of a killed run\n";
    }
  }
  for (auto const& p : stale_old) {
    // A run killed between the fallback's two renames: the old output is complete; put it back.
    std::string const prefix = parse_hidden(p.filename().string())->prefix;
    if (prefix == own_old && !fs::exists(fs::symlink_status(target, ec)) && ::rename(p.c_str(), target.c_str()) == 0) {
      report += say + "put back " + target.string() + " (moved aside by a killed run)\n";
    } else if (prefix != own_old && present_old.count(prefix) == 0) {
      continue;  // another folder's only copy: a run into that folder puts it back
    } else if (fs::remove_all(p, ec) != static_cast<std::uintmax_t>(-1) && !ec) {
      report += say + "removed " + p.string() + ", an old output a killed run replaced\n";
    }
  }
  return report;
}

staged_output::staged_output(fs::path const& target_in, output_request const& request)
    : command_(request.command), target_(absolute_target(target_in)) {
  fs::path const parent = target_.parent_path();
  std::string const say = "qtl " + command_;
  struct sigaction sa {};
  sa.sa_handler = remove_staging_and_die;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    ::sigaction(sig, &sa, nullptr);
  }
  std::error_code ec;
  auto const st = fs::symlink_status(target_, ec);
  if (!fs::exists(st)) {
    if (::mkdir(target_.c_str(), 0755) == 0) {
      created_target_ = true;
      created_target_path.store(::strdup(target_.c_str()));
    } else if (errno != EEXIST) {
      throw data_error(target_.string() + ": cannot create the output folder: " + std::strerror(errno));
    }
  } else if (!fs::is_directory(st)) {
    throw data_error(target_.string() + ": the output exists and is not a folder");
  }
  try {
    lock_fd_ = ::open(target_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (lock_fd_ < 0) {
      throw data_error(target_.string() + ": cannot open the output folder: " + std::strerror(errno));
    }
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      int const err = errno;
      if (err == EWOULDBLOCK) {
        throw data_error(target_.string() +
                         ": another qtl run is writing this folder (it holds the folder's lock); "
                         "wait for it or choose another folder");
      }
      throw data_error(target_.string() + ": cannot lock the output folder: " + std::strerror(err));
    }
    for (auto const& f : request.inputs) {
      fs::path const real = fs::canonical(f, ec);
      if (!ec && inside(real, target_)) {
        throw data_error(target_.string() + ": the output folder holds the input " + real.string() +
                         (real == fs::absolute(f).lexically_normal() ? "" : " (as " + f.string() + ")") +
                         ", and " + say + " replaces the whole folder: choose another output folder");
      }
    }
    if (std::string const foreign = request.force ? std::string() : foreign_entries(target_, "checkpoint");
        !foreign.empty()) {
      throw data_error(target_.string() + ": the output folder holds " + foreign + " (not a checkpoint's files) and no " +
                       output_marker + " marker of an earlier qtl output; " + say +
                       " replaces the whole folder: choose a new or empty folder, or give --force to replace it");
    }
    staging_ = parent / (hidden(target_, "new") + std::to_string(::getpid()));
    if (::mkdir(staging_.c_str(), 0755) != 0) {
      int const err = errno;
      fs::path const failed = staging_;
      staging_.clear();
      throw data_error(failed.string() + ": cannot create the staging folder beside the output: " +
                       std::strerror(err));
    }
    staging_path.store(::strdup(staging_.c_str()));
  } catch (...) {
    abandon();
    throw;
  }
}

void staged_output::abandon() {
  forget_tracked();
  std::error_code ec;
  if (!staging_.empty()) {
    fs::remove_all(staging_, ec);
  }
  if (created_target_) {
    ::rmdir(target_.c_str());  // only when still empty
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
}

staged_output::~staged_output() {
  if (!committed_) {
    abandon();
  } else if (lock_fd_ >= 0) {
    ::close(lock_fd_);
  }
}

void staged_output::track(fs::path const& file) {
  int const slot = tracked_count.load();
  if (slot < max_tracked) {
    tracked[slot] = ::strdup(file.c_str());
    tracked_count.store(slot + 1);
  }
}

std::string staged_output::commit() {
  {
    output_file marker(*this, output_marker);
    std::string const text = output_marker_text(command_, "checkpoint");
    marker.pwrite_all(text.data(), text.size(), 0);
    marker.flush();
  }
  fsync_dir(staging_);
  test_stop_point("staged");
  fs::path const old = target_.parent_path() / (hidden(target_, "old") + std::to_string(::getpid()));
  // From here a signal must not remove the staging folder: it may already be the old output.
  sigset_t block, saved;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    sigaddset(&block, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &block, &saved);
  char const* fail = std::getenv("QTL_TEST_FAIL_AT");
  bool const inject = fail != nullptr && std::string_view(fail) == "swap";
  bool const no_exchange = std::getenv("QTL_TEST_NO_EXCHANGE") != nullptr;
  int rc = -1;
  int err = EACCES;
  if (!inject && !no_exchange) {
    rc = ::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE);
    err = errno;
  }
  bool swapped_to_old = false;  // whether the old output now sits at `staging_` (exchange) or `old`
  if (rc == 0) {
    swapped_to_old = true;
  } else if (!inject && (no_exchange || err == EINVAL || err == ENOSYS || err == ENOTSUP)) {
    // No RENAME_EXCHANGE here: move the old folder aside, then the new one in.
    if (::rename(target_.c_str(), old.c_str()) != 0) {
      err = errno;
    } else {
      ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
      test_stop_point("aside");
      ::pthread_sigmask(SIG_BLOCK, &block, nullptr);
      if (::rename(staging_.c_str(), target_.c_str()) == 0) {
        rc = 0;
      } else {
        err = errno;
        ::rename(old.c_str(), target_.c_str());  // put the old output back
      }
    }
  }
  if (rc != 0) {
    ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    throw data_error(target_.string() + ": cannot move the finished output into place: " + std::strerror(err) +
                     " (the folder is unchanged)");
  }
  committed_ = true;
  forget_tracked();
  fsync_dir(target_.parent_path());
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  test_stop_point("swapped");
  fs::path const leftover = swapped_to_old ? staging_ : old;
  std::error_code ec;
  fs::remove_all(leftover, ec);
  if (ec) {
    return "qtl " + command_ + ": warning: the new output is in place, but the old one could not be removed from " +
           leftover.string() + ": " + ec.message() + "\n";
  }
  return {};
}

output_file::output_file(staged_output& out, std::string const& name) : path_(out.dir() / name) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw data_error((out.target() / name).string() + ": cannot create: " + std::strerror(errno));
  }
  out.track(path_);
  shown_ = (out.target() / name).string();
}

output_file::~output_file() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void output_file::pwrite_all(void const* data, std::size_t size, std::uint64_t offset) const {
  auto const* p = static_cast<char const*>(data);
  std::uint64_t const first = offset;
  std::size_t const whole = size;
  while (size > 0) {
    ssize_t const w = ::pwrite(fd_, p, std::min<std::size_t>(size, std::size_t{1} << 30), static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw data_error(shown_ + ": cannot write: " + std::strerror(errno));
    }
    p += w;
    size -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
  if (whole >= writeback_chunk) {  // start this range's writeback now, overlapping the work left
#if defined(__linux__)
    (void)::sync_file_range(fd_, static_cast<off_t>(first), static_cast<off_t>(whole), SYNC_FILE_RANGE_WRITE);
#endif
  }
}

void output_file::start_writeback() const {
#if defined(__linux__)
  (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
}

void output_file::flush() {
  int const rc = ::fsync(fd_);
  int const err = errno;
  int const rc2 = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || rc2 != 0) {
    throw data_error(shown_ + ": cannot flush: " + std::strerror(rc != 0 ? err : errno));
  }
}

}  // namespace qtl::tool
