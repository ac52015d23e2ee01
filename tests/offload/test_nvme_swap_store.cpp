// offload::NvmeSwapStore: the sweep updates every element exactly once, in order, with and
// without pipelining (against an in-memory reference), buffer_count's meaning and limits, the
// config checks (nvme_path, use_gds), the O_DIRECT fallback, and clear errors for a missing or
// unwritable folder and a swap file truncated behind the store's back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "aio_test_support.h"
#include "core/allocator.h"
#include "core/error.h"
#include "offload/nvme_offload_validation.h"
#include "offload/nvme_swap_store.h"

namespace zero::offload {
namespace {

using testing::expect_error;
using testing::scribble;
using testing::SmallTmpfs;
using testing::RefuseDirectIo;
using testing::ScratchDir;
using testing::ExhaustedAllocator;

const std::vector<std::string> kAdamTensors = {"master", "exp_avg", "exp_avg_sq"};

NvmeSwapStoreOptions small_options(const std::filesystem::path& dir, int64_t numel, int64_t sub_group) {
  NvmeSwapStoreOptions o;
  o.nvme_path = dir;
  o.rank = 1;
  o.tensor_names = kAdamTensors;
  o.numel = numel;
  o.sub_group_elements = sub_group;
  o.buffer_count = 3;
  o.aio.block_size = 8192;
  o.aio.queue_depth = 4;
  o.warn = [](const std::string&) {};
  return o;
}

std::vector<float> initial(int64_t numel, int which) {
  std::vector<float> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[static_cast<size_t>(i)] = static_cast<float>(which * 1000003 + i) * 0.25f;
  return v;
}

// A non-idempotent update (applying it twice gives a different answer), so an element updated
// twice or never shows up; it mixes the three tensors and the sub-group index.
void update(int64_t g, int64_t i, float& master, float& m, float& v) {
  m = m * 0.5f + master;
  v = v + 1.0f + static_cast<float>(g);
  master = master - 0.125f * m + static_cast<float>(i % 7);
}

struct SweepCase {
  bool pipeline_read;
  bool pipeline_write;
  int64_t buffer_count;
  int64_t threads;
  bool buffered;
};

class NvmeSwapSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(NvmeSwapSweep, EqualsInMemoryReferenceTwice) {
  const SweepCase c = GetParam();
  ScratchDir dir("sweep");
  std::optional<RefuseDirectIo> refuse;
  if (c.buffered) refuse.emplace();
  const int64_t numel = 10007;  // 11 sub-groups of 1000, the last of 7 (not block multiples)
  NvmeSwapStoreOptions o = small_options(dir.path(), numel, 1000);
  o.pipeline_read = c.pipeline_read;
  o.pipeline_write = c.pipeline_write;
  o.buffer_count = c.buffer_count;
  o.aio.intra_op_parallelism = c.threads;
  CpuAllocator pinned;
  NvmeSwapStore store(o, pinned);
  EXPECT_EQ(store.direct_io(), !c.buffered && probe_direct_io(dir.path()).supported);
  EXPECT_EQ(store.sub_group_count(), 11);
  EXPECT_EQ(store.staging_slots(), std::min<int64_t>(c.buffer_count / 3, 11));

  std::vector<std::vector<float>> reference = {initial(numel, 1), initial(numel, 2), initial(numel, 3)};
  for (size_t t = 0; t < 3; ++t) store.write_all(kAdamTensors[t], reference[t]);

