// AioEngine: worker threads, each owning one io_uring, draining a FIFO of request slices.
#include "offload/aio_engine.h"

#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace zero::offload {
namespace {

// io_uring's own ceiling on ring entries (IORING_MAX_ENTRIES).
constexpr int64_t kMaxQueueDepth = 32768;
constexpr int64_t kMaxWorkers = 256;
constexpr int64_t kMaxBlockSize = int64_t{1} << 30;  // fits io_uring's 32-bit length

struct Request {
  const AioFile* file = nullptr;
  bool write = false;
  char* buffer = nullptr;
  int64_t offset = 0;  // bytes into the file
  int64_t bytes = 0;
  int slices_left = 0;  // guarded by Impl::mutex
  std::string error;    // first failure; guarded by Impl::mutex
};

// The run of pieces [begin, end) of one request (bytes relative to the request) one worker does.
struct Slice {
  std::shared_ptr<Request> request;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t cursor = 0;  // next byte to issue
  int64_t piece_bytes = 0;
  int in_flight = 0;
  std::string error;  // first failure of this slice
  bool issued_all() const { return cursor >= end || !error.empty(); }
  bool finished() const { return issued_all() && in_flight == 0; }
};

// One io_uring read/write in flight (or waiting to be resubmitted after partial progress).
struct Piece {
  Slice* slice = nullptr;
  int64_t start = 0;   // bytes relative to the request
  int64_t length = 0;  // bytes
  int64_t done = 0;    // bytes transferred so far
};

std::string describe_io(const Request& r, int64_t at, int64_t length) {
  return r.file->path().string() + ": " + (r.write ? "write" : "read") + " of " + std::to_string(length) +
         " bytes at byte offset " + std::to_string(at);
}

// What the engine and its workers share.
struct EngineState {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::map<AioEngine::Ticket, std::shared_ptr<Request>> requests;  // submitted, not yet waited for
  AioEngine::Ticket next_ticket = 1;
  std::atomic<int64_t> bytes_read{0};
  std::atomic<int64_t> bytes_written{0};
  std::atomic<int64_t> pieces{0};
  std::atomic<int64_t> submit_calls{0};

  // Called by a worker when one slice of `request` is complete (error empty: success).
  void finish_slice(Request& request, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error.empty() && request.error.empty()) request.error = error;
      --request.slices_left;
    }
    done_cv.notify_all();
  }
};

