#include "offload/swap_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.h"

namespace zero::offload {
namespace {

// The folder the user named must exist and be writable; what is inside it is ours to create.
void check_nvme_path(const std::filesystem::path& path, const std::string& key) {
  if (path.empty()) {
    throw ConfigError(key + " is empty: set it to a folder on a fast local disk");
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw ConfigError(key + " \"" + path.string() +
                      "\" does not exist: create the folder (on a fast local disk) or fix the path");
  }
  if (!std::filesystem::is_directory(path, ec)) {
    throw ConfigError(key + " \"" + path.string() + "\" is not a folder");
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    throw ConfigError(key + " \"" + path.string() + "\" is not writable (" + std::strerror(errno) +
                      "): give this user write access or choose another folder");
  }
}

}  // namespace

SwapFolder::SwapFolder(const std::filesystem::path& nvme_path, const std::string& area, int rank,
                       const std::string& key) {
  check_nvme_path(nvme_path, key);
  directory_ = nvme_path / area / ("rank" + std::to_string(rank));
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec) {
    throw ConfigError(key + " \"" + nvme_path.string() + "\": cannot create " + directory_.string() +
                      ": " + ec.message());
  }
  const std::filesystem::path lock_path = directory_ / ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    const std::string cause = std::strerror(errno);
    std::filesystem::remove(directory_, ec);
    throw ConfigError(key + " \"" + nvme_path.string() + "\": cannot create " + lock_path.string() +
                      ": " + cause);
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw ConfigError(key + " \"" + nvme_path.string() + "\": " + directory_.string() +
                      " is in use by another NVMe swap (another zero.cpp job with the same nvme_path "
                      "and rank?); give each job its own nvme_path");
  }
}

void SwapFolder::release() noexcept {
  if (lock_fd_ < 0) return;
  std::error_code ec;
  std::filesystem::remove(directory_ / ".lock", ec);
  ::close(lock_fd_);  // releases the lock
  lock_fd_ = -1;
  std::filesystem::remove(directory_, ec);                // only if empty
  std::filesystem::remove(directory_.parent_path(), ec);  // the area, if no other rank uses it
}

}  // namespace zero::offload
