// Opening files the user points zero.cpp at (configs, model folders, checkpoints, shards):
// only regular files are inputs — a FIFO would block open() forever, /dev/zero would be read
// until memory runs out, a directory is a mistake — and text inputs are capped in size before
// they are read. Every failure is a FileError naming the path, what the file was for, and the fix.
#pragma once
#include <cstdint>
#include <string>

namespace zero::io {

// Size caps for text inputs (bytes). Real DeepSpeed configs and HF config.json files are a few
// KiB; checkpoint metadata holds a parameter manifest (tens of bytes per tensor).
inline constexpr uint64_t kMaxConfigBytes = 4ull << 20;          // DeepSpeed config, config.json
inline constexpr uint64_t kMaxCheckpointStateBytes = 256ull << 20;  // engine_state.json
inline constexpr uint64_t kMaxSmallTextBytes = 64ull << 10;         // `latest`, hostfiles
// model.safetensors.index.json: about 100 bytes per tensor; the largest models have a few
// thousand tensors.
inline constexpr uint64_t kMaxWeightIndexBytes = 64ull << 20;

// Throws FileError unless `path` exists and is a regular file (symlinks are followed).
// `what` names the file's role in messages, e.g. "the DeepSpeed config".
void require_regular_file(const std::string& path, const std::string& what);

// The size in bytes of the regular file `path` (after require_regular_file's checks).
uint64_t regular_file_size(const std::string& path, const std::string& what);

// An open, read-only descriptor of a regular file (closed on destruction) and its size.
class InputFile {
 public:
  InputFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  InputFile(InputFile&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_;
  uint64_t size_;
};

// Opens `path` for reading or mapping (binary inputs: safetensors, token shards). Checks that it
// is a regular file before open() — open() of a FIFO blocks until a writer appears — and again
// on the opened descriptor, so a path swapped in between cannot slip through. Throws FileError.
InputFile open_regular_file(const std::string& path, const std::string& what);

// Reads the whole regular file `path`, refusing one larger than `max_bytes` before reading it
// (the message gives both sizes). Throws FileError.
std::string read_text_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace zero::io
