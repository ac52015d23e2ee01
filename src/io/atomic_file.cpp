#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace zero::io {
namespace {

std::string system_error(const std::string& what, const std::string& path) {
  return path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw FileError(system_error("cannot open directory", dir));
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) throw FileError(system_error("fsync of directory failed", dir));
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::FILE*)>& writer) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) throw FileError(system_error("cannot create", temp));
  try {
    writer(file);
    if (std::fflush(file) != 0) throw FileError(system_error("write failed", temp));
    if (::fsync(::fileno(file)) != 0) throw FileError(system_error("fsync failed", temp));
    const int rc = std::fclose(file);
    file = nullptr;
    if (rc != 0) throw FileError(system_error("close failed", temp));
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
      throw FileError(system_error("cannot rename " + temp + " to", path));
    }
  } catch (...) {
    if (file != nullptr) std::fclose(file);
    std::remove(temp.c_str());
    throw;
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  fsync_directory(parent.empty() ? "." : parent.string());
}

}  // namespace zero::io
