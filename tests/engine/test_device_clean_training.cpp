// The training step is device-clean: run on the simulated device backend (host memory that host
// code may not touch, backend/sim/), it trains bit-identically to the CPU backend at every ZeRO
// stage and precision, reads the device exactly once per step (the loss and the gradient norm,
// together), uploads only the batch, and allocates no new device memory once the step repeats.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/sim/simulated_device_backend.h"
#include "comm/self_comm.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace device_clean_test {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;
constexpr int64_t kMicro = 2;

struct Variant {
  std::string family;
  int stage;
  bool bf16;
  bool fp16;
  bool checkpointing;
};

EngineSettings settings_for(const Variant& v) {
  EngineSettings s = zero_settings(v.stage, kMicro, 2, 1);
  s.bf16.enabled = v.bf16;
  s.fp16.enabled = v.fp16;
  return s;
}

std::function<model::Batch()> batches(int64_t step, int64_t vocab) {
  auto index = std::make_shared<int64_t>(0);
  return [=] { return batch_for(step, (*index)++, kMicro, kSeqLen, vocab); };
}

std::vector<float> final_parameters(Engine& engine) {
  Tensor full = engine.gather_parameters();
  std::vector<float> out(static_cast<size_t>(full.numel()));
  engine.model().backend().copy_to_host(out.data(), full);
  return out;
}

// Losses of `steps` train_batch calls and the final parameters.
struct TrainingRun {
  std::vector<double> losses;
  std::vector<float> params;
};

TrainingRun train(backend::Backend& backend, const Variant& v, int steps) {
  comm::SelfComm comm;
  auto net = small_model(v.family, backend);
  net->set_activation_checkpointing(v.checkpointing);
  Engine engine(std::move(net), settings_for(v), comm);
  TrainingRun run;
  const int64_t vocab = engine.model().config()->vocab_size;
  for (int step = 0; step < steps; ++step) run.losses.push_back(engine.train_batch(batches(step, vocab)));
  run.params = final_parameters(engine);
  return run;
}

class DeviceClean : public ::testing::TestWithParam<Variant> {};

TEST_P(DeviceClean, TrainsBitIdenticallyToTheCpuBackend) {
  backend::CpuBackend cpu;
  backend::SimulatedDeviceBackend sim;
  const TrainingRun reference = train(cpu, GetParam(), 3);
  const TrainingRun simulated = train(sim, GetParam(), 3);
  ASSERT_EQ(reference.losses.size(), simulated.losses.size());
  for (size_t i = 0; i < reference.losses.size(); ++i) {
    EXPECT_EQ(reference.losses[i], simulated.losses[i]) << "step " << i;
  }
  EXPECT_EQ(reference.params, simulated.params);
}

TEST_P(DeviceClean, OneDeviceReadPerStepAndOnlyTheBatchUploaded) {
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  auto net = small_model(GetParam().family, sim);
  net->set_activation_checkpointing(GetParam().checkpointing);
  Engine engine(std::move(net), settings_for(GetParam()), comm);
  const int64_t vocab = engine.model().config()->vocab_size;
  engine.train_batch(batches(0, vocab));  // warm-up: position ids, rope tables, caches
  for (int step = 1; step < 4; ++step) {
    sim.reset_transfer_stats();
    engine.train_batch(batches(step, vocab));
    const backend::TransferStats& t = sim.transfer_stats();
    EXPECT_EQ(t.device_to_host_calls, 1) << "step " << step;
    EXPECT_EQ(t.device_to_host_bytes, 2 * static_cast<int64_t>(sizeof(double)));
    // Tokens and targets of each of the 2 micro-batches, i64 [2, 8] each.
    EXPECT_EQ(t.host_to_device_calls, 2 * 2) << "step " << step;
    EXPECT_EQ(t.host_to_device_bytes, 2 * 2 * kMicro * kSeqLen * 8);
    EXPECT_EQ(t.synchronizations, 0);
  }
  // Every upload is ordered before the compute that reads it.
  EXPECT_GE(sim.waits_on(backend::StreamKind::kCompute), 8);
}

TEST_P(DeviceClean, NoNewDeviceMemoryInTheSteadyState) {
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  auto net = small_model(GetParam().family, sim);
  net->set_activation_checkpointing(GetParam().checkpointing);
  Engine engine(std::move(net), settings_for(GetParam()), comm);
  const int64_t vocab = engine.model().config()->vocab_size;
  engine.train_batch(batches(0, vocab));
  engine.train_batch(batches(1, vocab));
  const CacheStats warm = sim.caching_allocator().cache_stats();
  const size_t live = sim.allocator().stats().total_live_bytes;
  for (int step = 2; step < 5; ++step) engine.train_batch(batches(step, vocab));
  const CacheStats later = sim.caching_allocator().cache_stats();
  EXPECT_EQ(later.raw_allocations, warm.raw_allocations);
  EXPECT_GT(later.cache_hits, warm.cache_hits);
  EXPECT_EQ(sim.allocator().stats().total_live_bytes, live);  // nothing leaks between steps
  EXPECT_GT(sim.allocator().stats().total_peak_bytes, live);  // activations came and went
}

INSTANTIATE_TEST_SUITE_P(
    StagesAndPrecisions, DeviceClean,
    ::testing::Values(Variant{"gpt2", 0, false, false, false}, Variant{"llama", 0, false, false, true},
                      Variant{"gpt2", 1, true, false, false}, Variant{"llama", 2, false, true, false},
                      Variant{"gpt2", 3, false, false, true}, Variant{"llama", 3, true, false, false}),
    [](const ::testing::TestParamInfo<Variant>& param_info) {
      const Variant& v = param_info.param;
      return v.family + "_stage" + std::to_string(v.stage) + (v.bf16 ? "_bf16" : "") +
             (v.fp16 ? "_fp16" : "") + (v.checkpointing ? "_checkpointing" : "");
    });

TEST(DeviceClean, CheckpointsRoundTripThroughTheDevice) {
  const auto dir = std::filesystem::temp_directory_path() / "zero_device_clean_ckpt";
  std::filesystem::remove_all(dir);
  const Variant v{"llama", 2, true, false, false};
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  Engine first(small_model("llama", sim), settings_for(v), comm);
  const int64_t vocab = first.model().config()->vocab_size;
  first.train_batch(batches(0, vocab));
  first.save_checkpoint(dir.string());
  const double next = first.train_batch(batches(1, vocab));

  auto fresh = model::build_transformer(small_config("llama"), sim, DType::kF32);
  Engine second(std::move(fresh), settings_for(v), comm);
  second.load_checkpoint(dir.string());
  EXPECT_EQ(second.train_batch(batches(1, vocab)), next);
  EXPECT_EQ(final_parameters(first), final_parameters(second));
  std::filesystem::remove_all(dir);
}

TEST(DeviceClean, ForwardReadsTheLossOnlyWhenAsked) {
  backend::SimulatedDeviceBackend sim;
  comm::SelfComm comm;
  Engine engine(small_model("gpt2", sim), settings_for({"gpt2", 0, false, false, false}), comm);
  sim.reset_transfer_stats();
  const double loss = engine.forward(batch_for(0, 0, kMicro, kSeqLen, 37));
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_EQ(sim.transfer_stats().device_to_host_calls, 1);  // like loss.item()
  engine.backward();
}

}  // namespace device_clean_test
}  // namespace zero::engine
