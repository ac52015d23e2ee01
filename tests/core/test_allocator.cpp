// Tests for core/allocator.h and core/storage.h: live and peak bytes per category follow
// Tensor lifetimes (views keep storage alive), peak windows, alignment, failure messages, and
// concurrent use. Exact numbers come from private CpuAllocator instances; the process-wide
// cpu_allocator() is only checked through deltas, since other code may hold memory in it.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace zero {
namespace {

constexpr MemoryCategory kAllCategories[] = {
    MemoryCategory::kParams,      MemoryCategory::kGrads, MemoryCategory::kOptimizer,
    MemoryCategory::kActivations, MemoryCategory::kComm,  MemoryCategory::kWorkspace,
    MemoryCategory::kOther};

// An allocator whose backing store always fails, to see the out-of-memory report.
class FailingAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cuda(3); }

 protected:
  void* raw_allocate(size_t /*bytes*/) override { return nullptr; }
  void raw_deallocate(void* /*ptr*/, size_t /*bytes*/) override {}
};

// Records the sizes the accounting layer asks its backing store for.
class RecordingAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  std::vector<size_t> raw_requests;
  std::vector<size_t> raw_releases;

 protected:
  void* raw_allocate(size_t bytes) override {
    raw_requests.push_back(bytes);
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void raw_deallocate(void* ptr, size_t bytes) override {
    raw_releases.push_back(bytes);
    std::free(ptr);
  }
};

TEST(MemoryCategory, NamesAndCount) {
  EXPECT_EQ(std::size(kAllCategories), kNumMemoryCategories);
  EXPECT_STREQ(memory_category_name(MemoryCategory::kParams), "params");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kGrads), "grads");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kOptimizer), "optimizer");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kActivations), "activations");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kComm), "comm");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kWorkspace), "workspace");
  EXPECT_STREQ(memory_category_name(MemoryCategory::kOther), "other");
  EXPECT_EQ(static_cast<size_t>(MemoryCategory::kOther) + 1, kNumMemoryCategories);
}

TEST(Allocator, FreshAllocatorHasNothingLive) {
  CpuAllocator alloc;
  const MemoryStats s = alloc.stats();
  for (MemoryCategory c : kAllCategories) {
    EXPECT_EQ(s.live(c), 0u);
    EXPECT_EQ(s.peak(c), 0u);
  }
  EXPECT_EQ(s.total_live_bytes, 0u);
  EXPECT_EQ(s.total_peak_bytes, 0u);
  EXPECT_EQ(alloc.device(), Device::cpu());
}

TEST(Allocator, LiveAndPeakFollowTensorLifetimes) {
  CpuAllocator alloc;
  {
    Tensor a = Tensor::empty(alloc, {10}, DType::kF32, MemoryCategory::kParams);
    MemoryStats s = alloc.stats();
    EXPECT_EQ(s.live(MemoryCategory::kParams), 40u);
    EXPECT_EQ(s.peak(MemoryCategory::kParams), 40u);
    EXPECT_EQ(s.live(MemoryCategory::kGrads), 0u);
    EXPECT_EQ(s.total_live_bytes, 40u);
    {
      Tensor b = Tensor::empty(alloc, {4, 4}, DType::kF64, MemoryCategory::kGrads);
      Tensor b2 = Tensor::empty(alloc, {3}, DType::kBF16, MemoryCategory::kGrads);
      s = alloc.stats();
      EXPECT_EQ(s.live(MemoryCategory::kGrads), 128u + 6u);
      EXPECT_EQ(s.total_live_bytes, 40u + 134u);
      EXPECT_EQ(s.total_peak_bytes, 174u);
    }
    s = alloc.stats();
    EXPECT_EQ(s.live(MemoryCategory::kGrads), 0u);
    EXPECT_EQ(s.peak(MemoryCategory::kGrads), 134u);  // peaks remember
    EXPECT_EQ(s.live(MemoryCategory::kParams), 40u);
    EXPECT_EQ(s.total_live_bytes, 40u);
    EXPECT_EQ(s.total_peak_bytes, 174u);
  }
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.total_live_bytes, 0u);
  for (MemoryCategory c : kAllCategories) EXPECT_EQ(s.live(c), 0u);
  EXPECT_EQ(s.peak(MemoryCategory::kParams), 40u);
  EXPECT_EQ(s.total_peak_bytes, 174u);
  EXPECT_EQ(s.peak(MemoryCategory::kOptimizer), 0u);
}

TEST(Allocator, ViewsKeepStorageAliveUntilTheLastOneGoes) {
  CpuAllocator alloc;
  Tensor v1;
  Tensor v2;
  {
    Tensor t = Tensor::empty(alloc, {8, 4}, DType::kF32, MemoryCategory::kActivations);
    v1 = t.narrow(1, 1, 2);
    v2 = t.slice_rows(2, 3).reshape({4});
  }
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kActivations), 128u);  // the whole storage
  v1 = Tensor();
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kActivations), 128u);
  v2 = Tensor();
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kActivations), 0u);
  EXPECT_EQ(alloc.stats().total_live_bytes, 0u);
}

