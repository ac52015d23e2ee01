// LR schedules at the edge of their counters: a total_num_steps of 2^63 - 1 (what "auto" becomes
// with `zero train --steps 9223372036854775807`) or 2^64 is a ConfigError naming the key instead
// of an out-of-range conversion and overflowing `total - it`, iterations near the limit give
// finite learning rates, and a restored iteration is range-checked.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace zero::optim {
namespace {

using nlohmann::json;

std::string config_error_of(const SchedulerSpec& spec) {
  try {
    (void)LrSchedule::create(spec, 0.1, "scheduler");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ScheduleLimits, TotalNumStepsAtInt64MaxIsAConfigErrorNamingTheKey) {
  const json huge[] = {json(std::numeric_limits<int64_t>::max()),
                       json(std::numeric_limits<uint64_t>::max()),
                       json::parse("18446744073709551616"), json(1e300)};
  for (const char* type : {"WarmupDecayLR", "WarmupCosineLR"}) {
    for (const json& value : huge) {
      const std::string message = config_error_of({type, {{"total_num_steps", value}}});
      EXPECT_NE(message.find("scheduler.params.total_num_steps"), std::string::npos)
          << type << " " << value << ": " << message;
    }
  }
  EXPECT_NE(config_error_of({"WarmupLR", {{"warmup_num_steps", 1e30}}}).find("warmup_num_steps"),
            std::string::npos);
  EXPECT_NE(config_error_of({"LRRangeTest", {{"lr_range_test_step_size", 1e30}}})
                .find("lr_range_test_step_size"),
            std::string::npos);
  EXPECT_NE(config_error_of({"OneCycle", {{"cycle_first_step_size", 1e300}}}).find("cycle_first_step_size"),
            std::string::npos);
  EXPECT_NE(config_error_of({"WarmupCosineLR", {{"total_num_steps", 2.5}}}).find("whole number"),
            std::string::npos);
}

TEST(ScheduleLimits, LargestStepCountsGiveFiniteRatesAtTheLastIteration) {
  const json max = kMaxScheduleSteps;
  const SchedulerSpec specs[] = {
      {"WarmupLR", {{"warmup_num_steps", max}}},
      {"WarmupDecayLR", {{"warmup_num_steps", 10}, {"total_num_steps", max}}},
      {"WarmupCosineLR", {{"warmup_num_steps", max}, {"total_num_steps", max}}},
      {"WarmupCosineLR", {{"warmup_num_steps", 10}, {"total_num_steps", max}}},
      {"LRRangeTest", {{"lr_range_test_step_size", 1}}},
      {"OneCycle", {{"cycle_first_step_size", max}, {"cycle_max_lr", 0.1}, {"decay_lr_rate", 0.1}, {"decay_step_size", 1}}},
  };
  for (const SchedulerSpec& spec : specs) {
    auto schedule = LrSchedule::create(spec, 0.1, "scheduler");
    for (const int64_t it : {int64_t{-1}, int64_t{0}, kMaxScheduleSteps - 1, kMaxScheduleSteps}) {
      EXPECT_TRUE(std::isfinite(schedule->lr_at(it))) << spec.type << " at " << it;
      if (auto betas = schedule->betas_at(it)) {
        EXPECT_TRUE(std::isfinite(betas->first)) << spec.type;
      }
    }
  }
}

TEST(ScheduleLimits, StepPastTheLimitAndOutOfRangeStatesAreRefused) {
  auto schedule = LrSchedule::create({"", {}}, 0.1, "scheduler");
  schedule->set_last_batch_iteration(kMaxScheduleSteps);
  EXPECT_THROW(schedule->step(), Error);
  EXPECT_EQ(schedule->last_batch_iteration(), kMaxScheduleSteps);
  EXPECT_THROW(schedule->set_last_batch_iteration(-2), FileError);
  EXPECT_THROW(schedule->set_last_batch_iteration(std::numeric_limits<int64_t>::max()), FileError);
  for (const json& state : {json::object(), json{{"last_batch_iteration", "3"}},
                            json{{"last_batch_iteration", json::parse("18446744073709551616")}},
                            json{{"last_batch_iteration", std::numeric_limits<uint64_t>::max()}},
                            json{{"last_batch_iteration", std::numeric_limits<int64_t>::max()}},
                            json{{"last_batch_iteration", 1.5}}}) {
    EXPECT_THROW(schedule->load_state_json(state), FileError) << state;
  }
  schedule->load_state_json({{"last_batch_iteration", 7}});
  EXPECT_EQ(schedule->last_batch_iteration(), 7);
}

}  // namespace
}  // namespace zero::optim