  for (int sweep = 0; sweep < 2; ++sweep) {
    std::vector<int64_t> order;
    int64_t next_begin = 0;
    store.for_each_sub_group([&](int64_t g, int64_t begin, int64_t count, std::span<Tensor> views) {
      order.push_back(g);
      EXPECT_EQ(begin, next_begin);
      next_begin = begin + count;
      ASSERT_EQ(views.size(), 3u);
      float* p = views[0].data<float>();
      float* m = views[1].data<float>();
      float* v = views[2].data<float>();
      for (int64_t k = 0; k < count; ++k) {
        ASSERT_EQ(views[0].numel(), count);
        update(g, begin + k, p[k], m[k], v[k]);
      }
    });
    for (int64_t i = 0; i < numel; ++i) {
      const auto s = static_cast<size_t>(i);
      update(i / 1000, i, reference[0][s], reference[1][s], reference[2][s]);
    }
    ASSERT_EQ(next_begin, numel);
    ASSERT_EQ(order.size(), 11u);
    for (size_t g = 0; g < order.size(); ++g) EXPECT_EQ(order[g], static_cast<int64_t>(g));
    for (size_t t = 0; t < 3; ++t) {
      std::vector<float> back(static_cast<size_t>(numel), -1.0f);
      store.read_all(kAdamTensors[t], back);
      ASSERT_EQ(back, reference[t]) << kAdamTensors[t] << " after sweep " << sweep;
    }
  }
  const AioEngineStats s = store.io_stats();
  EXPECT_GT(s.bytes_read, 2 * 3 * numel * 4);
  EXPECT_GT(s.bytes_written, 3 * 3 * numel * 4);
}

INSTANTIATE_TEST_SUITE_P(
    Pipelines, NvmeSwapSweep,
    ::testing::Values(SweepCase{false, false, 3, 1, false}, SweepCase{false, false, 4, 1, true},
                      SweepCase{true, false, 6, 1, false}, SweepCase{false, true, 6, 3, false},
                      SweepCase{true, true, 6, 1, false}, SweepCase{true, true, 9, 3, false},
                      SweepCase{true, true, 9, 1, true}, SweepCase{true, true, 300, 1, false}),
    [](const ::testing::TestParamInfo<SweepCase>& param_info) {
      const SweepCase& c = param_info.param;
      return std::string(c.pipeline_read ? "read" : "noread") + (c.pipeline_write ? "_write" : "_nowrite") +
             "_buffers" + std::to_string(c.buffer_count) + "_threads" + std::to_string(c.threads) +
             (c.buffered ? "_buffered" : "_direct");
    });

// The schedule of one sweep of 4 sub-groups as "<event> <sub-group>" lines.
std::vector<std::string> schedule(bool pipeline_read, bool pipeline_write, int64_t buffer_count) {
  ScratchDir dir("schedule");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 4000, 1000);
  o.pipeline_read = pipeline_read;
  o.pipeline_write = pipeline_write;
  o.buffer_count = buffer_count;
  std::vector<std::string> events;
  o.on_event = [&](std::string_view e, int64_t g) { events.push_back(std::string(e) + " " + std::to_string(g)); };
  NvmeSwapStore store(o, pinned);
  store.for_each_sub_group([](int64_t, int64_t, int64_t, std::span<Tensor>) {});
  return events;
}

size_t position(const std::vector<std::string>& events, const std::string& event) {
  const auto it = std::find(events.begin(), events.end(), event);
  EXPECT_NE(it, events.end()) << event;
  return static_cast<size_t>(it - events.begin());
}

TEST(NvmeSwapStore, SerialScheduleWithoutPipelining) {
  const std::vector<std::string> expected = {
      "read_issued 0", "read_done 0", "update 0", "write_issued 0", "write_done 0",
      "read_issued 1", "read_done 1", "update 1", "write_issued 1", "write_done 1",
      "read_issued 2", "read_done 2", "update 2", "write_issued 2", "write_done 2",
      "read_issued 3", "read_done 3", "update 3", "write_issued 3", "write_done 3"};
  EXPECT_EQ(schedule(false, false, 9), expected) << "extra buffers do not change the serial schedule";
}

TEST(NvmeSwapStore, PipelineReadIssuesTheNextReadBeforeTheUpdate) {
  const auto events = schedule(true, false, 6);
  for (int g = 0; g < 3; ++g) {
    EXPECT_LT(position(events, "read_issued " + std::to_string(g + 1)), position(events, "update " + std::to_string(g)));
    // Without pipeline_write each write completes before the next update.
    EXPECT_LT(position(events, "write_done " + std::to_string(g)), position(events, "update " + std::to_string(g + 1)));
  }
}

TEST(NvmeSwapStore, PipelineWriteWaitsForAWriteOnlyWhenItsBufferIsNeeded) {
  const auto events = schedule(false, true, 6);  // two slots
  for (int g = 0; g < 3; ++g) {
    EXPECT_GT(position(events, "write_done " + std::to_string(g)), position(events, "read_issued " + std::to_string(g + 1)));
  }
  // Three slots, both pipelines: read of g+1, update of g and write of g-1 overlap.
  const auto both = schedule(true, true, 9);
  for (int g = 1; g < 3; ++g) {
    const std::string s = std::to_string(g);
    EXPECT_LT(position(both, "read_issued " + std::to_string(g + 1)), position(both, "update " + s));
    EXPECT_LT(position(both, "write_issued " + std::to_string(g - 1)), position(both, "update " + s));
    EXPECT_GT(position(both, "write_done " + std::to_string(g - 1)), position(both, "update " + s));
  }
  EXPECT_EQ(both.back().rfind("write_done", 0), 0u) << "every write is waited for before the sweep returns";
}

TEST(NvmeSwapStore, LayoutFilesAndCleanup) {
  ScratchDir dir("layout");
  std::filesystem::path swap_dir;
  {
    CpuAllocator pinned;
    NvmeSwapStore store(small_options(dir.path(), 2500, 1000), pinned);
    swap_dir = dir.path() / "zero_swap" / "rank1";
    EXPECT_EQ(store.directory(), swap_dir);
    EXPECT_EQ(store.file_path("exp_avg"), swap_dir / "exp_avg.swp");
    // stride 4096 bytes per sub-group (1000 f32 = 4000 bytes, padded); the last one (500 f32) too.
    EXPECT_EQ(std::filesystem::file_size(swap_dir / "master.swp"), 3u * 4096u);
    EXPECT_EQ(store.staging_bytes(), 3 * 4096);
    EXPECT_GE(pinned.stats().live(MemoryCategory::kOptimizer), 3u * 4096u);
    // Never-written tensors read as zeros.
    std::vector<float> back(2500, 1.0f);
    store.read_all("exp_avg_sq", back);
    for (float x : back) ASSERT_EQ(x, 0.0f);
  }
  EXPECT_FALSE(std::filesystem::exists(swap_dir)) << "the destructor removes the files and the rank folder";
}

TEST(NvmeSwapStore, OneStorePerFolder) {
  ScratchDir dir("lock");
  CpuAllocator pinned;
  {
    NvmeSwapStore first(small_options(dir.path(), 100, 10), pinned);
    expect_error<ConfigError>([&] { NvmeSwapStore second(small_options(dir.path(), 100, 10), pinned); },
                              {"zero_optimization.offload_optimizer.nvme_path", "zero_swap/rank1 is in use",
                               "give each job its own nvme_path"});
    NvmeSwapStoreOptions other_rank = small_options(dir.path(), 100, 10);
    other_rank.rank = 2;
    NvmeSwapStore fine(other_rank, pinned);
  }
  NvmeSwapStore again(small_options(dir.path(), 100, 10), pinned);  // released by the destructor
}

TEST(NvmeSwapStore, FailedConstructionLeavesNothingBehind) {
  ScratchDir dir("failed");
  ExhaustedAllocator exhausted;
  expect_error<Error>([&] { NvmeSwapStore s(small_options(dir.path(), 100, 10), exhausted); }, {"out of pinned memory"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "zero_swap")) << "files, lock and folders are removed";
  CpuAllocator pinned;
  NvmeSwapStore store(small_options(dir.path(), 100, 10), pinned);  // the lock was released
}

TEST(NvmeSwapStore, BufferCountIsPerTensorAndBoundsStaging) {
  ScratchDir dir("buffers");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 10000, 1000);
  o.buffer_count = 8;  // two slots of three tensors (the remainder is unused)
  {
    NvmeSwapStore store(o, pinned);
    EXPECT_EQ(store.staging_slots(), 2);
    EXPECT_LE(store.staging_bytes(), o.buffer_count * 4096);
    EXPECT_LE(pinned.stats().live(MemoryCategory::kOptimizer), static_cast<size_t>(store.staging_bytes() + 4096));
  }
  EXPECT_EQ(pinned.stats().live(MemoryCategory::kOptimizer), 0u);
  o.buffer_count = 2;
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); },
                            {"zero_optimization.offload_optimizer.buffer_count is 2", "3 tensors",
                             "master, exp_avg, exp_avg_sq", "at least 3"});
  o.buffer_count = 5;
  o.pipeline_read = true;
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); },
                            {"zero_optimization.offload_optimizer.buffer_count is 5", "pipeline_read/pipeline_write",
                             "at least 6"});
  o.pipeline_read = false;
  o.pipeline_write = true;
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); }, {"buffer_count is 5", "at least 6"});
  o.pipeline_write = false;
  NvmeSwapStore serial(o, pinned);  // 5 buffers, no pipelining: one slot
  EXPECT_EQ(serial.staging_slots(), 1);
}

