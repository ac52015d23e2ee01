// CachingAllocator: blocks come back from the cache for repeated sizes, accounting separates what
// tensors use (allocated) from what the cache holds (reserved), running out of memory gives
// cached blocks back before failing, and with streams a block is reused only by its home stream,
// which waits for the marker of a foreign stream that freed it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zero {
namespace {

// Host memory with a byte budget, counting calls (a stand-in for cudaMalloc).
class BudgetMemory final : public RawMemory {
 public:
  explicit BudgetMemory(size_t budget) : budget_(budget) {}
  Device device() const override { return Device::simulated(0); }
  void* allocate(size_t bytes) override {
    if (used_ + bytes > budget_) return nullptr;
    used_ += bytes;
    ++allocations;
    return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  }
  void free(void* ptr, size_t bytes) override {
    used_ -= bytes;
    ++frees;
    std::free(ptr);
  }
  int allocations = 0;
  int frees = 0;

 private:
  size_t budget_;
  size_t used_ = 0;
};

TEST(CachingAllocator, SizeClassesBoundTheRoundingWaste) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(4096), 4096u);
  EXPECT_EQ(CachingAllocator::size_class(4097), 5120u);
  EXPECT_EQ(CachingAllocator::size_class(8192), 8192u);
  EXPECT_EQ(CachingAllocator::size_class(8193), 10240u);
  for (size_t bytes = 1; bytes < (size_t{1} << 22); bytes = bytes * 3 / 2 + 1) {
    const size_t block = CachingAllocator::size_class(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_LE(block, bytes + bytes / 4 + 512) << bytes;
  }
}

TEST(CachingAllocator, RepeatedSizesReuseBlocks) {
  BudgetMemory memory(1 << 24);
  CachingAllocator allocator(memory);
  for (int step = 0; step < 5; ++step) {
    std::vector<Tensor> live;
    for (int64_t n : {100, 1000, 10000, 1000}) {
      live.push_back(Tensor::empty(allocator, {n}, DType::kF32, MemoryCategory::kActivations));
    }
  }
  EXPECT_EQ(memory.allocations, 4);  // the first step's four blocks, reused ever after
  const CacheStats stats = allocator.cache_stats();
  EXPECT_EQ(stats.raw_allocations, 4);
  EXPECT_EQ(stats.cache_hits, 16);
  EXPECT_EQ(allocator.stats().total_live_bytes, 0u);
  EXPECT_EQ(allocator.stats().total_peak_bytes, (100u + 1000u + 10000u + 1000u) * 4u);
  EXPECT_EQ(stats.cached_bytes, stats.reserved_bytes);
  EXPECT_GE(stats.reserved_bytes, allocator.stats().total_peak_bytes);
  allocator.empty_cache();
  EXPECT_EQ(allocator.cache_stats().reserved_bytes, 0u);
  EXPECT_EQ(memory.frees, 4);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheFirst) {
  BudgetMemory memory(1 << 20);
  CachingAllocator allocator(memory);
  { Tensor big = Tensor::empty(allocator, {200000}, DType::kF32, MemoryCategory::kActivations); }
  // A 917504-byte block cached; a 960 KB request (a 1 MiB block) fits only once it is given back.
  Tensor other = Tensor::empty(allocator, {240000}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_EQ(memory.frees, 1);
  // Beyond the budget: a clear error naming the device and the category.
  try {
    Tensor too_big = Tensor::empty(allocator, {300000}, DType::kF32, MemoryCategory::kParams);
    FAIL() << "allocated past the budget";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of memory on sim:0"), std::string::npos) << message;
    EXPECT_NE(message.find("params"), std::string::npos) << message;
  }
}

// Streams as a script: the test picks the current stream; markers are numbered, and every mark
// and wait is logged ("mark 0 #1", "wait 1 #1").
class ScriptedStreams final : public CachingAllocator::Streams {
 public:
  int current_stream() const override { return current; }
  std::shared_ptr<void> mark(int stream) override {
    const int id = ++markers_;
    log.push_back("mark " + std::to_string(stream) + " #" + std::to_string(id));
    return std::make_shared<int>(id);
  }
  void wait(int stream, const std::shared_ptr<void>& marker) override {
    log.push_back("wait " + std::to_string(stream) + " #" +
                  std::to_string(*static_cast<const int*>(marker.get())));
  }
  int current = 0;
  std::vector<std::string> log;

 private:
  int markers_ = 0;
};

TEST(CachingAllocatorStreams, ABlockIsReusedOnlyByItsHomeStream) {
  BudgetMemory memory(1 << 24);
  ScriptedStreams streams;
  CachingAllocator allocator(memory);
  allocator.set_streams(&streams);
  streams.current = 1;
  { Tensor upload = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations); }
  streams.current = 0;
  { Tensor compute = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations); }
  EXPECT_EQ(memory.allocations, 2) << "stream 0 took stream 1's block";
  streams.current = 1;
  { Tensor again = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations); }
  EXPECT_EQ(memory.allocations, 2);
  EXPECT_EQ(allocator.cache_stats().cache_hits, 1);
  EXPECT_TRUE(streams.log.empty()) << "same-stream frees need no marker";
}

TEST(CachingAllocatorStreams, AForeignFreeMakesTheNextUserWaitForTheFreeingStream) {
  BudgetMemory memory(1 << 24);
  ScriptedStreams streams;
  CachingAllocator allocator(memory);
  allocator.set_streams(&streams);
  streams.current = 2;  // the transfer stream uploads a batch ...
  Tensor batch = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations);
  streams.current = 0;  // ... the compute stream reads it and frees it
  batch = Tensor();
  EXPECT_EQ(streams.log, std::vector<std::string>{"mark 0 #1"});
  EXPECT_EQ(allocator.cache_stats().cross_stream_frees, 1);
  streams.current = 2;  // the next upload gets the block once compute's reads are done
  Tensor next = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations);
  EXPECT_EQ(streams.log, (std::vector<std::string>{"mark 0 #1", "wait 2 #1"}));
  EXPECT_EQ(memory.allocations, 1);
  next = Tensor();  // freed on its home stream: no marker
  { Tensor last = Tensor::empty(allocator, {1000}, DType::kF32, MemoryCategory::kActivations); }
  EXPECT_EQ(streams.log.size(), 2u);
}

TEST(CachingAllocatorStreams, StreamsAreSetBeforeTheFirstBlock) {
  BudgetMemory memory(1 << 24);
  ScriptedStreams streams;
  CachingAllocator allocator(memory);
  { Tensor early = Tensor::empty(allocator, {10}, DType::kF32, MemoryCategory::kActivations); }
  EXPECT_THROW(allocator.set_streams(&streams), Error);
}

}  // namespace
}  // namespace zero
