// AioFile: one file the NVMe swap reads and writes through AioEngine, opened with O_DIRECT where
// the directory's file system allows it and with ordinary buffered I/O where it does not.
//
// Why O_DIRECT: swapped optimizer state is written once per step and read once per step; going
// through the page cache would copy every byte once more and evict everything else from host
// memory (the memory offload is there to save). O_DIRECT needs buffer addresses, file offsets and
// sizes that are multiples of the file system's logical block size (`alignment()`, bytes).
//
// Direct I/O support is decided once per directory by probe_direct_io(): it creates a scratch
// file with O_DIRECT and writes and reads one aligned block. Where open() or that first I/O fails
// with EINVAL (tmpfs before Linux 6.6, some overlay and network file systems), files there are
// opened buffered and a one-time warning per directory (stderr, or the caller's sink) says that
// O_DIRECT is unavailable there and what that costs. The same alignment is kept either way, so
// the layout of a swap file never depends on the mode.
//
// Thread rules: an AioFile is immutable after construction; any thread may issue I/O on it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace zero::offload {

// Where warnings go (one line each, no newline); empty: stderr.
using WarningSink = std::function<void(const std::string&)>;

struct DirectIoSupport {
  bool supported = false;
  int64_t alignment = 4096;  // bytes: buffers, offsets and sizes are multiples of it
  std::string reason;        // why not, when !supported (the errno text of the refusal)
};

// Probes `directory` (which must exist and be writable: FileError otherwise) for O_DIRECT.
// Results are cached per directory for the life of the process.
DirectIoSupport probe_direct_io(const std::filesystem::path& directory);

class AioFile {
 public:
  enum class Mode { kCreate, kOpenExisting };

  // Opens `path` for reading and writing (kCreate: created or truncated). Direct I/O is used
  // when probe_direct_io(path's directory) says so; otherwise the one-time warning goes to
  // `warn`. Throws FileError naming the path and the errno text.
  AioFile(std::filesystem::path path, Mode mode, const WarningSink& warn = {});
  ~AioFile();
  AioFile(const AioFile&) = delete;
  AioFile& operator=(const AioFile&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  bool direct() const { return direct_; }
  int64_t alignment() const { return alignment_; }  // bytes
  // Current size in bytes (fstat); throws FileError.
  int64_t size_bytes() const;
  // Sets the size in bytes (ftruncate; sparse where the file system allows); throws FileError.
  void resize(int64_t bytes);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool direct_ = false;
  int64_t alignment_ = 4096;
};

// Test hook: while set, probe_direct_io() treats every directory as refusing O_DIRECT (as if
// open() failed with EINVAL), so the buffered fallback is tested on file systems that accept
// O_DIRECT (tmpfs has since Linux 6.6). Clears the per-directory cache when changed.
void set_refuse_direct_io_for_testing(bool refuse);

// Rounds `bytes` up to a multiple of `alignment` (> 0).
inline int64_t round_up_bytes(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace zero::offload
