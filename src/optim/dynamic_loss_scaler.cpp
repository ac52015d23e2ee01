#include "optim/dynamic_loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace zero::optim {

LossScaler::LossScaler(const config::Fp16Config& fp16)
    : dynamic_(fp16.loss_scale == 0.0),
      scale_(fp16.loss_scale == 0.0 ? std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power))
                                    : fp16.loss_scale),
      window_(fp16.loss_scale_window),
      min_scale_(fp16.min_loss_scale),
      delayed_shift_(fp16.hysteresis),
      consecutive_hysteresis_(fp16.consecutive_hysteresis),
      hysteresis_(fp16.hysteresis) {
  if (dynamic_ && (window_ < 1 || min_scale_ <= 0.0 || delayed_shift_ < 1)) {
    throw ConfigError("fp16: dynamic loss scaling needs loss_scale_window >= 1 (got " +
                      std::to_string(window_) + "), hysteresis >= 1 (got " +
                      std::to_string(delayed_shift_) + ") and min_loss_scale > 0 (got " +
                      std::to_string(min_scale_) + ")");
  }
}

void LossScaler::remember(int64_t step, double scale_used, bool overflow) {
  history_.push_back({step, scale_used, overflow});
  if (history_.size() > 12) history_.pop_front();
}

bool LossScaler::update(bool overflow, int64_t step,
                        const std::function<std::vector<std::string>()>& nonfinite_names) {
  if (!dynamic_) return overflow;
  const double scale_used = scale_;  // the history shows the scale each step's loss was scaled by
  if (overflow) {
    if (delayed_shift_ == 1 || hysteresis_ == 1) {
      if (scale_ == min_scale_) {
        std::ostringstream message;
        message << "fp16 gradients overflowed at step " << step << " with the loss scale already at "
                << "fp16.min_loss_scale = " << min_scale_ << "; recent steps (step: scale, verdict):";
        for (const Event& e : history_) {
          message << " " << e.step << ": " << e.scale << (e.overflow ? " overflow" : " ok") << ";";
        }
        message << " " << step << ": " << scale_ << " overflow.";
        if (nonfinite_names) {
          const std::vector<std::string> names = nonfinite_names();
          if (!names.empty()) {
            message << " First parameters with non-finite gradients on this rank:";
            for (const std::string& n : names) message << " " << n;
            message << ".";
          }
        }
        message << " The model's values exceed fp16's range: use \"bf16\": {\"enabled\": true} "
                   "(same exponent range as fp32), lower the learning rate, or lower min_loss_scale";
        throw NumericError(message.str());
      }
      scale_ = std::max(scale_ / kFactor, min_scale_);
    } else {
      --hysteresis_;
    }
    last_overflow_iteration_ = iteration_;
  } else {
    if (consecutive_hysteresis_) hysteresis_ = delayed_shift_;
    if ((iteration_ - last_overflow_iteration_) % window_ == 0) {
      if (!consecutive_hysteresis_) hysteresis_ = delayed_shift_;
      scale_ *= kFactor;
    }
  }
  remember(step, scale_used, overflow);
  ++iteration_;
  return overflow;
}

nlohmann::json LossScaler::state_json() const {
  return {{"scale", scale_},
          {"hysteresis", hysteresis_},
          {"iteration", iteration_},
          {"last_overflow_iteration", last_overflow_iteration_}};
}

void LossScaler::load_state_json(const nlohmann::json& state) {
  scale_ = state.at("scale").get<double>();
  hysteresis_ = state.at("hysteresis").get<int64_t>();
  iteration_ = state.at("iteration").get<int64_t>();
  last_overflow_iteration_ = state.at("last_overflow_iteration").get<int64_t>();
}

}  // namespace zero::optim
