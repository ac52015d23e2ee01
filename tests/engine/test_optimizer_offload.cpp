// ZeRO-Offload (zero_optimization.offload_optimizer.device "cpu"): the master weights, the
// gradient partition and the optimizer state live in host memory and the optimizer step runs on
// the host (offload/cpu_optimizer.h), with results bit-identical to the step on the device, at
// stages 1-3, in f32 and bf16, from the CPU backend and from the simulated device; the device
// holds no optimizer memory; checkpoints move freely between offloaded and device runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/offload_runs.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace optimizer_offload_test {
using namespace zero_test;
using offload_runs::batches;
using offload_runs::kSeqLen;
using offload_runs::Result;
using offload_runs::train;

EngineSettings offload_settings(int stage, bool bf16, bool offload, bool pin = true) {
  EngineSettings s = zero_settings(stage, 2, 2, 1);
  s.bf16.enabled = bf16;
  if (offload) {
    s.zero.offload_optimizer.device = config::OffloadDevice::kCpu;
    s.zero.offload_optimizer.pin_memory = pin;
  }
  return s;
}

class OptimizerOffload : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(OptimizerOffload, BitIdenticalToTheDeviceStep) {
  const auto [stage, bf16] = GetParam();
  backend::CpuBackend cpu;
  const Result reference = train(cpu, offload_settings(stage, bf16, false), 10);
  const Result offloaded = train(cpu, offload_settings(stage, bf16, true), 10);
  EXPECT_EQ(reference.losses, offloaded.losses);
  EXPECT_EQ(reference.params, offloaded.params);
  backend::SimulatedDeviceBackend sim;
  const Result from_device = train(sim, offload_settings(stage, bf16, true, stage != 2), 10);
  EXPECT_EQ(reference.losses, from_device.losses);
  EXPECT_EQ(reference.params, from_device.params);
}

TEST_P(OptimizerOffload, TheDeviceHoldsNoOptimizerMemory) {
  const auto [stage, bf16] = GetParam();
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  Engine engine(small_model("llama", sim), offload_settings(stage, bf16, true), comm);
  engine.train_batch(batches(0));
  const int64_t psi = engine.zero_stage().layout().partition_numel();
  EXPECT_EQ(sim.allocator().stats().live(MemoryCategory::kOptimizer), 0u);
  // Pinned host memory: the f32 master partition and AdamW's two f32 moments, the f32 gradient
  // partition the step reads, plus the 16-bit copy the device receives. At stages 2-3 the
  // reduced gradients also accumulate there (in the accumulation dtype: bf16 with bf16), and the
  // device keeps no gradient partition at all.
  const MemoryStats pinned = sim.pinned_host_allocator().stats();
  const int64_t accum_bytes = stage >= 2 ? (bf16 ? 2 : 4) : 0;
  EXPECT_EQ(pinned.live(MemoryCategory::kOptimizer), static_cast<size_t>(3 * 4 * psi));
  EXPECT_EQ(pinned.live(MemoryCategory::kGrads), static_cast<size_t>((4 + accum_bytes) * psi));
  EXPECT_EQ(pinned.live(MemoryCategory::kParams), bf16 ? static_cast<size_t>(2 * psi) : 0u);
  if (stage >= 2) {
    EXPECT_EQ(sim.allocator().stats().live(MemoryCategory::kGrads), 0u);
  }
  // Per step: stage 1 takes the gradient partition down once at the boundary; stages 2-3 take
  // each micro-batch's reduced buckets down during backward (2 micro-batches, communicated in
  // the parameters' dtype) and send the norm up. The updated partition comes up once.
  sim.reset_transfer_stats();
  engine.train_batch(batches(1));
  const backend::TransferStats& t = sim.transfer_stats();
  const int64_t batch_bytes = 2 * 2 * 2 * kSeqLen * 8;
  if (stage == 1) {
    EXPECT_EQ(t.device_to_host_calls, 2);  // the gradients, then the loss and norm
    EXPECT_EQ(t.device_to_host_bytes, 4 * psi + 16);
    EXPECT_EQ(t.host_to_device_bytes, (bf16 ? 2 : 4) * psi + batch_bytes);
  } else {
    EXPECT_GT(t.device_to_host_calls, 2);  // one per bucket per micro-batch, then the scalars
    EXPECT_EQ(t.device_to_host_bytes, 2 * (bf16 ? 2 : 4) * psi + 16);
    EXPECT_EQ(t.host_to_device_bytes, (bf16 ? 2 : 4) * psi + batch_bytes + 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, OptimizerOffload,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& param_info) {
                           return "stage" + std::to_string(std::get<0>(param_info.param)) +
                                  (std::get<1>(param_info.param) ? "_bf16" : "_f32");
                         });

TEST(OptimizerOffload, CheckpointsMoveBetweenOffloadedAndDeviceRuns) {
  const auto dir = std::filesystem::temp_directory_path() / "zero_offload_ckpt";
  for (const bool save_offloaded : {true, false}) {
    std::filesystem::remove_all(dir);
    backend::CpuBackend cpu;
    comm::SelfComm comm;
    Engine first(small_model("llama", cpu), offload_settings(2, true, save_offloaded), comm);
    first.train_batch(batches(0));
    first.save_checkpoint(dir.string());
    const double expected = first.train_batch(batches(1));
    Engine second(model::build_transformer(small_config("llama"), cpu, DType::kF32),
                  offload_settings(2, true, !save_offloaded), comm);
    second.load_checkpoint(dir.string());
    EXPECT_EQ(second.train_batch(batches(1)), expected) << "saved offloaded: " << save_offloaded;
  }
  std::filesystem::remove_all(dir);
}

// ZeRO-Infinity: the optimizer state in files (io_uring), swept sub-group by sub-group with small
// sub-groups that cut parameters in two, pipelined or not: the same bits as offload to memory.
class NvmeOffload : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("zero_nvme_offload_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  EngineSettings nvme_settings(int stage, bool pipelined) const {
    EngineSettings s = offload_settings(stage, true, true);
    s.zero.offload_optimizer.device = config::OffloadDevice::kNvme;
    s.zero.offload_optimizer.nvme_path = dir_.string();
    s.zero.offload_optimizer.pipeline_read = pipelined;
    s.zero.offload_optimizer.pipeline_write = pipelined;
    s.zero.offload_optimizer.buffer_count = pipelined ? 6 : 2;
    s.zero.sub_group_size = 1000;  // several sub-groups, boundaries inside parameters
    s.aio.block_size = 4096;
    return s;
  }
  std::filesystem::path dir_;
};

