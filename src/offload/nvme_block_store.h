// NvmeBlockStore: a fixed list of byte blocks kept in one swap file on an NVMe drive, moved
// through a small pool of pinned staging buffers by AioEngine (io_uring). ZeRO-Infinity's
// parameter swap (zero_optimization.offload_param {device: nvme}) keeps one block per model unit:
// that unit's shard of the rank's stage-3 partition, read ahead of the unit's use and written
// after each optimizer step.
//
// File: `nvme_path/<area>/rank<r>/<file_name>`; block b starts at a multiple of the O_DIRECT
// alignment and is padded to it (the layout never depends on whether O_DIRECT is in use). The
// file is sized at construction (sparse: a block never written reads as zeros) and removed with
// the rank folder by the destructor; the folder is locked (swap_folder.h).
//
// Staging: `buffer_count` buffers of `buffer_bytes` (rounded up to the alignment), allocated once
// from the caller's allocator (category kParams): a block must fit one buffer. A buffer is free,
// reading a block, holding a read block (prefetched, or acquired by the caller), or writing one.
//  * prefetch(b) starts a read into a free buffer and returns at once (true also when the block
//    is already staged or in flight; false: nothing was started because fewer than two buffers
//    are free - read-ahead always leaves one for the next acquire);
//  * acquire(b) returns block b's bytes in a buffer, waiting for its read (issuing it when it was
//    not prefetched; a buffer is found by dropping the newest block read ahead - read-ahead goes
//    in order of use, so that one is needed last - or by waiting for the oldest write); the
//    bytes stay valid until release(b);
//  * write(b, src) copies the block into a buffer and issues the write (it overlaps the copies of
//    the next blocks); fill_for_write(b) + submit_write(b) do the same without the copy (the
//    caller writes the block's bytes straight into the returned buffer); flush() waits for every
//    write. A staged copy of b is dropped by write(b),
//    and a read of b waits for b's write in flight first, so reads always see the newest bytes.
//
// Errors: I/O failures (short read of a truncated file, a full disk) and a block whose checksum
// changed since zero.cpp wrote it are FileErrors naming the file, the block, the byte range and
// the cause. After one, the I/O in flight has completed and the store is usable again.
//
// Thread rules: one thread uses a store. Sizes are bytes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "offload/aio_engine.h"
#include "offload/aio_file.h"
#include "offload/swap_folder.h"

namespace zero::offload {

struct NvmeBlockStoreOptions {
  std::filesystem::path nvme_path;  // must exist and be writable
  std::string area = "zero_param_swap";
  std::string file_name = "params.swp";
  std::string key = "zero_optimization.offload_param.nvme_path";  // named in errors
  int rank = 0;
  std::vector<int64_t> block_bytes;  // logical bytes of each block (>= 0)
  int64_t buffer_count = 5;
  int64_t buffer_bytes = 0;  // each at least the largest block
  AioEngineOptions aio;
  bool verify_checksums = true;  // a checksum per written block, checked on every read
  WarningSink warn;              // the O_DIRECT fallback warning; empty: stderr
};

// Counters since construction.
struct NvmeBlockStoreStats {
  int64_t blocks_read = 0;       // reads completed (prefetched or not)
  int64_t blocks_written = 0;
  int64_t prefetch_hits = 0;     // acquire() found the block staged or in flight
  int64_t bytes_read = 0;        // logical block bytes
  int64_t bytes_written = 0;
};

class NvmeBlockStore {
 public:
  NvmeBlockStore(const NvmeBlockStoreOptions& options, Allocator& staging_allocator);
  ~NvmeBlockStore();
  NvmeBlockStore(const NvmeBlockStore&) = delete;
  NvmeBlockStore& operator=(const NvmeBlockStore&) = delete;

  int64_t block_count() const { return static_cast<int64_t>(options_.block_bytes.size()); }
  const std::filesystem::path& file_path() const { return file_->path(); }
  int64_t staging_bytes() const { return buffer_stride_ * static_cast<int64_t>(buffers_.size()); }
  bool direct_io() const { return file_->direct(); }
  const NvmeBlockStoreStats& stats() const { return stats_; }

  bool prefetch(int64_t block);
  const void* acquire(int64_t block);
  void release(int64_t block);
  void write(int64_t block, const void* source);
  void* fill_for_write(int64_t block);  // block_bytes[b] bytes to fill, then submit_write(b)
  void submit_write(int64_t block);
  void flush();

 private:
  enum class State { kFree, kReading, kStaged, kAcquired, kFilling, kWriting };
  struct Buffer {
    char* data = nullptr;
    State state = State::kFree;
    int64_t block = -1;
    AioEngine::Ticket ticket = 0;
    int64_t since = 0;  // when it entered its state (for "oldest")
  };

  void check_block(int64_t block) const;
  Buffer* find(int64_t block, State state);
  Buffer* find_any(int64_t block);  // reading, staged or acquired
  Buffer& take_buffer();            // a free buffer, making one free if needed
  void complete(Buffer& buffer);    // waits for its I/O; a read becomes kStaged, a write kFree
  void issue_read(Buffer& buffer, int64_t block);
  void verify(const Buffer& buffer) const;
  int64_t offset(int64_t block) const { return offsets_[static_cast<size_t>(block)]; }
  int64_t io_bytes(int64_t block) const;
  void abandon_in_flight() noexcept;

  NvmeBlockStoreOptions options_;
  Allocator& allocator_;
  std::unique_ptr<SwapFolder> folder_;
  std::unique_ptr<AioFile> file_;
  std::vector<int64_t> offsets_;
  std::vector<uint64_t> checksums_;
  std::vector<char> checksum_known_;
  std::vector<Buffer> buffers_;
  int64_t buffer_stride_ = 0;
  void* staging_ = nullptr;
  size_t staging_allocation_ = 0;
  int64_t clock_ = 0;
  NvmeBlockStoreStats stats_;
  AioEngine engine_;  // last member: destroyed first, after its requests have finished
};

}  // namespace zero::offload
