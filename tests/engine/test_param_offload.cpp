// Parameter offload (zero_optimization.offload_param, ZeRO stage 3): the rank's parameter
// partition lives in host memory ("cpu") or in a swap file under nvme_path ("nvme"), reaching the
// device unit by unit. Proofs: 10 steps of tiny Llama in f32 and bf16 give the same losses and
// parameters, bit for bit, as the partition on the device - alone and with optimizer offload to
// memory or NVMe, from the CPU backend and the simulated device; the device holds no parameter
// partition; the swap file holds the swapped shards and reads go ahead of use; checkpoints move
// between offloaded and device runs; bad settings and damaged swap files are clear errors.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/offload_runs.h"
#include "engine/zero_harness.h"
#include "offload/aio_test_support.h"

namespace zero::engine {
namespace param_offload_test {
using namespace zero_test;
using offload_runs::batches;
using offload_runs::kSeqLen;
using offload_runs::Result;
using offload_runs::train;
using config::OffloadDevice;
using offload::testing::scribble;

constexpr int kSteps = 10;

class ParamOffload : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("zero_param_offload_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Stage 3 with small buckets; `params` and `optimizer` say where each lives.
  EngineSettings settings(bool bf16, OffloadDevice params, OffloadDevice optimizer,
                          int64_t max_in_cpu = 0) const {
    EngineSettings s = zero_settings(3, 2, 2, 1);
    s.bf16.enabled = bf16;
    s.zero.offload_param.device = params;
    s.zero.offload_param.pin_memory = true;
    if (params == OffloadDevice::kNvme) {
      s.zero.offload_param.nvme_path = dir_.string();
      s.zero.offload_param.max_in_cpu = max_in_cpu;
      s.zero.offload_param.buffer_count = 2;  // fewer buffers than swapped units
      s.zero.offload_param.buffer_size = 8192;  // the largest unit shard is ~7000 elements
    }
    s.zero.offload_optimizer.device = optimizer;
    s.zero.offload_optimizer.pin_memory = true;
    if (optimizer == OffloadDevice::kNvme) {
      s.zero.offload_optimizer.nvme_path = dir_.string();
      s.zero.sub_group_size = 1000;
    }
    s.aio.block_size = 4096;
    return s;
  }
  std::filesystem::path swap_file() const { return dir_ / "zero_param_swap" / "rank0" / "params.swp"; }
  std::filesystem::path dir_;
};

TEST_F(ParamOffload, BitIdenticalToTheDevicePartition) {
  for (const bool bf16 : {false, true}) {
    backend::CpuBackend cpu;
    const Result reference = train(cpu, settings(bf16, OffloadDevice::kNone, OffloadDevice::kNone), kSteps);
    const std::vector<std::tuple<OffloadDevice, OffloadDevice, int64_t>> modes = {
        {OffloadDevice::kCpu, OffloadDevice::kNone, 0},
        {OffloadDevice::kNvme, OffloadDevice::kNone, 0},
        {OffloadDevice::kNvme, OffloadDevice::kNone, 2000},  // the embedding stays in memory
    };
    for (const auto& [params, optimizer, max_in_cpu] : modes) {
      const Result r = train(cpu, settings(bf16, params, optimizer, max_in_cpu), kSteps);
      const std::string label = std::string(bf16 ? "bf16" : "f32") + " params " +
                                std::to_string(static_cast<int>(params)) + " max_in_cpu " +
                                std::to_string(max_in_cpu);
      EXPECT_EQ(r.losses, reference.losses) << label;
      EXPECT_EQ(r.params, reference.params) << label;
    }
    // With optimizer offload the reference is the optimizer offloaded alone (the CPU step).
    const Result cpu_step = train(cpu, settings(bf16, OffloadDevice::kNone, OffloadDevice::kCpu), kSteps);
    EXPECT_EQ(cpu_step.losses, reference.losses);
    for (const OffloadDevice optimizer : {OffloadDevice::kCpu, OffloadDevice::kNvme}) {
      for (const OffloadDevice params : {OffloadDevice::kCpu, OffloadDevice::kNvme}) {
        const Result r = train(cpu, settings(bf16, params, optimizer), kSteps);
        EXPECT_EQ(r.losses, cpu_step.losses) << bf16 << " " << static_cast<int>(params);
        EXPECT_EQ(r.params, cpu_step.params) << bf16 << " " << static_cast<int>(params);
      }
    }
    // The simulated device: host <-> device copies are real transfers there.
    backend::SimulatedDeviceBackend sim;
    const Result on_device = train(sim, settings(bf16, OffloadDevice::kNvme, OffloadDevice::kCpu), kSteps);
    EXPECT_EQ(on_device.losses, cpu_step.losses);
    EXPECT_EQ(on_device.params, cpu_step.params);
  }
}

TEST_F(ParamOffload, TheDeviceHoldsNoParameterPartition) {
  for (const OffloadDevice params : {OffloadDevice::kCpu, OffloadDevice::kNvme}) {
    backend::SimulatedDeviceBackend sim;
    comm::SelfComm comm;
    const size_t pinned_before = sim.pinned_host_allocator().stats().live(MemoryCategory::kParams);
    Engine engine(small_model("llama", sim), settings(true, params, OffloadDevice::kNone), comm);
    engine.train_batch(batches(0));
    const sharding::PartitionStore* store = engine.zero_stage().partition_store();
    ASSERT_NE(store, nullptr);
    const int64_t psi = engine.zero_stage().layout().partition_numel();
    // Between steps nothing of the partition is on the device (the bf16 partition would be
    // 2 * psi bytes of kParams there).
    EXPECT_EQ(sim.allocator().stats().live(MemoryCategory::kParams), 0u);
    const sharding::PartitionPlacement where = store->placement();
    EXPECT_EQ(where.device_bytes, 0);
    const size_t pinned = sim.pinned_host_allocator().stats().live(MemoryCategory::kParams) - pinned_before;
    if (params == OffloadDevice::kCpu) {
      EXPECT_EQ(where.host_bytes, 2 * psi);
      EXPECT_EQ(pinned, static_cast<size_t>(2 * psi));
    } else {
      EXPECT_EQ(where.host_bytes, 0);  // max_in_cpu 0: every unit is swapped
      EXPECT_EQ(where.nvme_bytes, 2 * psi);
      EXPECT_TRUE(std::filesystem::exists(swap_file()));
      EXPECT_GE(static_cast<int64_t>(std::filesystem::file_size(swap_file())), 2 * psi);
      // Staging: two buffers, each the largest shard (not the partition).
      EXPECT_LT(where.staging_bytes, 2 * psi);
      EXPECT_GE(pinned, static_cast<size_t>(where.staging_bytes));
      // One step (two micro-batches) reads every shard at least once per micro-batch, and
      // writes the updated partition once.
      const sharding::PartitionTraffic before = store->traffic();
      engine.train_batch(batches(1));
      const sharding::PartitionTraffic after = store->traffic();
      EXPECT_EQ(after.nvme_write_bytes - before.nvme_write_bytes, 2 * psi);
      EXPECT_GE(after.nvme_read_bytes - before.nvme_read_bytes, 2 * psi);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(swap_file())) << "the swap file goes with the engine";
}

TEST_F(ParamOffload, NoSwapFileWhenEveryUnitFitsMaxInCpu) {
  backend::CpuBackend cpu;
  const Result reference = train(cpu, settings(false, OffloadDevice::kNone, OffloadDevice::kNone), kSteps);
  {
    comm::SelfComm comm;
    Engine engine(small_model("llama", cpu),
                  settings(false, OffloadDevice::kNvme, OffloadDevice::kNone, int64_t{1} << 40), comm);
    engine.train_batch(batches(0));
    const sharding::PartitionPlacement where = engine.zero_stage().partition_store()->placement();
    EXPECT_EQ(where.nvme_bytes, 0);
    EXPECT_EQ(where.staging_bytes, 0);
    EXPECT_EQ(where.host_bytes, 4 * engine.zero_stage().layout().partition_numel());
    EXPECT_FALSE(std::filesystem::exists(swap_file())) << "nothing is swapped, so no file is made";
    EXPECT_EQ(engine.zero_stage().partition_store()->traffic().nvme_write_bytes, 0);
  }
  const Result r = train(cpu, settings(false, OffloadDevice::kNvme, OffloadDevice::kNone, int64_t{1} << 40), kSteps);
  EXPECT_EQ(r.losses, reference.losses);
  EXPECT_EQ(r.params, reference.params);
}

TEST_F(ParamOffload, CheckpointsMoveBetweenOffloadedAndDeviceRuns) {
  const auto ckpt = dir_ / "ckpt";
  for (const bool save_offloaded : {true, false}) {
    std::filesystem::remove_all(ckpt);
    const OffloadDevice saved = save_offloaded ? OffloadDevice::kNvme : OffloadDevice::kNone;
    const OffloadDevice loaded = save_offloaded ? OffloadDevice::kNone : OffloadDevice::kCpu;
    backend::CpuBackend cpu;
    comm::SelfComm comm;
    double expected = 0.0;
    {
      Engine first(small_model("llama", cpu), settings(true, saved, OffloadDevice::kNone), comm);
      first.train_batch(batches(0));
      first.save_checkpoint(ckpt.string());
      expected = first.train_batch(batches(1));
    }
    Engine second(model::build_transformer(small_config("llama"), cpu, DType::kF32),
                  settings(true, loaded, OffloadDevice::kNone), comm);
    second.load_checkpoint(ckpt.string());
    EXPECT_EQ(second.train_batch(batches(1)), expected) << "saved offloaded: " << save_offloaded;
  }
}

template <typename E>
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << needle << " in: " << e.what();
    }
  }
}

