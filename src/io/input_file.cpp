#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace zero::io {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

struct stat stat_regular(const std::string& path, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw FileError(path + ": cannot open " + what + " (" + std::strerror(errno) +
                    "); check the path given for it");
  }
  if (!S_ISREG(info.st_mode)) {
    throw FileError(path + ": " + what + " is not a regular file (it is " +
                    kind_of(info.st_mode) + "); point zero at the file itself");
  }
  return info;
}

std::string show_bytes(uint64_t bytes) {
  if (bytes >= (1ull << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  stat_regular(path, what);
}

uint64_t regular_file_size(const std::string& path, const std::string& what) {
  return static_cast<uint64_t>(stat_regular(path, what).st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile open_regular_file(const std::string& path, const std::string& what) {
  stat_regular(path, what);
  // O_NONBLOCK: if the path was swapped for a FIFO after the check, open() must not hang.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw FileError(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  }
  struct stat info {};
  const bool stat_ok = ::fstat(fd, &info) == 0;
  const int stat_errno = errno;
  if (!stat_ok || !S_ISREG(info.st_mode)) {
    ::close(fd);
    if (!stat_ok) {
      throw FileError(path + ": cannot stat " + what + " (" + std::strerror(stat_errno) + ")");
    }
    throw FileError(path + ": " + what + " is not a regular file (it is " +
                    kind_of(info.st_mode) + "); point zero at the file itself");
  }
  return InputFile(fd, static_cast<uint64_t>(info.st_size));
}

std::string read_text_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const InputFile file = open_regular_file(path, what);
  const uint64_t size = file.size();
  if (size > max_bytes) {
    throw FileError(path + ": " + what + " is " + show_bytes(size) + ", more than the " +
                    show_bytes(max_bytes) + " such a file can be; is this the right file?");
  }
  std::string text;
  text.resize(static_cast<size_t>(size));
  size_t done = 0;
  // Reads past the expected size by one byte at most, so a file that grew is caught, not read
  // forever.
  char extra = 0;
  while (true) {
    char* target = done < text.size() ? text.data() + done : &extra;
    const size_t room = done < text.size() ? text.size() - done : 1;
    const ssize_t got = ::read(file.fd(), target, room);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw FileError(path + ": reading " + what + " failed (" + std::strerror(errno) + ")");
    }
    if (got == 0) break;
    if (done >= text.size()) {
      throw FileError(path + ": " + what + " changed size while being read; read it again");
    }
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

}  // namespace zero::io
