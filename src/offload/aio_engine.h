// AioEngine: asynchronous reads and writes of byte ranges of AioFiles through io_uring, the I/O
// engine behind ZeRO-Infinity's NVMe swap. It honours DeepSpeed's aio block:
//  * block_size (bytes, at most 1 GiB): a request is cut into pieces of this size (rounded up
//    to the file's O_DIRECT alignment for direct files), each one io_uring read or write;
//  * queue_depth: pieces in flight per worker ring (the ring has that many entries);
//  * intra_op_parallelism (thread_count): worker threads, each with its own ring; one request is
//    split into that many contiguous runs of pieces, one per worker;
//  * single_submit: one io_uring_submit per piece instead of one per batch of pieces;
//  * overlap_events: true refills the queue as each completion is reaped; false submits a full
//    batch, waits for all of it, then submits the next (DeepSpeed's non-overlapped mode).
//
// Requests from all callers go into each worker's FIFO, so pieces of consecutive requests share
// the queue (a backlog of small requests keeps the disk as busy as one large request).
// Completions are checked: a negative result or a short read/write (after retrying the rest of
// the piece once it made progress) fails the request with a FileError naming the file, the
// offset and the cause; wait() rethrows it.
//
// Direct files (AioFile::direct()) need the buffer address, the offset and the size to be
// multiples of AioFile::alignment(); that is checked (InternalError: the caller's bug).
//
// Thread rules: submit_*, wait and wait_all may be called from any thread. The buffer of a request
// must stay alive and untouched (for writes: unmodified) until wait() on its ticket (or
// wait_all()) has returned. The AioFile must outlive its requests. The destructor waits for
// every request still in flight (dropping their errors) before it frees the rings.
#pragma once
#include <cstdint>
#include <memory>

#include "config/aio_config.h"
#include "offload/aio_file.h"

namespace zero::offload {

struct AioEngineOptions {
  int64_t block_size = 1'048'576;  // bytes per piece
  int64_t queue_depth = 8;         // pieces in flight per worker
  int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;

  // DeepSpeed's aio section (use_gds is refused by validate_nvme_offload, not here).
  static AioEngineOptions from_config(const config::AioConfig& aio);
};

// Counters since construction (bytes actually transferred; pieces completed; io_uring_submit
// calls made).
struct AioEngineStats {
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t pieces = 0;
  int64_t submit_calls = 0;
};

class AioEngine {
 public:
  using Ticket = uint64_t;

  // Starts intra_op_parallelism workers, each with an io_uring of queue_depth entries. Throws
  // ConfigError for non-positive or oversized settings and UnsupportedError where the kernel
  // refuses io_uring (the message names the likely cause: a container seccomp profile or the
  // kernel.io_uring_disabled sysctl).
  explicit AioEngine(const AioEngineOptions& options);
  ~AioEngine();
  AioEngine(const AioEngine&) = delete;
  AioEngine& operator=(const AioEngine&) = delete;

  const AioEngineOptions& options() const { return options_; }

  // Queues a read of `bytes` bytes at byte `offset` of `file` into `buffer` and returns at once.
  Ticket submit_read(const AioFile& file, int64_t offset, void* buffer, int64_t bytes);
  // Queues a write of `bytes` bytes from `buffer` to byte `offset` of `file`.
  Ticket submit_write(const AioFile& file, int64_t offset, const void* buffer, int64_t bytes);
  // Blocks until the request is complete; throws its FileError if it failed. Each ticket is
  // waited for at most once (waiting for an unknown or already-waited ticket is InternalError).
  void wait(Ticket ticket);
  // Waits for every request submitted so far; throws the first failure after all have finished.
  void wait_all();

  AioEngineStats stats() const;

 private:
  struct Impl;
  Ticket submit(const AioFile& file, int64_t offset, void* buffer, int64_t bytes, bool write);

  AioEngineOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zero::offload