TEST_F(ParamOffload, DamagedSwapFileStopsTheStepAndTheCheckpointStaysLoadable) {
  const auto ckpt = dir_ / "ckpt";
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  // The run stops at the damage (the engine is not usable after it, as after any failed step).
  for (const bool truncate : {false, true}) {
    Engine engine(small_model("llama", cpu), settings(true, OffloadDevice::kNvme, OffloadDevice::kNone), comm);
    engine.train_batch(batches(0));
    if (!truncate) {
      engine.save_checkpoint(ckpt.string());
      scribble(swap_file(), 100, 8);  // the first swapped shard
      expect_error<FileError>([&] { engine.train_batch(batches(1)); },
                              {swap_file().string(), "block 0", "checksum mismatch", "last checkpoint"});
    } else {
      // Truncated behind zero.cpp's back: a short read naming the file.
      ASSERT_EQ(::truncate(swap_file().c_str(), 0), 0);
      expect_error<FileError>([&] { engine.train_batch(batches(1)); }, {swap_file().string(), "short read"});
    }
  }
  // The checkpoint is untouched: a fresh run resumes from it.
  Engine again(model::build_transformer(small_config("llama"), cpu, DType::kF32),
               settings(true, OffloadDevice::kNvme, OffloadDevice::kNone), comm);
  again.load_checkpoint(ckpt.string());
  EXPECT_TRUE(std::isfinite(again.train_batch(batches(1))));
}

