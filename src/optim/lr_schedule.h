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

struct SchedulerSpec {
  std::string type;  // empty: constant at the optimizer's lr
  nlohmann::json params = nlohmann::json::object();
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  // Throws ConfigError naming "<source>.params.<key>" for unknown or bad params, and
  // UnsupportedError for DeepSpeed schedules not built yet.
  static std::unique_ptr<LrSchedule> create(const SchedulerSpec& spec, double optimizer_lr,
                                            const std::string& source);

  virtual double lr_at(int64_t last_batch_iteration) const = 0;
  // (beta1, beta2) to use at an iteration, for schedules that cycle momentum (OneCycle).
  virtual std::optional<std::pair<double, double>> betas_at(int64_t) const { return std::nullopt; }

  int64_t last_batch_iteration() const { return last_batch_iteration_; }
  double current_lr() const { return lr_at(last_batch_iteration_); }
  void step() { ++last_batch_iteration_; }
  nlohmann::json state_json() const { return {{"last_batch_iteration", last_batch_iteration_}}; }
  void load_state_json(const nlohmann::json& state);

 private:
  int64_t last_batch_iteration_ = -1;
};

}  // namespace zero::optim
