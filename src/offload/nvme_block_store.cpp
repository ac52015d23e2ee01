// NvmeBlockStore: the swap file, the staging buffers and their states.
#include "offload/nvme_block_store.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <system_error>

#include "core/check.h"
#include "core/error.h"
#include "offload/swap_checksum.h"

namespace zero::offload {
namespace {

// checksum_known_ values: no checksum (never written, or checksums off), a checksum of the last
// write, or the last write failed (the bytes on disk are not the ones zero.cpp meant to keep).
constexpr char kNoChecksum = 0;
constexpr char kChecksumKnown = 1;
constexpr char kWriteFailed = 2;

}  // namespace

NvmeBlockStore::NvmeBlockStore(const NvmeBlockStoreOptions& options, Allocator& staging_allocator)
    : options_(options), allocator_(staging_allocator), engine_(options.aio) {
  ZERO_CHECK(options.rank >= 0, "NvmeBlockStore rank " << options.rank);
  int64_t largest = 0;
  for (int64_t bytes : options.block_bytes) {
    ZERO_CHECK(bytes >= 0, "NvmeBlockStore block of " << bytes << " bytes");
    largest = std::max(largest, bytes);
  }
  ZERO_CHECK(options.buffer_count >= 1 && options.buffer_bytes >= largest,
             "NvmeBlockStore: " << options.buffer_count << " buffers of " << options.buffer_bytes
                                << " bytes for blocks up to " << largest << " bytes");
  folder_ = std::make_unique<SwapFolder>(options.nvme_path, options.area, options.rank, options.key);
  try {
    file_ = std::make_unique<AioFile>(folder_->directory() / options.file_name, AioFile::Mode::kCreate,
                                      options.warn);
    const int64_t alignment = file_->alignment();
    int64_t at = 0;
    for (int64_t bytes : options.block_bytes) {
      offsets_.push_back(at);
      at += round_up_bytes(bytes, alignment);
    }
    file_->resize(at);
    checksums_.assign(options.block_bytes.size(), 0);
    checksum_known_.assign(options.block_bytes.size(), 0);
    buffer_stride_ = round_up_bytes(std::max<int64_t>(options.buffer_bytes, 1), alignment);
    staging_allocation_ = static_cast<size_t>(buffer_stride_ * options.buffer_count + alignment);
    staging_ = allocator_.allocate(staging_allocation_, MemoryCategory::kParams);
    const auto base = reinterpret_cast<uintptr_t>(staging_);
    const auto a = static_cast<uintptr_t>(alignment);
    char* aligned = reinterpret_cast<char*>((base + a - 1) / a * a);
    buffers_.resize(static_cast<size_t>(options.buffer_count));
    for (size_t i = 0; i < buffers_.size(); ++i) {
      buffers_[i].data = aligned + static_cast<int64_t>(i) * buffer_stride_;
    }
  } catch (...) {
    std::error_code ec;
    if (file_) std::filesystem::remove(file_->path(), ec);
    file_.reset();
    folder_->release();
    throw;
  }
}

NvmeBlockStore::~NvmeBlockStore() {
  abandon_in_flight();
  allocator_.deallocate(staging_, staging_allocation_, MemoryCategory::kParams);
  std::error_code ec;
  std::filesystem::remove(file_->path(), ec);
  file_.reset();
  folder_->release();
}

void NvmeBlockStore::check_block(int64_t block) const {
  ZERO_CHECK(block >= 0 && block < block_count(),
             "NvmeBlockStore block " << block << " of " << block_count());
}

int64_t NvmeBlockStore::io_bytes(int64_t block) const {
  return round_up_bytes(options_.block_bytes[static_cast<size_t>(block)], file_->alignment());
}

NvmeBlockStore::Buffer* NvmeBlockStore::find(int64_t block, State state) {
  for (Buffer& b : buffers_) {
    if (b.block == block && b.state == state) return &b;
  }
  return nullptr;
}

NvmeBlockStore::Buffer* NvmeBlockStore::find_any(int64_t block) {
  for (State s : {State::kReading, State::kStaged, State::kAcquired}) {
    if (Buffer* b = find(block, s)) return b;
  }
  return nullptr;
}

void NvmeBlockStore::verify(const Buffer& buffer) const {
  const auto b = static_cast<size_t>(buffer.block);
  const int64_t bytes = io_bytes(buffer.block);
  if (checksum_known_[b] == kWriteFailed) {
    throw FileError(file_->path().string() + ": block " + std::to_string(buffer.block) + " (bytes " +
                    std::to_string(offset(buffer.block)) + " to " +
                    std::to_string(offset(buffer.block) + bytes) +
                    ") is lost: its last write failed (the error reported then), so the bytes on "
                    "disk are not the ones zero.cpp meant to keep; restart from the last checkpoint");
  }
  if (!options_.verify_checksums || checksum_known_[b] != kChecksumKnown) return;  // never written: zeros
  if (swap_checksum(buffer.data, bytes) != checksums_[b]) {
    throw FileError(file_->path().string() + ": block " + std::to_string(buffer.block) + " (bytes " +
                    std::to_string(offset(buffer.block)) + " to " +
                    std::to_string(offset(buffer.block) + bytes) +
                    ") changed on disk since zero.cpp wrote it (checksum mismatch): the swap file "
                    "was altered behind zero.cpp's back or the disk returned bad data, so the "
                    "swapped parameters are corrupt; restart from the last checkpoint");
  }
}

void NvmeBlockStore::complete(Buffer& buffer) {
  if (buffer.state != State::kReading && buffer.state != State::kWriting) return;
  const bool reading = buffer.state == State::kReading;
  try {
    engine_.wait(buffer.ticket);
    if (reading) verify(buffer);
  } catch (...) {
    if (!reading) checksum_known_[static_cast<size_t>(buffer.block)] = kWriteFailed;
    buffer.state = State::kFree;
    buffer.block = -1;
    throw;
  }
  const int64_t bytes = options_.block_bytes[static_cast<size_t>(buffer.block)];
  if (reading) {
    buffer.state = State::kStaged;
    ++stats_.blocks_read;
    stats_.bytes_read += bytes;
  } else {
    buffer.state = State::kFree;
    buffer.block = -1;
    ++stats_.blocks_written;
    stats_.bytes_written += bytes;
  }
  buffer.since = ++clock_;
}

NvmeBlockStore::Buffer& NvmeBlockStore::take_buffer() {
  for (Buffer& b : buffers_) {
    if (b.state == State::kFree) return b;
  }
  // Read-ahead is issued in order of use, so the newest prefetched block is needed last: drop
  // it first (staged before in flight); a write in flight is waited for before that.
  auto newest = [&](State state) {
    Buffer* found = nullptr;
    for (Buffer& b : buffers_) {
      if (b.state == state && (found == nullptr || b.since > found->since)) found = &b;
    }
    return found;
  };
  Buffer* victim = newest(State::kStaged);
  if (victim == nullptr) {
    for (Buffer& b : buffers_) {
      if (b.state == State::kWriting && (victim == nullptr || b.since < victim->since)) victim = &b;
    }
  }
  if (victim == nullptr) victim = newest(State::kReading);
  ZERO_CHECK(victim != nullptr,
             "NvmeBlockStore: all " << buffers_.size() << " staging buffers are acquired");
  complete(*victim);  // a read or write finishes first: its buffer must be quiet
  victim->state = State::kFree;
  victim->block = -1;
  return *victim;
}

void NvmeBlockStore::issue_read(Buffer& buffer, int64_t block) {
  // A write of this block in flight must land before the read is issued: io_uring does not
  // order separate requests.
  if (Buffer* pending = find(block, State::kWriting)) complete(*pending);
  buffer.state = State::kReading;
  buffer.block = block;
  buffer.since = ++clock_;
  try {
    buffer.ticket = engine_.submit_read(*file_, offset(block), buffer.data, io_bytes(block));
  } catch (...) {
    buffer.state = State::kFree;
    buffer.block = -1;
    throw;
  }
}

bool NvmeBlockStore::prefetch(int64_t block) {
  check_block(block);
  if (find_any(block) != nullptr) return true;
  // Read-ahead never takes the last free buffer: the next acquire() needs one without dropping
  // a block read ahead for it.
  Buffer* free_buffer = nullptr;
  int free_count = 0;
  for (Buffer& b : buffers_) {
    if (b.state != State::kFree) continue;
    ++free_count;
    if (free_buffer == nullptr) free_buffer = &b;
  }
  if (free_count < 2) return false;
  issue_read(*free_buffer, block);
  return true;
}

const void* NvmeBlockStore::acquire(int64_t block) {
  check_block(block);
  Buffer* buffer = find_any(block);
  try {
    if (buffer != nullptr) {
      ZERO_CHECK(buffer->state != State::kAcquired, "NvmeBlockStore block " << block << " acquired twice");
      ++stats_.prefetch_hits;
    } else {
      buffer = &take_buffer();
      issue_read(*buffer, block);
    }
    complete(*buffer);
  } catch (...) {
    abandon_in_flight();
    throw;
  }
  buffer->state = State::kAcquired;
  return buffer->data;
}

void NvmeBlockStore::release(int64_t block) {
  Buffer* buffer = find(block, State::kAcquired);
  ZERO_CHECK(buffer != nullptr, "NvmeBlockStore block " << block << " released but not acquired");
  buffer->state = State::kFree;
  buffer->block = -1;
}

void NvmeBlockStore::write(int64_t block, const void* source) {
  void* buffer = fill_for_write(block);
  const auto bytes = static_cast<size_t>(options_.block_bytes[static_cast<size_t>(block)]);
  if (bytes > 0) std::memcpy(buffer, source, bytes);  // an empty block may come without data
  submit_write(block);
}

void* NvmeBlockStore::fill_for_write(int64_t block) {
  check_block(block);
  // A staged copy would be stale after this write; one acquired or being filled is the caller's
  // error.
  for (Buffer& b : buffers_) {
    if (b.block != block) continue;
    ZERO_CHECK(b.state != State::kAcquired && b.state != State::kFilling,
               "NvmeBlockStore block " << block << " written while acquired");
    if (b.state == State::kReading) {
      // A read ahead of the old bytes: they are being replaced, so its buffer only has to go
      // quiet; a damaged or short old copy is no error (the write heals the block).
      try {
        engine_.wait(b.ticket);
      } catch (const Error&) {
      }
    } else {
      try {
        complete(b);
      } catch (...) {
        abandon_in_flight();
        throw;
      }
    }
    b.state = State::kFree;
    b.block = -1;
  }
  Buffer* buffer = nullptr;
  try {
    buffer = &take_buffer();
  } catch (...) {
    abandon_in_flight();
    throw;
  }
  buffer->state = State::kFilling;
  buffer->block = block;
  return buffer->data;
}

void NvmeBlockStore::submit_write(int64_t block) {
  Buffer* buffer = find(block, State::kFilling);
  ZERO_CHECK(buffer != nullptr, "NvmeBlockStore submit_write of block " << block << " without fill_for_write");
  const int64_t bytes = options_.block_bytes[static_cast<size_t>(block)];
  const int64_t padded = io_bytes(block);
  std::memset(buffer->data + bytes, 0, static_cast<size_t>(padded - bytes));
  if (options_.verify_checksums) {
    checksums_[static_cast<size_t>(block)] = swap_checksum(buffer->data, padded);
  }
  checksum_known_[static_cast<size_t>(block)] = options_.verify_checksums ? kChecksumKnown : kNoChecksum;
  buffer->state = State::kWriting;
  buffer->since = ++clock_;
  try {
    buffer->ticket = engine_.submit_write(*file_, offset(block), buffer->data, padded);
  } catch (...) {
    checksum_known_[static_cast<size_t>(block)] = kWriteFailed;
    buffer->state = State::kFree;
    buffer->block = -1;
    abandon_in_flight();
    throw;
  }
}

void NvmeBlockStore::flush() {
  std::exception_ptr first;
  for (Buffer& b : buffers_) {
    if (b.state != State::kWriting) continue;
    try {
      complete(b);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void NvmeBlockStore::abandon_in_flight() noexcept {
  // The error being reported is the first; later ones are dropped. Staged blocks stay valid.
  for (Buffer& b : buffers_) {
    if (b.state != State::kReading && b.state != State::kWriting) continue;
    try {
      engine_.wait(b.ticket);
    } catch (...) {
      if (b.state == State::kWriting) checksum_known_[static_cast<size_t>(b.block)] = kWriteFailed;
    }
    b.state = State::kFree;
    b.block = -1;
  }
}

}  // namespace zero::offload