TEST(NvmeSwapStore, MissingAndUnwritableNvmePath) {
  ScratchDir dir("paths");
  CpuAllocator pinned;
  const std::filesystem::path missing = dir.path() / "no_such_folder";
  expect_error<ConfigError>([&] { NvmeSwapStore s(small_options(missing, 100, 10), pinned); },
                            {"zero_optimization.offload_optimizer.nvme_path", missing.string(), "does not exist"});
  const std::filesystem::path locked = dir.path() / "locked";
  std::filesystem::create_directory(locked);
  ::chmod(locked.c_str(), 0500);
  // root ignores permission bits: then a folder no one can create files in (procfs) stands in.
  const std::filesystem::path unwritable = ::access(locked.c_str(), W_OK) == 0 ? "/proc/self" : locked;
  expect_error<ConfigError>([&] { NvmeSwapStore s(small_options(unwritable, 100, 10), pinned); },
                            {"zero_optimization.offload_optimizer.nvme_path", unwritable.string()});
  ::chmod(locked.c_str(), 0700);
  EXPECT_EQ(pinned.stats().live(MemoryCategory::kOptimizer), 0u);
}

TEST(NvmeSwapStore, TruncatedFileIsAFileErrorNamingIt) {
  ScratchDir dir("truncated");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 5000, 1000);
  o.buffer_count = 9;
  o.pipeline_read = true;
  o.pipeline_write = true;
  NvmeSwapStore store(o, pinned);
  for (const auto& name : kAdamTensors) store.write_all(name, initial(5000, 4));
  const std::filesystem::path victim = store.file_path("exp_avg_sq");
  ASSERT_EQ(::truncate(victim.c_str(), 2 * 4096 + 100), 0);
  int64_t visited = 0;
  expect_error<FileError>(
      [&] { store.for_each_sub_group([&](int64_t, int64_t, int64_t, std::span<Tensor>) { ++visited; }); },
      {victim.string(), "byte offset", "short read", "truncated or replaced"});
  EXPECT_EQ(visited, 2) << "sub-groups before the damage are processed, none after";
  std::vector<float> back(5000);
  expect_error<FileError>([&] { store.read_all("exp_avg_sq", back); }, {victim.string(), "short read"});
  // The undamaged tensors still read back whole.
  store.read_all("exp_avg", back);
}

