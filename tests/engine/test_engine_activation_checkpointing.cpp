// Activation checkpointing under the engine: with every ZeRO stage (stage 3 regathers each
// block's parameters for the recompute) and with bf16, training with checkpointing gives the
// same losses and parameters bit for bit as training without it.
#include <gtest/gtest.h>

#include "comm/self_comm.h"
#include "engine/zero_harness.h"

namespace zero::engine {
namespace activation_checkpointing_test {
using namespace zero_test;

struct TrainedRun {
  std::vector<std::vector<double>> losses;
  std::vector<float> params;
};

TrainedRun train(int stage, bool bf16, bool checkpointing) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  auto net = small_model("llama", cpu);
  net->set_activation_checkpointing(checkpointing);
  EngineSettings s = zero_settings(stage, 2, 2, 1);
  s.bf16.enabled = bf16;
  Engine engine(std::move(net), s, self);
  TrainedRun r;
  for (int step = 0; step < 4; ++step) r.losses.push_back(train_step(engine, step, 0, 8));
  r.params = to_vector(engine.gather_parameters());
  return r;
}

TEST(EngineActivationCheckpointing, EveryStageAndPrecisionTrainsBitForBitTheSame) {
  for (bool bf16 : {false, true}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const TrainedRun plain = train(stage, bf16, false);
      const TrainedRun recomputed = train(stage, bf16, true);
      EXPECT_EQ(recomputed.losses, plain.losses) << "stage " << stage << (bf16 ? " bf16" : " f32");
      EXPECT_EQ(recomputed.params, plain.params) << "stage " << stage << (bf16 ? " bf16" : " f32");
    }
  }
}

}  // namespace activation_checkpointing_test
}  // namespace zero::engine
