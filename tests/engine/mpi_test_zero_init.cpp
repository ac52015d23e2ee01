// mpi-ranks: 2 3
// zero.Init across processes: each rank builds only its shards of a model built partitioned
// (model/partitioned_init.h), and training at ZeRO stage 3 gives exactly the losses and
// parameters of the same model built whole on every rank and partitioned after - f32 and bf16,
// two model families, with the partition on the device and in host memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/world.h"
#include "engine/zero_harness.h"
#include "model/partitioned_init.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 5;
constexpr int64_t kSeqLen = 8;

std::vector<double> train(std::unique_ptr<model::Model> net, backend::Backend& backend, bool bf16,
                          config::OffloadDevice params, std::vector<float>* out) {
  comm::Comm& world = comm::world();
  EngineSettings s = zero_settings(3, 2, 1, world.world_size());
  s.bf16.enabled = bf16;
  s.zero.offload_param.device = params;
  Engine engine(std::move(net), s, world);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    for (double loss : train_step(engine, step, world.rank(), kSeqLen)) losses.push_back(loss);
  }
  Tensor full = engine.gather_parameters();
  out->resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(out->data(), full);
  return losses;
}

TEST(ZeroInitAcrossRanks, EqualsTheWholeModelPartitionedAfter) {
  for (const std::string family : {"llama", "gpt2"}) {
    for (const bool bf16 : {false, true}) {
      for (const auto params : {config::OffloadDevice::kNone, config::OffloadDevice::kCpu}) {
        backend::CpuBackend cpu;
        std::vector<float> whole_params, partitioned_params;
        const auto whole = train(small_model(family, cpu), cpu, bf16, params, &whole_params);
        const model::TransformerConfig config = small_config(family);
        auto partitioned_net = model::build_transformer_partitioned(
            config, cpu, DType::kF32, model::initial_unit_values(config, 11));
        const auto partitioned = train(std::move(partitioned_net), cpu, bf16, params, &partitioned_params);
        EXPECT_EQ(partitioned, whole) << family << " bf16 " << bf16;
        EXPECT_EQ(partitioned_params, whole_params) << family << " bf16 " << bf16;
      }
    }
  }
}

}  // namespace
}  // namespace zero::engine