TEST(NvmeSwapStore, BlockAlteredOnDiskIsAFileErrorNamingIt) {
  ScratchDir dir("altered");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 5000, 1000);
  o.buffer_count = 6;
  o.pipeline_read = true;
  NvmeSwapStore store(o, pinned);
  for (const auto& name : kAdamTensors) store.write_all(name, initial(5000, 5));
  const std::filesystem::path victim = store.file_path("exp_avg");
  scribble(victim, 3 * 4096 + 100, 4);  // sub-group 3
  int64_t visited = 0;
  expect_error<FileError>(
      [&] { store.for_each_sub_group([&](int64_t, int64_t, int64_t, std::span<Tensor>) { ++visited; }); },
      {victim.string(), "sub-group 3 (bytes 12288 to 16384)", "checksum mismatch", "last checkpoint"});
  EXPECT_EQ(visited, 3) << "the altered sub-group never reaches the update";
  std::vector<float> back(5000);
  expect_error<FileError>([&] { store.read_all("exp_avg", back); }, {victim.string(), "checksum mismatch"});
  store.read_all("master", back);  // untouched tensors still read
  EXPECT_EQ(back, initial(5000, 5));
  // Writing the tensor again makes it whole.
  store.write_all("exp_avg", initial(5000, 6));
  store.read_all("exp_avg", back);
  EXPECT_EQ(back, initial(5000, 6));
}