TEST(Allocator, ResetPeaksStartsANewWindowFromLiveValues) {
  CpuAllocator alloc;
  Tensor keep = Tensor::empty(alloc, {25}, DType::kF32, MemoryCategory::kOptimizer);  // 100 B
  { Tensor tmp = Tensor::empty(alloc, {100}, DType::kF32, MemoryCategory::kWorkspace); }
  { Tensor tmp = Tensor::empty(alloc, {50}, DType::kF32, MemoryCategory::kOptimizer); }
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), 400u);
  EXPECT_EQ(s.peak(MemoryCategory::kOptimizer), 300u);
  EXPECT_EQ(s.total_peak_bytes, 500u);

  alloc.reset_peaks();
  s = alloc.stats();
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), 0u);
  EXPECT_EQ(s.peak(MemoryCategory::kOptimizer), 100u);  // what is still live
  EXPECT_EQ(s.total_peak_bytes, 100u);
  EXPECT_EQ(s.live(MemoryCategory::kOptimizer), 100u);

  { Tensor tmp = Tensor::empty(alloc, {10}, DType::kF32, MemoryCategory::kWorkspace); }
  s = alloc.stats();
  EXPECT_EQ(s.peak(MemoryCategory::kWorkspace), 40u);
  EXPECT_EQ(s.total_peak_bytes, 140u);
}

TEST(Allocator, TotalPeakIsTheSimultaneousMaximumNotTheSumOfPeaks) {
  CpuAllocator alloc;
  { Tensor a = Tensor::empty(alloc, {100}, DType::kU8, MemoryCategory::kParams); }
  { Tensor b = Tensor::empty(alloc, {80}, DType::kU8, MemoryCategory::kGrads); }
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.peak(MemoryCategory::kParams), 100u);
  EXPECT_EQ(s.peak(MemoryCategory::kGrads), 80u);
  EXPECT_EQ(s.total_peak_bytes, 100u);
  {
    Tensor a = Tensor::empty(alloc, {70}, DType::kU8, MemoryCategory::kParams);
    Tensor b = Tensor::empty(alloc, {60}, DType::kU8, MemoryCategory::kGrads);
  }
  s = alloc.stats();
  EXPECT_EQ(s.total_peak_bytes, 130u);
  EXPECT_EQ(s.peak(MemoryCategory::kParams), 100u);
}

TEST(Allocator, ProcessWideAllocatorAccountsHostTensors) {
  CpuAllocator& alloc = cpu_allocator();
  EXPECT_EQ(&alloc, &cpu_allocator());
  const MemoryStats before = alloc.stats();
  {
    Tensor t = Tensor::zeros_host({16, 16}, DType::kF32, MemoryCategory::kComm);
    const MemoryStats during = alloc.stats();
    EXPECT_EQ(during.live(MemoryCategory::kComm) - before.live(MemoryCategory::kComm), 1024u);
    EXPECT_EQ(during.total_live_bytes - before.total_live_bytes, 1024u);
    EXPECT_GE(during.peak(MemoryCategory::kComm), during.live(MemoryCategory::kComm));
    EXPECT_GE(during.total_peak_bytes, during.total_live_bytes);
    EXPECT_EQ(t.storage()->category(), MemoryCategory::kComm);
  }
  const MemoryStats after = alloc.stats();
  EXPECT_EQ(after.live(MemoryCategory::kComm), before.live(MemoryCategory::kComm));
  EXPECT_EQ(after.total_live_bytes, before.total_live_bytes);
}

TEST(Allocator, AllocationsAre64ByteAligned) {
  CpuAllocator alloc;
  std::vector<Tensor> tensors;
  for (int64_t n = 0; n < 300; n += 7) {
    tensors.push_back(Tensor::empty(alloc, {n}, DType::kU8, MemoryCategory::kOther));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensors.back().raw_data()) % 64, 0u) << n;
  }
  for (size_t bytes : {1u, 3u, 63u, 64u, 65u, 1000u, 4097u}) {
    void* p = cpu_allocator().allocate(bytes, MemoryCategory::kOther);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    cpu_allocator().deallocate(p, bytes, MemoryCategory::kOther);
  }
}

