// qtl/io/regular_file.hpp: what is not a regular file is refused by what it is, before any read and
// without blocking (a FIFO without a writer, a directory, a dangling and a looping link, /dev/null),
// links to regular files are followed, and read_regular_file's size limit.
#include <qtl/io/regular_file.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

/// A fresh folder under the system's temporary folder, removed with its contents at the end.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "qtl-regular-file-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(temp_dir const&) = delete;
  temp_dir& operator=(temp_dir const&) = delete;
};

std::string why_not(fs::path const& p) {
  struct stat st {};
  std::string why;
  int const fd = qtl::io::open_regular_file(p, st, why);
  if (fd >= 0) {
    ::close(fd);
  }
  return fd >= 0 ? std::string("opened") : why;
}

}  // namespace

TEST_CASE("open_regular_file refuses what is not a regular file, by what it is", "[io][regular_file]") {
  temp_dir const d;
  std::ofstream(d.path / "f") << "hello";
  fs::create_symlink(d.path / "f", d.path / "link");
  fs::create_symlink(d.path / "missing", d.path / "dangling");
  fs::create_symlink(d.path / "loop", d.path / "loop");
  REQUIRE(::mkfifo((d.path / "fifo").c_str(), 0600) == 0);
  CHECK(why_not(d.path / "f") == "opened");
  CHECK(why_not(d.path / "link") == "opened");  // links are followed
  CHECK(why_not(d.path) == "is a directory, not a regular file");
  CHECK(why_not(d.path / "fifo") == "is a FIFO (named pipe), not a regular file");  // and no wait for a writer
  CHECK(why_not(d.path / "dangling") == "is a symbolic link to a missing file");
  CHECK(why_not(d.path / "loop") == "is a symbolic link that loops");
  CHECK(why_not(d.path / "none") == "cannot open: No such file or directory");
  CHECK(why_not("/dev/null") == "is a character device, not a regular file");
}

TEST_CASE("read_regular_file reads the whole file up to its limit", "[io][regular_file]") {
  temp_dir const d;
  std::ofstream(d.path / "f") << "0123456789";
  std::string out, why;
  REQUIRE(qtl::io::read_regular_file(d.path / "f", 10, out, why));
  CHECK(out == "0123456789");
  CHECK_FALSE(qtl::io::read_regular_file(d.path / "f", 9, out, why));
  CHECK(why == "is 10 bytes, more than the 9 this reads");
  CHECK_FALSE(qtl::io::read_regular_file(d.path, 100, out, why));
  CHECK(why == "is a directory, not a regular file");
}
