#pragma once
/// \file
/// Opening and reading input files that must be regular files, without ever blocking: a FIFO,
/// a device, a socket or a directory named as an input is refused by what it is, before any
/// read (the open itself uses O_NONBLOCK, which a FIFO without a writer would otherwise wait in).
/// Symbolic links are followed (Hugging Face cache folders are made of them); a dangling or
/// looping link is named as such. Every problem comes back in words, for the caller to throw as
/// its own error class with the file's path in front.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace qtl::io {

/// What a non-regular file is, in words ("a directory", "a FIFO (named pipe)", ...).
inline std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO (named pipe)";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "not a regular file";
}

/// Opens `path` read-only if it is a regular file. Returns the descriptor (blocking mode again,
/// close-on-exec) and fills `st`; on failure returns -1 and sets `why` ("is a FIFO (named pipe),
/// not a regular file", "cannot open: Permission denied", "is a symbolic link to a missing file").
inline int open_regular_file(std::filesystem::path const& path, struct stat& st, std::string& why) {
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int const err = errno;
    struct stat lst {};
    if (err == ENOENT && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      why = "is a symbolic link to a missing file";
    } else if (err == ELOOP) {
      why = "is a symbolic link that loops";
    } else {
      why = std::string("cannot open: ") + std::strerror(err);
    }
    return -1;
  }
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot stat: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is " + file_kind(st.st_mode) + ", not a regular file";
    ::close(fd);
    return -1;
  }
  int const flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) {
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  return fd;
}

/// Reads the whole regular file `path` (at most `max_bytes`) into `out`. Returns false and sets
/// `why` when it is not a regular file, cannot be read to the end, or is larger than `max_bytes`.
inline bool read_regular_file(std::filesystem::path const& path, std::uint64_t max_bytes, std::string& out,
                              std::string& why) {
  struct stat st {};
  int const fd = open_regular_file(path, st, why);
  if (fd < 0) {
    return false;
  }
  auto const size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    why = "is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " this reads";
    ::close(fd);
    return false;
  }
  out.assign(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t const r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      why = r == 0 ? std::string("cannot read: the file shrank while it was read")
                   : std::string("cannot read: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return true;
}

}  // namespace qtl::io
