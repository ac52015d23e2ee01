// DeepSpeed's zero.Init for ZeRO stage 3: a model built partitioned (model/partitioned_init.h)
// never exists whole - neither on the device nor in host memory - and trains bit for bit like
// the same model built whole and partitioned after, in f32 and bf16, with the partition on the
// device or offloaded; other stages refuse it with a clear error.
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
#include "engine/zero_harness.h"
#include "model/hf_checkpoint.h"
#include "model/hf_unit_values.h"
#include "model/partitioned_init.h"

namespace zero::engine {
namespace zero_init_test {
using namespace zero_test;
using config::OffloadDevice;

constexpr int64_t kSeqLen = 8;
constexpr uint64_t kSeed = 11;  // small_model's seed


std::unique_ptr<model::Model> partitioned_model(const std::string& family, backend::Backend& backend) {
  const model::TransformerConfig config = small_config(family);
  return model::build_transformer_partitioned(config, backend, DType::kF32,
                                              model::initial_unit_values(config, kSeed));
}

EngineSettings stage3(bool bf16, OffloadDevice params = OffloadDevice::kNone) {
  EngineSettings s = zero_settings(3, 2, 2, 1);
  s.bf16.enabled = bf16;
  s.zero.offload_param.device = params;
  return s;
}

using Result = TrainedRun;

Result train(std::unique_ptr<model::Model> net, const EngineSettings& s) {
  return train_one_rank(std::move(net), s, 6, kSeqLen);
}

TEST(ZeroInit, TrainsLikeTheWholeModelPartitionedAfter) {
  for (const std::string family : {"llama", "gpt2"}) {
    for (const bool bf16 : {false, true}) {
      for (const OffloadDevice params : {OffloadDevice::kNone, OffloadDevice::kCpu}) {
        backend::CpuBackend cpu;
        const Result whole = train(small_model(family, cpu), stage3(bf16, params));
        const Result partitioned = train(partitioned_model(family, cpu), stage3(bf16, params));
        EXPECT_EQ(partitioned.losses, whole.losses) << family << " bf16 " << bf16;
        EXPECT_EQ(partitioned.params, whole.params) << family << " bf16 " << bf16;
      }
    }
  }
}

TEST(ZeroInit, HuggingFaceFoldersTrainLikeTheWholeModelLoaded) {
  for (const std::string folder : {"tiny-gpt2", "tiny-llama"}) {
    const std::string dir = std::string(ZERO_TEST_FIXTURES) + "/hf/" + folder;
    backend::CpuBackend cpu;
    const Result whole = train_one_rank(model::load_hf_model(dir, cpu, DType::kF32),
                                        stage3(true, OffloadDevice::kCpu), 3, kSeqLen);
    const Result partitioned = train_one_rank(model::load_hf_model_partitioned(dir, cpu, DType::kF32),
                                              stage3(true, OffloadDevice::kCpu), 3, kSeqLen);
    EXPECT_EQ(partitioned.losses, whole.losses) << folder;
    EXPECT_EQ(partitioned.params, whole.params) << folder;
  }
}

TEST(ZeroInit, TheWholeModelNeverExists) {
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  auto net = partitioned_model("llama", sim);
  const int64_t whole_bytes = 4 * net->num_parameters();
  EXPECT_FALSE(net->flat_params().defined());
  EXPECT_FALSE(net->flat_grads().defined());
  cpu_allocator().reset_peaks();
  sim.allocator().reset_peaks();
  Engine engine(std::move(net), stage3(true, OffloadDevice::kCpu), comm);
  // Parameters offloaded: no parameter bytes on the device at any time during construction,
  // and the host held one unit's values at a time (the largest unit is well under the whole).
  EXPECT_EQ(sim.allocator().stats().peak(MemoryCategory::kParams), 0u);
  EXPECT_LT(static_cast<int64_t>(cpu_allocator().stats().peak(MemoryCategory::kOther)), whole_bytes / 2);
  EXPECT_EQ(engine.model().value_source(), nullptr) << "the source is freed once the partition is built";
  // Built whole, the device held every parameter first.
  backend::SimulatedDeviceBackend sim2;
  auto eager = small_model("llama", sim2);
  EXPECT_GE(static_cast<int64_t>(sim2.allocator().stats().peak(MemoryCategory::kParams)), whole_bytes);
}

TEST(ZeroInit, OtherStagesRefuseAPartitionedModel) {
  backend::CpuBackend cpu;
  comm::SelfComm comm;
  for (const int stage : {0, 1, 2}) {
    try {
      Engine engine(partitioned_model("llama", cpu), zero_settings(stage, 2, 1, 1), comm);
      FAIL() << "stage " << stage << " accepted a partitioned model";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("zero.Init"), std::string::npos) << e.what();
    }
  }
}

}  // namespace zero_init_test
}  // namespace zero::engine
