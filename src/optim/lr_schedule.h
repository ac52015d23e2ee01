// LR schedules with DeepSpeed's formulas and defaults (WarmupLR, WarmupDecayLR, WarmupCosineLR,
// OneCycle with momentum cycling, LRRangeTest) and a constant schedule when the config has none.
//
// Timing follows DeepSpeed: the schedule starts at last_batch_iteration = -1, the optimizer step
// uses the current lr, and step() is called after each optimizer step. So the lr of optimizer
// step s (0-based) is lr_at(s - 1).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace zero::optim {

// The most steps a schedule counts (its iteration and every step-count parameter such as
// total_num_steps): 2^53, the training-counter limit of checkpoints and `zero train --steps`.
// Schedules compute in doubles, which hold every integer up to it exactly, and the limit keeps
// `iteration + 1` and a step-count difference from ever overflowing.
inline constexpr int64_t kMaxScheduleSteps = int64_t{1} << 53;

struct SchedulerSpec {
  std::string type;  // empty: constant at the optimizer's lr
  nlohmann::json params = nlohmann::json::object();
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  // Throws ConfigError naming "<source>.params.<key>" for unknown or bad params (step counts
  // above kMaxScheduleSteps included), and UnsupportedError for DeepSpeed schedules not built
  // yet.
  static std::unique_ptr<LrSchedule> create(const SchedulerSpec& spec, double optimizer_lr,
                                            const std::string& source);

  virtual double lr_at(int64_t last_batch_iteration) const = 0;
  // (beta1, beta2) to use at an iteration, for schedules that cycle momentum (OneCycle).
  virtual std::optional<std::pair<double, double>> betas_at(int64_t) const { return std::nullopt; }

  int64_t last_batch_iteration() const { return last_batch_iteration_; }
  double current_lr() const { return lr_at(last_batch_iteration_); }
  // Advances one optimizer step; throws Error past kMaxScheduleSteps.
  void step();
  nlohmann::json state_json() const { return {{"last_batch_iteration", last_batch_iteration_}}; }
  // Restores state_json(); throws FileError for a missing, non-integer or out-of-range
  // last_batch_iteration (it must be in [-1, kMaxScheduleSteps]).
  void load_state_json(const nlohmann::json& state);
  // Sets the iteration directly (a validated checkpoint); throws FileError when it is outside
  // [-1, kMaxScheduleSteps].
  void set_last_batch_iteration(int64_t iteration);

 private:
  int64_t last_batch_iteration_ = -1;
};

}  // namespace zero::optim
