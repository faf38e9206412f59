// The all-or-nothing output folder of qtl quantize (see staged_output.hpp).

#include "staged_output.hpp"

#include <fcntl.h>
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
#include <string_view>
#include <system_error>

#include <qtl/io/safetensors.hpp>

#include "common.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------------------------------------------
// What a signal handler removes: the registered files, then the staging folder (fixed arrays of C
// strings, each written before the count that publishes it).

constexpr int max_tracked = 4096;
char* tracked[max_tracked];
std::atomic<int> tracked_count{0};
char* staging_path = nullptr;

extern "C" void remove_staging_and_die(int sig) {
  int const n = tracked_count.load();
  for (int i = 0; i < n; ++i) {
    if (tracked[i] != nullptr) {
      ::unlink(tracked[i]);
    }
  }
  if (staging_path != nullptr) {
    ::rmdir(staging_path);
  }
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
  char* s = staging_path;
  staging_path = nullptr;
  std::free(s);
}

bool process_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

/// The PID of a ".OUT.qtl-KIND-PID" name, or 0 when `name` is not one.
long pid_of(std::string const& name, std::string const& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) {
    return 0;
  }
  char* end = nullptr;
  long const pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
  return end != nullptr && *end == '\0' ? pid : 0;
}

void fsync_dir(fs::path const& dir) {
  int const fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Whether a folder's entries look like a checkpoint (what qtl may replace whole).
bool holds_checkpoint_or_nothing(fs::path const& dir) {
  std::error_code ec;
  bool any = false;
  for (auto const& e : fs::directory_iterator(dir, ec)) {
    std::string const name = e.path().filename().string();
    if (name == "config.json" || name == "model.safetensors.index.json" || e.path().extension() == ".safetensors") {
      return true;
    }
    any = true;
  }
  return !any && !ec;
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

std::string hidden(fs::path const& target, char const* kind) {
  return "." + target.filename().string() + ".qtl-" + kind + "-";
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
  int const n = tracked_count.load();
  for (int i = 0; i < n; ++i) {
    if (tracked[i] != nullptr) {
      ::unlink(tracked[i]);
    }
  }
  if (staging_path != nullptr) {
    ::rmdir(staging_path);
  }
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

std::string clean_stale_outputs(fs::path const& target_in) {
  fs::path const target = absolute_target(target_in);
  fs::path const parent = target.parent_path();
  std::string const new_prefix = hidden(target, "new");
  std::string const old_prefix = hidden(target, "old");
  std::string report;
  std::error_code ec;
  std::vector<fs::path> stale_new, stale_old;
  for (auto const& e : fs::directory_iterator(parent, ec)) {
    std::string const name = e.path().filename().string();
    if (long const pid = pid_of(name, new_prefix); process_gone(pid)) {
      stale_new.push_back(e.path());
    } else if (long const opid = pid_of(name, old_prefix); process_gone(opid)) {
      stale_old.push_back(e.path());
    }
  }
  for (auto const& p : stale_new) {
    if (fs::remove_all(p, ec) != static_cast<std::uintmax_t>(-1) && !ec) {
      report += "qtl quantize: removed " + p.string() + ", the unfinished output of a killed run\n";
    }
  }
  for (auto const& p : stale_old) {
    // A run killed between the fallback's two renames: the old output is complete; put it back.
    if (!fs::exists(fs::symlink_status(target, ec)) && ::rename(p.c_str(), target.c_str()) == 0) {
      report += "qtl quantize: put back " + target.string() + " (moved aside by a killed run)\n";
    } else if (fs::remove_all(p, ec) != static_cast<std::uintmax_t>(-1) && !ec) {
      report += "qtl quantize: removed " + p.string() + ", an old output a killed run replaced\n";
    }
  }
  return report;
}

staged_output::staged_output(fs::path const& target_in, fs::path const& input_dir) {
  target_ = absolute_target(target_in);
  fs::path const parent = target_.parent_path();
  std::error_code ec;
  auto const st = fs::symlink_status(target_, ec);
  if (!fs::exists(st)) {
    if (::mkdir(target_.c_str(), 0755) == 0) {
      created_target_ = true;
    } else if (errno != EEXIST) {
      throw data_error(target_.string() + ": cannot create the output folder: " + std::strerror(errno));
    }
  } else if (!fs::is_directory(st)) {
    throw data_error(target_.string() + ": the output exists and is not a folder");
  }
  lock_fd_ = ::open(target_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (lock_fd_ < 0) {
    throw data_error(target_.string() + ": cannot open the output folder: " + std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int const err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw data_error(target_.string() +
                       ": another qtl quantize is writing this folder (it holds the folder's lock); "
                       "wait for it or choose another folder");
    }
    throw data_error(target_.string() + ": cannot lock the output folder: " + std::strerror(err));
  }
  if (!input_dir.empty()) {
    fs::path const in = absolute_target(input_dir);
    auto const rel = in.lexically_relative(target_);
    if (!rel.empty() && *rel.begin() != "..") {
      throw data_error(target_.string() + ": the output folder holds the input " + in.string() +
                       " (the whole folder is replaced)");
    }
  }
  if (!holds_checkpoint_or_nothing(target_)) {
    throw data_error(target_.string() +
                     ": the output folder holds files but no checkpoint (no config.json, *.safetensors); "
                     "qtl quantize replaces the whole folder: choose a new or empty folder, or an earlier output");
  }
  staging_ = parent / (hidden(target_, "new") + std::to_string(::getpid()));
  if (::mkdir(staging_.c_str(), 0755) != 0) {
    throw data_error(staging_.string() + ": cannot create the staging folder beside the output: " +
                     std::strerror(errno));
  }
  staging_path = ::strdup(staging_.c_str());
  struct sigaction sa {};
  sa.sa_handler = remove_staging_and_die;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    ::sigaction(sig, &sa, nullptr);
  }
}

staged_output::~staged_output() {
  if (!committed_) {
    forget_tracked();
    std::error_code ec;
    if (!staging_.empty()) {
      fs::remove_all(staging_, ec);
    }
    if (created_target_) {
      ::rmdir(target_.c_str());  // only when still empty
    }
  }
  if (lock_fd_ >= 0) {
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
    return "qtl quantize: warning: the new output is in place, but the old one could not be removed from " +
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
