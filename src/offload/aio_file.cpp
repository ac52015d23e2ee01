// AioFile and the per-directory O_DIRECT probe.
#include "offload/aio_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.h"

namespace zero::offload {
namespace {

constexpr int64_t kMinAlignment = 4096;     // covers 512-byte and 4 KiB logical sectors
constexpr int64_t kMaxAlignment = 1 << 16;  // st_blksize beyond this is a stripe hint, not a rule

std::mutex& probe_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, DirectIoSupport>& probe_cache() {
  static std::map<std::string, DirectIoSupport> cache;
  return cache;
}
std::set<std::string>& warned_directories() {
  static std::set<std::string> warned;
  return warned;
}
bool g_refuse_direct_io = false;

std::string errno_text(int err) { return std::strerror(err); }

// The alignment direct I/O needs on `fd`: the file system's block size where it is a sensible
// power of two, never less than 4 KiB.
int64_t alignment_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return kMinAlignment;
  const int64_t block = st.st_blksize;
  if (block > kMinAlignment && block <= kMaxAlignment && (block & (block - 1)) == 0) return block;
  return kMinAlignment;
}

DirectIoSupport probe_uncached(const std::filesystem::path& directory) {
  DirectIoSupport result;
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) {
    throw FileError(directory.string() + ": not a directory (" +
                    (ec ? ec.message() : std::string("missing or not a folder")) +
                    "); create it or point nvme_path at an existing folder");
  }
  const std::string probe = (directory / (".zero_direct_io_probe." + std::to_string(::getpid()))).string();
  if (g_refuse_direct_io) {
    result.reason = errno_text(EINVAL) + " (forced by the test hook)";
    return result;
  }
  int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {
    result.reason = "open(O_DIRECT): " + errno_text(EINVAL);
    return result;
  }
  if (fd < 0) {
    throw FileError(probe + ": cannot create a file in " + directory.string() + ": " +
                    errno_text(errno) + "; the folder must be writable");
  }
  result.alignment = alignment_of(fd);
  void* buffer = std::aligned_alloc(static_cast<size_t>(result.alignment), static_cast<size_t>(result.alignment));
  if (buffer == nullptr) {
    ::close(fd);
    ::unlink(probe.c_str());
    throw FileError(probe + ": out of host memory for the O_DIRECT probe");
  }
  std::memset(buffer, 0x5a, static_cast<size_t>(result.alignment));
  const ssize_t wrote = ::pwrite(fd, buffer, static_cast<size_t>(result.alignment), 0);
  const int write_errno = errno;
  ssize_t read = -1;
  int read_errno = 0;
  if (wrote == result.alignment) {
    read = ::pread(fd, buffer, static_cast<size_t>(result.alignment), 0);
    read_errno = errno;
  }
  std::free(buffer);
  ::close(fd);
  ::unlink(probe.c_str());
  if (wrote < 0 && write_errno == EINVAL) {
    result.reason = "first O_DIRECT write: " + errno_text(EINVAL);
    return result;
  }
  if (wrote != result.alignment) {
    throw FileError(probe + ": cannot write " + std::to_string(result.alignment) + " bytes in " +
                    directory.string() + ": " + (wrote < 0 ? errno_text(write_errno) : "short write") +
                    "; the folder must be writable and have free space");
  }
  if (read < 0 && read_errno == EINVAL) {
    result.reason = "first O_DIRECT read: " + errno_text(EINVAL);
    return result;
  }
  if (read != result.alignment) {
    throw FileError(probe + ": cannot read back the O_DIRECT probe in " + directory.string() + ": " +
                    (read < 0 ? errno_text(read_errno) : "short read"));
  }
  result.supported = true;
  return result;
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

}  // namespace

DirectIoSupport probe_direct_io(const std::filesystem::path& directory) {
  std::lock_guard<std::mutex> lock(probe_mutex());
  const std::string key = std::filesystem::absolute(directory).lexically_normal().string();
  auto it = probe_cache().find(key);
  if (it != probe_cache().end()) return it->second;
  DirectIoSupport support = probe_uncached(directory);
  probe_cache().emplace(key, support);
  return support;
}

void set_refuse_direct_io_for_testing(bool refuse) {
  std::lock_guard<std::mutex> lock(probe_mutex());
  g_refuse_direct_io = refuse;
  probe_cache().clear();
  warned_directories().clear();
}

AioFile::AioFile(std::filesystem::path path, Mode mode, const WarningSink& warn) : path_(std::move(path)) {
  const std::filesystem::path directory = directory_of(path_);
  const DirectIoSupport support = probe_direct_io(directory);
  direct_ = support.supported;
  alignment_ = support.alignment;
  if (!direct_) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(probe_mutex());
      first = warned_directories().insert(std::filesystem::absolute(directory).lexically_normal().string()).second;
    }
    if (first) {
      const std::string text =
          "warning: O_DIRECT is unavailable in " + directory.string() + " (" + support.reason +
          "); NVMe swap files there use buffered I/O, which copies every swapped byte through the "
          "page cache (more host memory traffic, and the cache competes with offloaded state for "
          "host memory). Put nvme_path on a local file system such as ext4 or xfs for direct I/O.";
      if (warn) {
        warn(text);
      } else {
        std::fprintf(stderr, "%s\n", text.c_str());
      }
    }
  }
  int flags = O_RDWR | O_CLOEXEC | (direct_ ? O_DIRECT : 0);
  if (mode == Mode::kCreate) flags |= O_CREAT | O_TRUNC;
  fd_ = ::open(path_.c_str(), flags, 0600);
  if (fd_ < 0) {
    throw FileError(path_.string() + ": cannot " + (mode == Mode::kCreate ? "create" : "open") +
                    " the NVMe swap file: " + errno_text(errno));
  }
}

AioFile::~AioFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t AioFile::size_bytes() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    throw FileError(path_.string() + ": fstat of the NVMe swap file failed: " + errno_text(errno));
  }
  return st.st_size;
}

void AioFile::resize(int64_t bytes) {
  if (::ftruncate(fd_, bytes) != 0) {
    throw FileError(path_.string() + ": cannot size the NVMe swap file to " + std::to_string(bytes) +
                    " bytes: " + errno_text(errno) + "; check the free space under nvme_path");
  }
}

}  // namespace zero::offload