TEST(NvmeSwapStore, ChecksumsCanBeTurnedOff) {
  ScratchDir dir("nochecksum");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 2000, 1000);
  o.verify_checksums = false;
  NvmeSwapStore store(o, pinned);
  store.write_all("master", initial(2000, 1));
  scribble(store.file_path("master"), 0, 4);
  std::vector<float> back(2000);
  store.read_all("master", back);  // the change goes unnoticed without checksums
  EXPECT_NE(back[0], initial(2000, 1)[0]);
  EXPECT_EQ(back[1], initial(2000, 1)[1]);
}

TEST(NvmeSwapStore, FullDiskIsAFileErrorNamingTheFile) {
  SmallTmpfs disk("256k");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << disk.error() << "); needs CAP_SYS_ADMIN";
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(disk.path(), 64 * 1024, 16 * 1024);  // 3 x 256 KiB, sparse
  NvmeSwapStore store(o, pinned);
  expect_error<FileError>(
      [&] {
        store.write_all("master", initial(64 * 1024, 1));  // fills the disk (or nearly)
        store.write_all("exp_avg", initial(64 * 1024, 2));
        store.write_all("exp_avg_sq", initial(64 * 1024, 3));
      },
      {disk.path().string(), "zero_swap/rank1/", ".swp: write of", std::strerror(ENOSPC), "the disk under nvme_path is full"});
}

TEST(NvmeSwapStore, ErrorInsideFnLeavesNoIoInFlight) {
  ScratchDir dir("throwing");
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 5000, 1000);
  o.buffer_count = 9;
  o.pipeline_read = true;
  o.pipeline_write = true;
  NvmeSwapStore store(o, pinned);
  EXPECT_THROW(store.for_each_sub_group([](int64_t g, int64_t, int64_t, std::span<Tensor>) {
    if (g == 2) throw NumericError("stop");
  }),
               NumericError);
  // The store is usable again.
  int64_t visited = 0;
  store.for_each_sub_group([&](int64_t, int64_t, int64_t, std::span<Tensor>) { ++visited; });
  EXPECT_EQ(visited, 5);
}

TEST(NvmeSwapStore, FallbackToBufferedIoWarnsWithTheDirectory) {
  ScratchDir dir("fallback");
  RefuseDirectIo refuse;
  CpuAllocator pinned;
  NvmeSwapStoreOptions o = small_options(dir.path(), 3000, 1000);
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  NvmeSwapStore store(o, pinned);
  EXPECT_FALSE(store.direct_io());
  ASSERT_EQ(warnings.size(), 1u) << "one warning for the folder, not one per file";
  EXPECT_NE(warnings[0].find("O_DIRECT is unavailable in " + store.directory().string()), std::string::npos)
      << warnings[0];
  const std::vector<float> data = initial(3000, 7);
  store.write_all("master", data);
  std::vector<float> back(3000);
  store.read_all("master", back);
  EXPECT_EQ(back, data);
}