class AioWorker {
 public:
  AioWorker(EngineState& engine, const AioEngineOptions& options) : engine_(engine), options_(options) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(options.queue_depth), &ring_, 0);
    if (rc < 0) {
      throw UnsupportedError(
          "io_uring_queue_init(" + std::to_string(options.queue_depth) + " entries) failed: " +
          std::strerror(-rc) +
          ". NVMe offload needs io_uring: allow it (a container's seccomp profile, the "
          "kernel.io_uring_disabled sysctl, RLIMIT_MEMLOCK on kernels before 5.12) or lower "
          "aio.queue_depth");
    }
    pieces_.resize(static_cast<size_t>(options.queue_depth));
    for (Piece& p : pieces_) free_.push_back(&p);
    thread_ = std::thread([this] { run(); });
  }

  ~AioWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    io_uring_queue_exit(&ring_);
  }

  void enqueue(std::unique_ptr<Slice> slice) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      incoming_.push_back(std::move(slice));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !incoming_.empty() || !active_.empty(); });
        for (auto& s : incoming_) active_.push_back(std::move(s));
        incoming_.clear();
        if (stop_ && active_.empty()) return;
      }
      issue();
      if (in_flight_ > 0) reap();
      retire_finished();
    }
  }

  Slice* next_slice_to_issue() {
    for (auto& s : active_) {
      if (!s->issued_all()) return s.get();
    }
    return nullptr;
  }

  void prepare(Piece& p) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {  // cannot happen with <= queue_depth in flight; submit and retry
      submit();
      sqe = io_uring_get_sqe(&ring_);
    }
    const Request& r = *p.slice->request;
    const int fd = r.file->fd();
    char* address = r.buffer + p.start + p.done;
    const auto length = static_cast<unsigned>(p.length - p.done);
    const auto at = static_cast<uint64_t>(r.offset + p.start + p.done);
    if (r.write) {
      io_uring_prep_write(sqe, fd, address, length, at);
    } else {
      io_uring_prep_read(sqe, fd, address, length, at);
    }
    io_uring_sqe_set_data(sqe, &p);
    ++in_flight_;
  }

  void submit() {
    for (;;) {
      const int rc = io_uring_submit(&ring_);
      engine_.submit_calls.fetch_add(1, std::memory_order_relaxed);
      if (rc >= 0) return;
      if (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        // Nothing the caller did; keep the entries queued and say so on the requests they serve.
        broken_ = std::string("io_uring_submit failed: ") + std::strerror(-rc);
        return;
      }
      std::this_thread::yield();
    }
  }

  // Fills the queue: up to queue_depth pieces in flight (overlap_events), or a full batch only
  // once the previous batch has completed (overlap_events off).
  void issue() {
    if (!options_.overlap_events && in_flight_ > 0) return;
    int prepared = 0;
    while (in_flight_ < options_.queue_depth) {
      Piece* p = nullptr;
      if (!retry_.empty()) {
        p = retry_.back();
        retry_.pop_back();
      } else {
        Slice* s = next_slice_to_issue();
        if (s == nullptr) break;
        p = free_.back();
        free_.pop_back();
        p->slice = s;
        p->start = s->cursor;
        p->length = std::min(s->piece_bytes, s->end - s->cursor);
        p->done = 0;
        s->cursor += p->length;
        ++s->in_flight;
      }
      prepare(*p);
      ++prepared;
      if (options_.single_submit) submit();
    }
    if (!options_.single_submit && prepared > 0) submit();
  }

  void complete_piece(Piece& p, int res) {
    Slice& s = *p.slice;
    const Request& r = *s.request;
    const int64_t at = r.offset + p.start + p.done;
    const int64_t want = p.length - p.done;
    if (res == -EAGAIN || res == -EINTR) {
      retry_.push_back(&p);
      return;
    }
    if (res < 0) {
      if (s.error.empty()) {
        s.error = describe_io(r, at, want) + " failed: " + std::strerror(-res) +
                  (res == -ENOSPC ? " (the disk under nvme_path is full; free space or use a larger disk)" : "");
      }
    } else if (res == 0) {
      if (s.error.empty()) {
        std::string size;
        try {
          size = "; the file has " + std::to_string(r.file->size_bytes()) + " bytes";
        } catch (const Error&) {
        }
        s.error = r.write ? describe_io(r, at, want) + " made no progress (short write" + size +
                                "): the disk under nvme_path may be full"
                          : describe_io(r, at, want) + " hit the end of the file (short read" + size +
                                "): the swap file was truncated or replaced behind zero.cpp's back, so "
                                "the swapped state is lost; restart from the last checkpoint";
      }
    } else {
      p.done += res;
      if (r.write) {
        engine_.bytes_written.fetch_add(res, std::memory_order_relaxed);
      } else {
        engine_.bytes_read.fetch_add(res, std::memory_order_relaxed);
      }
      if (p.done < p.length && s.error.empty()) {  // partial: issue the rest
        retry_.push_back(&p);
        return;
      }
    }
    engine_.pieces.fetch_add(1, std::memory_order_relaxed);
    --s.in_flight;
    free_.push_back(&p);
  }

  // Waits for at least one completion, then takes every one already there.
  void reap() {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    while (rc == -EINTR || rc == -EAGAIN) rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc < 0) {
      broken_ = std::string("io_uring_wait_cqe failed: ") + std::strerror(-rc);
      return;
    }
    while (cqe != nullptr) {
      auto* piece = static_cast<Piece*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight_;
      complete_piece(*piece, res);
      cqe = nullptr;
      if (io_uring_peek_cqe(&ring_, &cqe) != 0) cqe = nullptr;
    }
  }

  void retire_finished() {
    if (!broken_.empty()) {
      // The ring is unusable: fail what has not been issued; pieces in flight cannot be
      // recovered, so their slices never finish and waiting for them would hang. Give up on them
      // too (the buffers stay referenced by nothing: the kernel owns none after a failed submit).
      for (auto& s : active_) {
        if (s->error.empty()) s->error = s->request->file->path().string() + ": " + broken_;
        s->in_flight = 0;
        s->cursor = s->end;
      }
      in_flight_ = 0;
      retry_.clear();
      free_.clear();
      for (Piece& p : pieces_) free_.push_back(&p);
    }
    for (auto it = active_.begin(); it != active_.end();) {
      if ((*it)->finished()) {
        engine_.finish_slice(*(*it)->request, (*it)->error);
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
  }

  EngineState& engine_;
  AioEngineOptions options_;
  io_uring ring_{};
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;                              // guarded by mutex_
  std::vector<std::unique_ptr<Slice>> incoming_;   // guarded by mutex_
  std::deque<std::unique_ptr<Slice>> active_;      // worker thread only, FIFO
  std::vector<Piece> pieces_;
  std::vector<Piece*> free_;
  std::vector<Piece*> retry_;
  int64_t in_flight_ = 0;
  std::string broken_;
};

}  // namespace

struct AioEngine::Impl : EngineState {
  std::vector<std::unique_ptr<AioWorker>> workers;
};

AioEngineOptions AioEngineOptions::from_config(const config::AioConfig& aio) {
  AioEngineOptions o;
  o.block_size = aio.block_size;
  o.queue_depth = aio.queue_depth;
  o.intra_op_parallelism = aio.intra_op_parallelism;
  o.single_submit = aio.single_submit;
  o.overlap_events = aio.overlap_events;
  return o;
}

