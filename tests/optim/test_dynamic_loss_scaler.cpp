// DeepSpeed 0.19's dynamic loss scaling, step by step: scripted overflow sequences against
// trajectories worked out by hand from loss_scaler.py's rules (hysteresis 1 and 2, consecutive
// hysteresis on and off, the scale window, the minimum scale), static scaling, and state
// round-trips for resume.
#include <gtest/gtest.h>

#include "core/error.h"
#include "optim/dynamic_loss_scaler.h"

namespace zero::optim {
namespace {

config::Fp16Config fp16(int64_t power, int64_t window, int64_t hysteresis, bool consecutive,
                        int64_t min_scale = 1) {
  config::Fp16Config c;
  c.enabled = true;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hysteresis;
  c.consecutive_hysteresis = consecutive;
  c.min_loss_scale = min_scale;
  return c;
}

struct Expect {
  bool overflow;
  double scale_after;
  int64_t hysteresis_after;
};

void run(LossScaler& s, const std::vector<Expect>& script) {
  int64_t step = 1;
  for (const Expect& e : script) {
    EXPECT_EQ(s.update(e.overflow, step), e.overflow) << "step " << step;
    EXPECT_EQ(s.scale(), e.scale_after) << "step " << step;
    EXPECT_EQ(s.hysteresis(), e.hysteresis_after) << "step " << step;
    ++step;
  }
}

TEST(LossScaler, HysteresisOneHalvesOnEveryOverflowAndDoublesAfterTheWindow) {
  LossScaler s(fp16(4, 3, 1, false));  // 16, window 3
  EXPECT_EQ(s.scale(), 16.0);
  // iter 0 overflow: 16 -> 8, last_overflow = 0. iter 1, 2 clean: (1-0)%3, (2-0)%3 != 0.
  // iter 3 clean: (3-0)%3 == 0 -> 16. iter 4 overflow -> 8. iters 5,6 clean, 7: (7-4)%3 == 0 -> 16.
  run(s, {{true, 8, 1}, {false, 8, 1}, {false, 8, 1}, {false, 16, 1}, {true, 8, 1},
          {false, 8, 1}, {false, 8, 1}, {false, 16, 1}});
}

TEST(LossScaler, HysteresisTwoAbsorbsOneOverflow) {
  LossScaler s(fp16(4, 4, 2, false));
  // iter 0 overflow: hysteresis 2 -> 1, scale stays. iter 1 overflow: hysteresis 1 -> halve to 8.
  // iters 2, 3, 4 clean ((i-1)%4 != 0); iter 5: (5-1)%4 == 0 -> 16 and hysteresis refills to 2.
  run(s, {{true, 16, 1}, {true, 8, 1}, {false, 8, 1}, {false, 8, 1}, {false, 8, 1}, {false, 16, 2}});
  // Without consecutive hysteresis one clean step does not refill: overflow, clean, overflow
  // halves at the second overflow.
  LossScaler t(fp16(4, 100, 2, false));
  run(t, {{true, 16, 1}, {false, 16, 1}, {true, 8, 1}});
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaler s(fp16(4, 100, 2, true));
  // overflow (2 -> 1), clean (refill to 2), overflow (2 -> 1): the scale never drops.
  run(s, {{true, 16, 1}, {false, 16, 2}, {true, 16, 1}, {false, 16, 2}, {true, 16, 1}});
  // Two overflows in a row still halve.
  run(s, {{true, 8, 1}});
}

TEST(LossScaler, MinimumScaleIsAFloorAndThenAStopWithADiagnosis) {
  LossScaler s(fp16(2, 1000, 1, false, 2));  // 4, minimum 2
  run(s, {{true, 2, 1}});                      // 4 -> 2 (the floor)
  try {
    s.update(true, 7, [] { return std::vector<std::string>{"model.layers.0.mlp.down_proj.weight"}; });
    FAIL() << "an overflow at the minimum scale did not stop training";
  } catch (const NumericError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("step 7"), std::string::npos) << m;
    EXPECT_NE(m.find("min_loss_scale = 2"), std::string::npos) << m;
    EXPECT_NE(m.find("1: 4 overflow"), std::string::npos) << m;  // the history
    EXPECT_NE(m.find("model.layers.0.mlp.down_proj.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("bf16"), std::string::npos) << m;
  }
  // A halving that would go below the minimum clamps to it.
  LossScaler t(fp16(2, 1000, 1, false, 3));
  run(t, {{true, 3, 1}});
}

TEST(LossScaler, StaticScaleNeverChangesButOverflowStillSkips) {
  config::Fp16Config c = fp16(16, 1000, 2, false);
  c.loss_scale = 128;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  EXPECT_TRUE(s.update(true, 1));
  EXPECT_FALSE(s.update(false, 2));
  EXPECT_EQ(s.scale(), 128.0);
}

TEST(LossScaler, StateRoundTripsForResume) {
  LossScaler a(fp16(8, 3, 2, false));
  a.update(true, 1);
  a.update(true, 2);
  a.update(false, 3);
  LossScaler b(fp16(8, 3, 2, false));
  b.load_state_json(a.state_json());
  for (bool overflow : {false, false, true, false, false, false}) {
    a.update(overflow, 0);
    b.update(overflow, 0);
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.hysteresis(), b.hysteresis());
  }
}

TEST(LossScaler, BadDynamicSettingsAreConfigErrors) {
  EXPECT_THROW(LossScaler(fp16(16, 0, 2, false)), ConfigError);
  EXPECT_THROW(LossScaler(fp16(16, 1000, 0, false)), ConfigError);
  EXPECT_THROW(LossScaler(fp16(16, 1000, 2, false, 0)), ConfigError);
}

}  // namespace
}  // namespace zero::optim
