// DeepSpeed's partial optimizer offload (zero_optimization.offload_optimizer.ratio < 1, ZeRO
// stage 3): the first sub-groups - rounded to whole units - keep their master weights and
// optimizer state on the device and update there, the rest on the host. Proofs: bit-identical
// losses and parameters to no offload and to full offload, for several ratios (0 and 1 the
// extremes), f32 and bf16, with parameter offload too, from the CPU backend and the simulated
// device; the device holds exactly the device part's optimizer bytes; checkpoints move between
// partial, full and no offload; the unsupported combinations are clear errors.
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
namespace partial_offload_test {
using namespace zero_test;
using offload_runs::batches;
using offload_runs::kSeqLen;
using offload_runs::Result;
using offload_runs::train;
using config::OffloadDevice;

// ratio < 0: no optimizer offload.
EngineSettings settings(bool bf16, double ratio, OffloadDevice params = OffloadDevice::kNone) {
  EngineSettings s = zero_settings(3, 2, 2, 1);
  s.bf16.enabled = bf16;
  if (ratio >= 0.0) {
    s.zero.offload_optimizer.device = OffloadDevice::kCpu;
    s.zero.offload_optimizer.pin_memory = true;
    s.zero.offload_optimizer.ratio = ratio;
  }
  s.zero.offload_param.device = params;
  s.zero.sub_group_size = 4000;  // several sub-groups in the tiny model
  return s;
}

TEST(PartialOffload, BitIdenticalToNoAndFullOffload) {
  for (const bool bf16 : {false, true}) {
    backend::CpuBackend cpu;
    const Result none = train(cpu, settings(bf16, -1.0), 6);
    const Result full = train(cpu, settings(bf16, 1.0), 6);
    EXPECT_EQ(full.losses, none.losses);
    for (const double ratio : {0.0, 0.3, 0.5, 0.9}) {
      for (const OffloadDevice params : {OffloadDevice::kNone, OffloadDevice::kCpu}) {
        const Result partial = train(cpu, settings(bf16, ratio, params), 6);
        EXPECT_EQ(partial.losses, none.losses) << "bf16 " << bf16 << " ratio " << ratio;
        EXPECT_EQ(partial.params, none.params) << "bf16 " << bf16 << " ratio " << ratio;
      }
    }
    backend::SimulatedDeviceBackend sim;
    const Result on_device = train(sim, settings(bf16, 0.5), 6);
    EXPECT_EQ(on_device.losses, none.losses);
    EXPECT_EQ(on_device.params, none.params);
  }
}

TEST(PartialOffload, TheDeviceHoldsTheDevicePartsOptimizerBytes) {
  for (const double ratio : {0.0, 0.5, 1.0}) {
    backend::SimulatedDeviceBackend sim;
    comm::SelfComm comm;
    Engine engine(small_model("llama", sim), settings(true, ratio), comm);
    engine.train_batch(batches(0));
    const sharding::ZeroStage& zero = engine.zero_stage();
    const int64_t n = zero.layout().partition_numel();
    const int64_t split = zero.device_update_numel();
    // DeepSpeed: the first int((1 - ratio) * sub-groups) sub-groups, here rounded up to a unit.
    const int64_t sub_groups = (n + 3999) / 4000;
    const int64_t target = std::min<int64_t>(n, static_cast<int64_t>((1.0 - ratio) * sub_groups) * 4000);
    EXPECT_GE(split, target) << ratio;
    bool unit_boundary = split == 0 || split == n;
    for (const auto& part : zero.layout().units()) unit_boundary |= part.partition_offset == split;
    EXPECT_TRUE(unit_boundary) << split;
    if (ratio == 0.0) {
      EXPECT_EQ(split, n);
    }
    if (ratio == 1.0) {
      EXPECT_EQ(split, 0);
    }
    // The device part's f32 master weights and AdamW's two moments, nothing more.
    EXPECT_EQ(sim.allocator().stats().live(MemoryCategory::kOptimizer), static_cast<size_t>(12 * split));
  }
}

TEST(PartialOffload, CheckpointsMoveBetweenPartialFullAndNoOffload) {
  const auto dir = std::filesystem::temp_directory_path() / ("zero_partial_offload_" + std::to_string(::getpid()));
  const std::vector<std::pair<double, double>> pairs = {{0.5, 1.0}, {1.0, 0.5}, {0.5, -1.0}, {-1.0, 0.3}};
  for (const auto& [saved, loaded] : pairs) {
    std::filesystem::remove_all(dir);
    backend::CpuBackend cpu;
    comm::SelfComm comm;
    double expected = 0.0;
    {
      Engine first(small_model("llama", cpu), settings(true, saved), comm);
      first.train_batch(batches(0));
      first.train_batch(batches(1));
      first.save_checkpoint(dir.string());
      expected = first.train_batch(batches(2));
      first.train_batch(batches(3));
    }
    Engine second(model::build_transformer(small_config("llama"), cpu, DType::kF32), settings(true, loaded), comm);
    second.load_checkpoint(dir.string());
    EXPECT_EQ(second.train_batch(batches(2)), expected) << saved << " -> " << loaded;
  }
  std::filesystem::remove_all(dir);
}

TEST(PartialOffload, UnsupportedCombinationsAreClearErrors) {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  EngineSettings stage2 = settings(false, 0.5);
  stage2.zero.stage = 2;
  try {
    Engine engine(small_model("llama", cpu), stage2, comm);
    FAIL() << "ratio at stage 2 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zero_optimization.offload_optimizer.ratio"), std::string::npos) << e.what();
  }
  EngineSettings nvme = settings(false, 0.5);
  nvme.zero.offload_optimizer.device = OffloadDevice::kNvme;
  nvme.zero.offload_optimizer.nvme_path = std::filesystem::temp_directory_path().string();
  EXPECT_THROW(Engine(small_model("llama", cpu), nvme, comm), UnsupportedError);
}

}  // namespace partial_offload_test
}  // namespace zero::engine
