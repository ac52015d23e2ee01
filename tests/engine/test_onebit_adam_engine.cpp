// OneBitAdam through the Engine on one rank: past freeze_step it trains on (one rank has nothing
// to compress: the momentum and the frozen variance alone), and the configurations it does not
// combine with are errors that name the setting and the fix.
#include <gtest/gtest.h>

#include <string>

#include "engine/zero_harness.h"
#include "support/text_has.h"

namespace zero::engine {
namespace onebit_adam_engine_test {

using namespace zero_test;
using zero::testing::has;

EngineSettings onebit_settings(int stage) {
  EngineSettings s = zero_settings(stage, 2, 1, 1);
  s.optimizer_type = "OneBitAdam";
  s.optimizer_params = {{"lr", 1e-2}, {"betas", {0.9, 0.9}}, {"freeze_step", 6}};
  return s;
}

TEST(OneBitAdamEngine, OneRankTrainsPastTheFreezeStep) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(small_model("gpt2", cpu), onebit_settings(0), self);
  double at_freeze = 0.0, last = 0.0;
  for (int step = 1; step <= 14; ++step) {
    const double loss = train_step(engine, 0, 0, 8)[0];  // the same batch: a loss to lower
    if (step == 7) at_freeze = loss;
    last = loss;
  }
  EXPECT_EQ(engine.global_steps(), 14);
  EXPECT_LT(last, at_freeze);
}

TEST(OneBitAdamEngine, ZeroStagesAboveZeroAreRefused) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  for (int stage : {1, 2, 3}) {
    try {
      Engine engine(small_model("gpt2", cpu), onebit_settings(stage), self);
      ADD_FAILURE() << "stage " << stage << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(has(e.what(), "zero_optimization.stage " + std::to_string(stage))) << e.what();
      EXPECT_TRUE(has(e.what(), "set zero_optimization.stage to 0")) << e.what();
    }
  }
}

}  // namespace onebit_adam_engine_test
}  // namespace zero::engine