TEST(NvmeSwapStore, BadNamesAndSizes) {
  ScratchDir dir("names");
  CpuAllocator pinned;
  NvmeSwapStore store(small_options(dir.path(), 100, 10), pinned);
  std::vector<float> wrong(99);
  expect_error<ShapeError>([&] { store.write_all("master", wrong); }, {"write_all(\"master\")", "99", "100"});
  expect_error<ShapeError>([&] { store.read_all("master", wrong); }, {"read_all(\"master\")", "99"});
  expect_error<ConfigError>([&] { store.read_all("momentum", wrong); }, {"no tensor \"momentum\"", "exp_avg_sq"});
  NvmeSwapStoreOptions o = small_options(dir.path(), 100, 10);
  o.tensor_names = {"master", "../escape", "x"};
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); }, {"\"../escape\" is not usable as a file name"});
  o.tensor_names = {"a", "b", "a"};
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); }, {"\"a\" repeats"});
  o = small_options(dir.path(), 100, 0);
  expect_error<ConfigError>([&] { NvmeSwapStore s(o, pinned); }, {"sub_group_size must be positive"});
}

TEST(NvmeOffloadConfig, UseGdsIsUnsupportedAndNvmePathRequired) {
  config::AioConfig aio;
  config::OffloadOptimizerConfig offload;
  offload.device = config::OffloadDevice::kNvme;
  offload.nvme_path = "/tmp";
  validate_nvme_offload(aio, offload);  // fine
  aio.use_gds = true;
  expect_error<UnsupportedError>([&] { validate_nvme_offload(aio, offload); },
                                 {"aio.use_gds", "GPUDirect Storage is not supported", "cuFile", "\"use_gds\": false"});
  offload.device = config::OffloadDevice::kCpu;
  validate_nvme_offload(aio, offload);  // the aio section is unused without nvme
  offload.device = config::OffloadDevice::kNvme;
  aio.use_gds = false;
  offload.nvme_path.reset();
  expect_error<ConfigError>([&] { validate_nvme_offload(aio, offload); },
                            {"zero_optimization.offload_optimizer.nvme_path is required"});
  offload.nvme_path = "/tmp";
  offload.buffer_count = 0;
  expect_error<ConfigError>([&] { validate_nvme_offload(aio, offload); },
                            {"zero_optimization.offload_optimizer.buffer_count must be positive"});
}

TEST(NvmeOffloadConfig, StoreOptionsFromConfig) {
  config::AioConfig aio;
  aio.block_size = 65536;
  aio.queue_depth = 16;
  aio.intra_op_parallelism = 2;
  config::OffloadOptimizerConfig offload;
  offload.device = config::OffloadDevice::kNvme;
  offload.nvme_path = "/local_nvme";
  offload.buffer_count = 9;
  offload.pipeline_read = true;
  const NvmeSwapStoreOptions o = NvmeSwapStoreOptions::from_config(aio, offload, 12345, 3, kAdamTensors, 99999);
  EXPECT_EQ(o.nvme_path, "/local_nvme");
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.sub_group_elements, 12345);
  EXPECT_EQ(o.numel, 99999);
  EXPECT_EQ(o.buffer_count, 9);
  EXPECT_TRUE(o.pipeline_read);
  EXPECT_FALSE(o.pipeline_write);
  EXPECT_EQ(o.aio.block_size, 65536);
  EXPECT_EQ(o.aio.queue_depth, 16);
  EXPECT_EQ(o.aio.intra_op_parallelism, 2);
  aio.use_gds = true;
  EXPECT_THROW(NvmeSwapStoreOptions::from_config(aio, offload, 1, 0, kAdamTensors, 1), UnsupportedError);
}

}  // namespace
}  // namespace zero::offload
