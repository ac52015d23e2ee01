// sharding::PartitionStore, the tiers of ZeRO-3's parameter partition: device, host (pinned and
// pageable) and NVMe (nothing, part or all of it kept in host memory). Every tier stores the same
// bits: write() rounds to the stored dtype as the backend's copy does, read() gives back what was
// written for any run of units, write_from_host() equals write(); placement() says where the
// bytes are and the allocators agree; NVMe buffers too small for a shard are a ConfigError.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/allocator.h"
#include "core/error.h"
#include "engine/zero_harness.h"
#include "offload/aio_file.h"
#include "sharding/partition_layout.h"
#include "sharding/partition_store.h"

namespace zero::sharding {
namespace {
using config::OffloadDevice;

enum class Resident { kNone, kPart, kAll };  // NVMe: the units kept in host memory

struct Tier {
  std::string name;
  OffloadDevice device;
  bool pin = false;
  Resident resident = Resident::kNone;
};

const std::vector<Tier>& tiers() {
  static const std::vector<Tier> all = {
      {"device", OffloadDevice::kNone},
      {"host_pinned", OffloadDevice::kCpu, true},
      {"host_pageable", OffloadDevice::kCpu, false},
      {"nvme_all_swapped", OffloadDevice::kNvme, true, Resident::kNone},
      {"nvme_part_in_cpu", OffloadDevice::kNvme, false, Resident::kPart},
      {"nvme_all_in_cpu", OffloadDevice::kNvme, true, Resident::kAll},
  };
  return all;
}

// A fresh folder for the swap files, removed with everything in it.
class SwapDir {
 public:
  SwapDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("zero_partition_store_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~SwapDir() { std::filesystem::remove_all(path_); }
  SwapDir(const SwapDir&) = delete;
  SwapDir& operator=(const SwapDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// max_in_cpu that keeps the first half of the units (whole) in host memory.
int64_t half_of(const PartitionLayout& layout) {
  const UnitPartition& last_kept = layout.unit(layout.units().size() / 2 - 1);
  return last_kept.partition_offset + last_kept.shard_numel + 7;  // not a unit boundary
}

PartitionStoreOptions options_for(const Tier& tier, const PartitionLayout& layout, const SwapDir& dir) {
  PartitionStoreOptions o;
  o.offload.device = tier.device;
  o.offload.pin_memory = tier.pin;
  if (tier.device == OffloadDevice::kNvme) {
    o.offload.nvme_path = dir.path().string();
    o.offload.buffer_count = 2;  // fewer buffers than swapped units
    o.offload.buffer_size = 10'000;
    o.offload.max_in_cpu = tier.resident == Resident::kNone   ? 0
                           : tier.resident == Resident::kPart ? half_of(layout)
                                                              : layout.partition_numel();
  }
  o.aio.block_size = 4096;
  return o;
}

// Partition values that bf16 cannot hold exactly, with exact halfway cases (ties to even) and
// signed zeros, infinities and subnormals among them.
std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = 2463534242u + static_cast<uint32_t>(seed);
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    float f = static_cast<float>(static_cast<int32_t>(x)) * 1e-9f;
    switch (i % 11) {
      case 3: f = 1.0f + std::ldexp(1.0f, -8); break;                 // tie: rounds down to 1
      case 5: f = 1.0f + 3 * std::ldexp(1.0f, -8); break;             // tie: rounds up
      case 7: f = -0.0f; break;
      case 9: f = std::ldexp(1.0f, -140) * static_cast<float>(i % 5); break;  // subnormal
      case 10: f = i % 2 ? INFINITY : -INFINITY; break;
      default: break;
    }
    v[static_cast<size_t>(i)] = f;
  }
  return v;
}

// `host` f32 values as a device tensor.
Tensor to_device(backend::Backend& backend, const std::vector<float>& host) {
  Tensor t = backend.empty({static_cast<int64_t>(host.size())}, DType::kF32, MemoryCategory::kComm);
  backend.copy_from_host(t, host.data());
  return t;
}

// The bytes of a device tensor.
std::vector<char> bytes_of(backend::Backend& backend, const Tensor& t) {
  std::vector<char> out(t.nbytes());
  backend.copy_to_host(out.data(), t);
  return out;
}

// The stored bits of `host` in `dtype`, as the backend's copy rounds them.
std::vector<char> stored_bits(backend::Backend& backend, const std::vector<float>& host, DType dtype) {
  const Tensor f32 = to_device(backend, host);
  Tensor narrow = backend.empty({f32.numel()}, dtype, MemoryCategory::kComm);
  backend.copy(narrow, f32);
  return bytes_of(backend, narrow);
}

std::vector<char> slice(const std::vector<char>& all, int64_t begin, int64_t end, DType dtype) {
  const auto e = static_cast<int64_t>(dtype_size(dtype));
  return std::vector<char>(all.begin() + begin * e, all.begin() + end * e);
}

// Every run [first, last] of units reads back its part of `expected` (the whole partition).
void expect_reads(backend::Backend& backend, PartitionStore& store, const std::vector<char>& expected,
                  const std::string& label) {
  const PartitionLayout& layout = store.layout();
  const size_t units = layout.units().size();
  for (size_t first = 0; first < units; ++first) {
    for (size_t last = first; last < units; ++last) {
      const Tensor got = store.read(first, last);
      ASSERT_EQ(got.dtype(), store.dtype());
      const int64_t begin = layout.unit(first).partition_offset;
      const int64_t end = layout.unit(last).partition_offset + layout.unit(last).shard_numel;
      ASSERT_EQ(got.numel(), end - begin);
      ASSERT_EQ(bytes_of(backend, got), slice(expected, begin, end, store.dtype()))
          << label << ": units " << first << ".." << last;
    }
  }
}

struct LayoutCase {
  int world;
  int rank;
};

class PartitionStoreTiers : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(PartitionStoreTiers, EveryTierStoresTheSameBits) {
  const LayoutCase shape = GetParam();
  backend::CpuBackend cpu;
  backend::SimulatedDeviceBackend sim;
  for (backend::Backend* backend : {static_cast<backend::Backend*>(&cpu), static_cast<backend::Backend*>(&sim)}) {
    auto model = engine::zero_test::small_model("llama", *backend);
    const PartitionLayout layout(*model, shape.world, shape.rank);
    const size_t units = layout.units().size();
    ASSERT_GE(units, 4u);
    const int64_t n = layout.partition_numel();
    for (const DType dtype : {DType::kBF16, DType::kF32}) {
      const std::vector<float> first_values = values(n, 1);
      const std::vector<float> second_values = values(n, 2);
      const std::vector<char> first_bits = stored_bits(*backend, first_values, dtype);
      const std::vector<char> second_bits = stored_bits(*backend, second_values, dtype);
      if (dtype == DType::kBF16) {  // the reference rounds halfway cases to even
        uint16_t tie_down = 0, tie_up = 0;
        std::memcpy(&tie_down, first_bits.data() + 2 * 3, 2);
        std::memcpy(&tie_up, first_bits.data() + 2 * 5, 2);
        EXPECT_EQ(tie_down, 0x3F80);
        EXPECT_EQ(tie_up, 0x3F82);
      }
      for (const Tier& tier : tiers()) {
        const std::string label = tier.name + " " + dtype_name(dtype) + " on " +
                                  (backend == &cpu ? "cpu" : "sim");
        SwapDir dir;
        auto store = make_partition_store(*backend, layout, dtype, options_for(tier, layout, dir));
        EXPECT_EQ(store->tier(), tier.device);
        EXPECT_EQ(store->dtype(), dtype);
        // Zero-filled at the start.
        expect_reads(*backend, *store, std::vector<char>(static_cast<size_t>(n) * dtype_size(dtype), 0), label);
        // The whole partition in one write (f32 values rounded on the way).
        store->write(0, units - 1, to_device(*backend, first_values));
        expect_reads(*backend, *store, first_bits, label + " after write");
        // A run of units in the middle: the others keep their bytes.
        const int64_t begin = layout.unit(1).partition_offset;
        const int64_t end = layout.unit(2).partition_offset + layout.unit(2).shard_numel;
        const std::vector<float> middle(second_values.begin() + begin, second_values.begin() + end);
        store->write(1, 2, to_device(*backend, middle));
        std::vector<char> mixed = first_bits;
        const auto e = static_cast<int64_t>(dtype_size(dtype));
        std::copy(second_bits.begin() + begin * e, second_bits.begin() + end * e, mixed.begin() + begin * e);
        expect_reads(*backend, *store, mixed, label + " after a partial write");
        // Values already in the stored dtype are written as they are.
        store->write(0, units - 1, store->read(0, units - 1));
        expect_reads(*backend, *store, mixed, label + " after writing its own read");
        // write_from_host: the stored dtype's bits from host memory, equal to write().
        Tensor host = Tensor::zeros_host({n}, dtype);
        std::memcpy(host.raw_data(), second_bits.data(), second_bits.size());
        store->write_from_host(0, layout.units().size() - 1, host);
        expect_reads(*backend, *store, second_bits, label + " after write_from_host");
        // Read-ahead is only a hint: reads after it are the same.
        for (size_t u = 0; u < units; ++u) store->prefetch(u);
        expect_reads(*backend, *store, second_bits, label + " after prefetch");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PartitionStoreTiers, ::testing::Values(LayoutCase{1, 0}, LayoutCase{3, 1}),
                         [](const ::testing::TestParamInfo<LayoutCase>& p) {
                           return "world" + std::to_string(p.param.world) + "_rank" + std::to_string(p.param.rank);
                         });

int64_t numel_of(const PartitionLayout& layout, size_t first, size_t end) {
  int64_t n = 0;
  for (size_t u = first; u < end; ++u) n += layout.unit(u).shard_numel;
  return n;
}

TEST(PartitionStore, PlacementAndAllocatorsPerTier) {
  backend::CpuBackend cpu;
  auto model = engine::zero_test::small_model("llama", cpu);
  const PartitionLayout layout(*model, 3, 1);
  const size_t units = layout.units().size();
  const int64_t n = layout.partition_numel();
  const int64_t bytes = 2 * n;  // bf16
  Allocator& device = cpu.allocator();
  Allocator& pinned = cpu.pinned_host_allocator();
  Allocator& pageable = host_pageable_allocator();
  for (const Tier& tier : tiers()) {
    SwapDir dir;
    const size_t device_before = device.stats().live(MemoryCategory::kParams);
    const size_t pinned_before = pinned.stats().live(MemoryCategory::kParams);
    const size_t pageable_before = pageable.stats().live(MemoryCategory::kParams);
    auto store = make_partition_store(cpu, layout, DType::kBF16, options_for(tier, layout, dir));
    const PartitionPlacement where = store->placement();
    const int64_t on_device = static_cast<int64_t>(device.stats().live(MemoryCategory::kParams) - device_before);
    const int64_t in_pinned = static_cast<int64_t>(pinned.stats().live(MemoryCategory::kParams) - pinned_before);
    const int64_t in_pageable =
        static_cast<int64_t>(pageable.stats().live(MemoryCategory::kParams) - pageable_before);
    const std::filesystem::path swap_file = dir.path() / "zero_param_swap" / "rank1" / "params.swp";
    switch (tier.device) {
      case OffloadDevice::kNone:
        EXPECT_EQ(where.device_bytes, bytes);
        EXPECT_EQ(where.host_bytes + where.nvme_bytes + where.staging_bytes, 0);
        EXPECT_EQ(on_device, bytes);
        EXPECT_EQ(in_pinned + in_pageable, 0);
        break;
      case OffloadDevice::kCpu:
        EXPECT_EQ(where.host_bytes, bytes) << tier.name;
        EXPECT_EQ(where.device_bytes + where.nvme_bytes + where.staging_bytes, 0) << tier.name;
        EXPECT_EQ(on_device, 0) << tier.name << ": nothing of the partition on the device";
        // pin_memory picks the host memory: pinned, or ordinary pageable memory (never the
        // backend's device allocator, which is host memory too on the CPU backend).
        EXPECT_EQ(in_pinned, tier.pin ? bytes : 0) << tier.name;
        EXPECT_EQ(in_pageable, tier.pin ? 0 : bytes) << tier.name;
        break;
      case OffloadDevice::kNvme: {
        const size_t kept = tier.resident == Resident::kNone ? 0
                            : tier.resident == Resident::kPart ? units / 2
                                                               : units;
        const int64_t resident = 2 * numel_of(layout, 0, kept);
        EXPECT_EQ(where.device_bytes, 0) << tier.name;
        EXPECT_EQ(where.host_bytes, resident) << tier.name;
        EXPECT_EQ(where.nvme_bytes, bytes - resident) << tier.name;
        EXPECT_EQ(on_device, 0) << tier.name;
        // The resident units follow pin_memory; the staging buffers are always pinned.
        EXPECT_EQ(in_pageable, tier.pin ? 0 : resident) << tier.name;
        if (kept == units) {
          // Nothing swapped: no swap file, no staging buffers.
          EXPECT_EQ(where.staging_bytes, 0) << tier.name;
          EXPECT_EQ(in_pinned, tier.pin ? resident : 0) << tier.name;
          EXPECT_FALSE(std::filesystem::exists(swap_file)) << tier.name;
        } else {
          // (The staging allocation has one alignment more, to align the buffers' start.)
          const int64_t alignment = offload::probe_direct_io(swap_file.parent_path()).alignment;
          EXPECT_EQ(in_pinned, (tier.pin ? resident : 0) + where.staging_bytes + alignment) << tier.name;
          int64_t largest = 0;
          for (size_t u = kept; u < units; ++u) largest = std::max(largest, layout.unit(u).shard_numel);
          // buffer_count 2 (never more buffers than swapped units) of the largest swapped shard.
          const int64_t buffers = std::min<int64_t>(2, static_cast<int64_t>(units - kept));
          EXPECT_GE(where.staging_bytes, buffers * 2 * largest) << tier.name;
          EXPECT_LT(where.staging_bytes, buffers * (2 * largest + 4096)) << tier.name;
          EXPECT_GE(static_cast<int64_t>(std::filesystem::file_size(swap_file)), where.nvme_bytes) << tier.name;
        }
        break;
      }
    }
    // Reads and writes leave nothing behind on the device.
    store->write(0, units - 1, to_device(cpu, values(n, 3)));
    (void)store->read(0, units - 1);
    EXPECT_EQ(static_cast<int64_t>(device.stats().live(MemoryCategory::kParams) - device_before), on_device);
    EXPECT_EQ(device.stats().live(MemoryCategory::kComm), 0u) << tier.name;
    store.reset();
    EXPECT_EQ(device.stats().live(MemoryCategory::kParams), device_before) << tier.name;
    EXPECT_EQ(pinned.stats().live(MemoryCategory::kParams), pinned_before) << tier.name;
    EXPECT_EQ(pageable.stats().live(MemoryCategory::kParams), pageable_before) << tier.name;
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "zero_param_swap")) << tier.name << ": swap files removed";
  }
}

TEST(PartitionStore, NvmeTrafficCountsEveryByte) {
  backend::CpuBackend cpu;
  auto model = engine::zero_test::small_model("llama", cpu);
  const PartitionLayout layout(*model, 1, 0);
  const size_t units = layout.units().size();
  SwapDir dir;
  auto store = make_partition_store(cpu, layout, DType::kBF16, options_for(tiers()[3], layout, dir));
  const int64_t bytes = 2 * layout.partition_numel();
  store->write(0, units - 1, to_device(cpu, values(layout.partition_numel(), 4)));
  // Counted from the first write on (the construction's zero fill is left out of the snapshot).
  const PartitionTraffic start = store->traffic();
  store->write(0, units - 1, to_device(cpu, values(layout.partition_numel(), 5)));
  for (size_t u = 0; u < units; ++u) {
    EXPECT_TRUE(store->prefetch(u)) << "the buffers are free between reads";
    (void)store->read(u, u);
  }
  const PartitionTraffic end = store->traffic();
  EXPECT_EQ(end.nvme_write_bytes - start.nvme_write_bytes, bytes);
  EXPECT_EQ(end.nvme_read_bytes - start.nvme_read_bytes, bytes);
  EXPECT_EQ(end.host_to_device_bytes - start.host_to_device_bytes, bytes);
  EXPECT_EQ(end.device_to_host_bytes - start.device_to_host_bytes, bytes);
}

TEST(PartitionStore, NvmeBufferSmallerThanAShardIsAConfigError) {
  backend::CpuBackend cpu;
  auto model = engine::zero_test::small_model("llama", cpu);
  for (const LayoutCase shape : {LayoutCase{1, 0}, LayoutCase{3, 1}}) {
    const PartitionLayout layout(*model, shape.world, shape.rank);
    int64_t largest = 0;
    for (const UnitPartition& part : layout.units()) largest = std::max(largest, part.shard_numel);
    SwapDir dir;
    PartitionStoreOptions o = options_for(tiers()[3], layout, dir);
    o.offload.buffer_size = largest - 1;
    try {
      make_partition_store(cpu, layout, DType::kBF16, o);
      ADD_FAILURE() << "no error for buffer_size " << largest - 1;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      for (const std::string& needle :
           {std::string("zero_optimization.offload_param.buffer_size is ") + std::to_string(largest - 1),
            std::string("at least ") + std::to_string(largest)}) {
        EXPECT_NE(what.find(needle), std::string::npos) << needle << " in: " << what;
      }
    }
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "zero_param_swap")) << "nothing created";
    o.offload.buffer_size = largest;  // exactly enough
    auto store = make_partition_store(cpu, layout, DType::kBF16, o);
    store->write(0, layout.units().size() - 1, to_device(cpu, values(layout.partition_numel(), 5)));
    const std::vector<char> expected = stored_bits(cpu, values(layout.partition_numel(), 5), DType::kBF16);
    expect_reads(cpu, *store, expected, "buffer_size = largest shard");
  }
}

}  // namespace
}  // namespace zero::sharding