TEST(Allocator, ZeroByteRequestsAreValidAndAccountNothing) {
  RecordingAllocator alloc;
  void* p = alloc.allocate(0, MemoryCategory::kParams);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(alloc.stats().total_live_bytes, 0u);
  alloc.deallocate(p, 0, MemoryCategory::kParams);
  ASSERT_EQ(alloc.raw_requests.size(), 1u);
  EXPECT_EQ(alloc.raw_requests[0], 1u);  // never a zero-size request to the backing store
  ASSERT_EQ(alloc.raw_releases.size(), 1u);
  EXPECT_EQ(alloc.raw_releases[0], 1u);
  alloc.deallocate(nullptr, 123, MemoryCategory::kParams);  // a no-op
  EXPECT_EQ(alloc.raw_releases.size(), 1u);

  Tensor empty = Tensor::empty(alloc, {0, 5}, DType::kF32, MemoryCategory::kGrads);
  EXPECT_NE(empty.raw_data(), nullptr);
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kGrads), 0u);
}

TEST(Allocator, StorageReturnsExactlyWhatItTook) {
  RecordingAllocator alloc;
  {
    Storage storage(alloc, 100, MemoryCategory::kWorkspace);
    EXPECT_EQ(storage.bytes(), 100u);
    EXPECT_EQ(storage.category(), MemoryCategory::kWorkspace);
    EXPECT_EQ(storage.device(), Device::cpu());
    EXPECT_EQ(alloc.stats().live(MemoryCategory::kWorkspace), 100u);
  }
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kWorkspace), 0u);
  EXPECT_EQ(alloc.raw_requests, std::vector<size_t>{100});
  EXPECT_EQ(alloc.raw_releases, std::vector<size_t>{100});
}

TEST(Allocator, OverFreeIsAnInternalError) {
  CpuAllocator alloc;
  void* p = alloc.allocate(64, MemoryCategory::kGrads);
  EXPECT_THROW(alloc.deallocate(p, 128, MemoryCategory::kGrads), InternalError);
  EXPECT_THROW(alloc.deallocate(p, 64, MemoryCategory::kParams), InternalError);  // wrong category
  EXPECT_EQ(alloc.stats().live(MemoryCategory::kGrads), 64u);  // the failed frees changed nothing
  alloc.deallocate(p, 64, MemoryCategory::kGrads);
  EXPECT_EQ(alloc.stats().total_live_bytes, 0u);
}

TEST(Allocator, OutOfMemoryNamesDeviceRequestAndCategory) {
  FailingAllocator alloc;
  try {
    alloc.allocate(12345, MemoryCategory::kOptimizer);
    FAIL() << "expected an exception";
  } catch (const InternalError&) {
    FAIL() << "out of memory is not an internal error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda:3"), std::string::npos) << message;
    EXPECT_NE(message.find("12345"), std::string::npos) << message;
    EXPECT_NE(message.find("optimizer"), std::string::npos) << message;
  }
  EXPECT_EQ(alloc.stats().total_live_bytes, 0u);  // nothing accounted for the failure
  EXPECT_EQ(alloc.stats().total_peak_bytes, 0u);
  EXPECT_THROW(Tensor::empty(alloc, {4}, DType::kF32, MemoryCategory::kParams), Error);
}

// Several threads allocate and free concurrently (through Tensors and directly) while another
// reads statistics and resets peaks; afterwards every live count is back where it started.
void hammer(Allocator& alloc, int threads, int iterations) {
  const MemoryStats before = alloc.stats();
  std::atomic<bool> stop{false};
  std::thread observer([&] {
    while (!stop.load()) {
      const MemoryStats s = alloc.stats();
      size_t sum = 0;
      for (size_t live : s.live_bytes) sum += live;
      EXPECT_EQ(sum, s.total_live_bytes);  // a consistent snapshot
      EXPECT_GE(s.total_peak_bytes, s.total_live_bytes);
      alloc.reset_peaks();
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&alloc, w, iterations] {
      std::vector<Tensor> held;
      for (int i = 0; i < iterations; ++i) {
        const auto category = kAllCategories[static_cast<size_t>(i + w) % kNumMemoryCategories];
        const int64_t n = 1 + (i * 37 + w * 11) % 500;
        held.push_back(Tensor::empty(alloc, {n}, DType::kF32, category));
        if (held.size() > 8) held.erase(held.begin() + (i % 8));
        void* p = alloc.allocate(static_cast<size_t>(n), category);
        alloc.deallocate(p, static_cast<size_t>(n), category);
      }
    });
  }
  for (auto& t : workers) t.join();
  stop.store(true);
  observer.join();
  const MemoryStats after = alloc.stats();
  for (MemoryCategory c : kAllCategories) {
    EXPECT_EQ(after.live(c), before.live(c)) << memory_category_name(c);
  }
  EXPECT_EQ(after.total_live_bytes, before.total_live_bytes);
}

TEST(Allocator, ConcurrentUseOfAPrivateAllocator) {
  CpuAllocator alloc;
  hammer(alloc, 8, 3000);
  EXPECT_EQ(alloc.stats().total_live_bytes, 0u);
}

TEST(Allocator, ConcurrentUseOfTheProcessWideAllocator) { hammer(cpu_allocator(), 8, 2000); }

}  // namespace
}  // namespace zero