AioEngine::AioEngine(const AioEngineOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {
  if (options.block_size <= 0 || options.block_size > kMaxBlockSize) {
    throw ConfigError("aio.block_size must be between 1 and " + std::to_string(kMaxBlockSize) +
                      " bytes per I/O request (Linux moves at most about 2 GiB per call), got " +
                      std::to_string(options.block_size));
  }
  if (options.queue_depth <= 0 || options.queue_depth > kMaxQueueDepth) {
    throw ConfigError("aio.queue_depth must be between 1 and " + std::to_string(kMaxQueueDepth) +
                      " (io_uring's ring limit), got " + std::to_string(options.queue_depth));
  }
  if (options.intra_op_parallelism <= 0 || options.intra_op_parallelism > kMaxWorkers) {
    throw ConfigError("aio.intra_op_parallelism (thread_count) must be between 1 and " +
                      std::to_string(kMaxWorkers) + ", got " + std::to_string(options.intra_op_parallelism));
  }
  for (int64_t i = 0; i < options.intra_op_parallelism; ++i) {
    impl_->workers.push_back(std::make_unique<AioWorker>(*impl_, options_));
  }
}

AioEngine::~AioEngine() {
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->done_cv.wait(lock, [&] {
      return std::all_of(impl_->requests.begin(), impl_->requests.end(),
                         [](const auto& entry) { return entry.second->slices_left == 0; });
    });
  }
  impl_->workers.clear();  // joins the threads, closes the rings
}

AioEngine::Ticket AioEngine::submit_read(const AioFile& file, int64_t offset, void* buffer, int64_t bytes) {
  return submit(file, offset, buffer, bytes, false);
}

AioEngine::Ticket AioEngine::submit_write(const AioFile& file, int64_t offset, const void* buffer,
                                          int64_t bytes) {
  // The buffer is only read; the request type is shared with reads.
  return submit(file, offset, const_cast<void*>(buffer), bytes, true);
}

AioEngine::Ticket AioEngine::submit(const AioFile& file, int64_t offset, void* buffer, int64_t bytes, bool write) {
  ZERO_CHECK(offset >= 0 && bytes >= 0, "aio request with offset " << offset << " and size " << bytes);
  ZERO_CHECK(buffer != nullptr || bytes == 0, "aio request without a buffer");
  int64_t piece = options_.block_size;
  if (file.direct()) {
    const int64_t a = file.alignment();
    const auto address = reinterpret_cast<uintptr_t>(buffer);
    ZERO_CHECK(offset % a == 0 && bytes % a == 0 && address % static_cast<uintptr_t>(a) == 0,
               "O_DIRECT request on " << file.path().string() << " is not aligned to " << a
                                      << " bytes: offset " << offset << ", size " << bytes
                                      << ", buffer address " << address);
    piece = round_up_bytes(piece, a);
  }
  auto request = std::make_shared<Request>();
  request->file = &file;
  request->write = write;
  request->buffer = static_cast<char*>(buffer);
  request->offset = offset;
  request->bytes = bytes;
  const int64_t pieces = (bytes + piece - 1) / piece;
  const int64_t workers = static_cast<int64_t>(impl_->workers.size());
  const int64_t slices = std::min(workers, pieces);
  Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    ticket = impl_->next_ticket++;
    request->slices_left = static_cast<int>(slices);
    impl_->requests.emplace(ticket, request);
  }
  // Each worker takes a contiguous run of pieces; single-piece requests rotate over the workers.
  for (int64_t k = 0; k < slices; ++k) {
    auto slice = std::make_unique<Slice>();
    slice->request = request;
    slice->begin = pieces * k / slices * piece;
    slice->end = std::min(bytes, pieces * (k + 1) / slices * piece);
    slice->cursor = slice->begin;
    slice->piece_bytes = piece;
    const auto worker = static_cast<size_t>((static_cast<int64_t>(ticket) + k) % workers);
    impl_->workers[worker]->enqueue(std::move(slice));
  }
  return ticket;
}

void AioEngine::wait(Ticket ticket) {
  std::string error;
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    auto it = impl_->requests.find(ticket);
    ZERO_CHECK(it != impl_->requests.end(), "aio ticket " << ticket << " is unknown or already waited for");
    std::shared_ptr<Request> request = it->second;
    impl_->done_cv.wait(lock, [&] { return request->slices_left == 0; });
    error = request->error;
    impl_->requests.erase(ticket);
  }
  if (!error.empty()) throw FileError(error);
}

void AioEngine::wait_all() {
  std::string error;
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->done_cv.wait(lock, [&] {
      return std::all_of(impl_->requests.begin(), impl_->requests.end(),
                         [](const auto& entry) { return entry.second->slices_left == 0; });
    });
    for (const auto& entry : impl_->requests) {
      if (error.empty()) error = entry.second->error;
    }
    impl_->requests.clear();
  }
  if (!error.empty()) throw FileError(error);
}

AioEngineStats AioEngine::stats() const {
  AioEngineStats s;
  s.bytes_read = impl_->bytes_read.load();
  s.bytes_written = impl_->bytes_written.load();
  s.pieces = impl_->pieces.load();
  s.submit_calls = impl_->submit_calls.load();
  return s;
}

}  // namespace zero::offload