TEST_F(ParamOffload, BadSettingsAreClearErrors) {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  EngineSettings s = settings(false, OffloadDevice::kNvme, OffloadDevice::kNone);
  s.zero.offload_param.nvme_path = (dir_ / "missing").string();
  expect_error<ConfigError>([&] { Engine e(small_model("llama", cpu), s, comm); },
                            {"zero_optimization.offload_param.nvme_path", "does not exist"});
  s = settings(false, OffloadDevice::kNvme, OffloadDevice::kNone);
  s.zero.offload_param.buffer_size = 100;
  expect_error<ConfigError>([&] { Engine e(small_model("llama", cpu), s, comm); },
                            {"zero_optimization.offload_param.buffer_size is 100 elements", "at least"});
  s.zero.offload_param.buffer_size = 8192;
  s.zero.offload_param.buffer_count = 0;
  expect_error<ConfigError>([&] { Engine e(small_model("llama", cpu), s, comm); },
                            {"zero_optimization.offload_param.buffer_count"});
  s = settings(false, OffloadDevice::kNvme, OffloadDevice::kNone);
  s.aio.use_gds = true;
  expect_error<UnsupportedError>([&] { Engine e(small_model("llama", cpu), s, comm); }, {"aio.use_gds"});
  s = settings(false, OffloadDevice::kCpu, OffloadDevice::kNone);
  s.zero.stage = 2;
  expect_error<ConfigError>([&] { Engine e(small_model("llama", cpu), s, comm); },
                            {"zero_optimization.offload_param", "stage 3"});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "zero_param_swap")) << "failed starts leave no files";
}

}  // namespace param_offload_test
}  // namespace zero::engine
