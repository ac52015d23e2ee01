// LossScaler: fp16 loss scaling with DeepSpeed 0.19's semantics (runtime/fp16/loss_scaler.py).
//
// Static (fp16.loss_scale > 0): the scale never changes; an overflowed step is still skipped.
// Dynamic (fp16.loss_scale == 0): the scale starts at 2^initial_scale_power and, once per
// optimizer step, update(overflow) applies:
//   overflow:  if hysteresis == 1 (or was configured as 1): the scale halves, never below
//              min_loss_scale - or, already at the minimum, training stops (NumericError);
//              otherwise hysteresis counts down by one. The step is skipped either way.
//   clean:     with consecutive_hysteresis, hysteresis refills to its configured value; when
//              (iteration - last_overflow_iteration) is a multiple of loss_scale_window the
//              scale doubles (and, without consecutive_hysteresis, hysteresis refills).
//   the iteration counter advances after every update.
// DeepSpeed raises a bare exception at the minimum; this one names the step, the recent scale
// history and the first parameters with non-finite gradients, and suggests bf16.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/precision_config.h"

namespace zero::optim {

class LossScaler {
 public:
  explicit LossScaler(const config::Fp16Config& fp16);

  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  int64_t hysteresis() const { return hysteresis_; }
  int64_t iteration() const { return iteration_; }

  // Records one optimizer step's all-reduced overflow verdict. `step` (the global step number)
  // and `nonfinite_names` (called only when training must stop) feed the diagnostic. Returns
  // whether the step must be skipped (= overflow).
  bool update(bool overflow, int64_t step,
              const std::function<std::vector<std::string>()>& nonfinite_names = {});

  // Checkpoint state (bit-exact resume).
  nlohmann::json state_json() const;
  void load_state_json(const nlohmann::json& state);

 private:
  struct Event {
    int64_t step;
    double scale;
    bool overflow;
  };
  void remember(int64_t step, double scale_used, bool overflow);

  bool dynamic_;
  double scale_;
  static constexpr double kFactor = 2.0;  // DeepSpeed's scale_factor
  int64_t window_;
  double min_scale_;
  int64_t delayed_shift_;
  bool consecutive_hysteresis_;
  int64_t hysteresis_;
  int64_t iteration_ = 0;
  int64_t last_overflow_iteration_ = -1;
  std::deque<Event> history_;  // the last few updates, for the diagnostic
};

}  // namespace zero::optim