TEST_P(NvmeOffload, BitIdenticalToOffloadToMemory) {
  const auto [stage, pipelined] = GetParam();
  backend::CpuBackend cpu;
  const Result memory = train(cpu, offload_settings(stage, true, true), 10);
  const Result nvme = train(cpu, nvme_settings(stage, pipelined), 10);
  EXPECT_EQ(memory.losses, nvme.losses);
  EXPECT_EQ(memory.params, nvme.params);
}

TEST_P(NvmeOffload, StateLivesInFilesAndCheckpointsRoundTrip) {
  const auto [stage, pipelined] = GetParam();
  const auto ckpt = dir_ / "ckpt";
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  const size_t host_before = cpu_allocator().stats().live(MemoryCategory::kOptimizer);
  Engine first(small_model("llama", sim), nvme_settings(stage, pipelined), comm);
  first.train_batch(batches(0));
  // Host memory holds no optimizer state: only the master partition (pinned) and the staging
  // buffers; the state files exist under nvme_path.
  EXPECT_EQ(cpu_allocator().stats().live(MemoryCategory::kOptimizer), host_before);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "zero_swap" / "rank0" / "exp_avg.swp"));
  first.save_checkpoint(ckpt.string());
  const double expected = first.train_batch(batches(1));
  // A run that offloads to memory resumes from it with the same result.
  backend::CpuBackend cpu;
  Engine second(model::build_transformer(small_config("llama"), cpu, DType::kF32),
                offload_settings(stage, true, true), comm);
  second.load_checkpoint(ckpt.string());
  EXPECT_EQ(second.train_batch(batches(1)), expected);
}

INSTANTIATE_TEST_SUITE_P(Stages, NvmeOffload,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& param_info) {
                           return "stage" + std::to_string(std::get<0>(param_info.param)) +
                                  (std::get<1>(param_info.param) ? "_pipelined" : "_serial");
                         });

TEST(NvmeOffload, BadSettingsAreClearErrors) {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  EngineSettings s = offload_settings(2, true, true);
  s.zero.offload_optimizer.device = config::OffloadDevice::kNvme;
  s.zero.offload_optimizer.nvme_path = "/nonexistent/zero_nvme";
  try {
    Engine engine(small_model("llama", cpu), s, comm);
    FAIL() << "a missing nvme_path was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nvme_path"), std::string::npos) << e.what();
  }
  s.zero.offload_optimizer.nvme_path = std::filesystem::temp_directory_path().string();
  s.aio.use_gds = true;
  EXPECT_THROW(Engine(small_model("llama", cpu), s, comm), UnsupportedError);
}

TEST(OptimizerOffload, UnsupportedCombinationsAreClearErrors) {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  EXPECT_THROW(Engine(small_model("llama", cpu), offload_settings(0, false, true), comm), ConfigError);
  EngineSettings bf16_master = offload_settings(2, true, true);
  bf16_master.bf16.bf16_master_weights_and_grads = true;
  try {
    Engine engine(small_model("llama", cpu), bf16_master, comm);
    FAIL() << "bf16 master weights with offload accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16_master_weights_and_grads"), std::string::npos) << e.what();
  }
}

}  // namespace optimizer_offload_test
}  // namespace zero::engine
