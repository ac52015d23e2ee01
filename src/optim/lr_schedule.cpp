#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>

#include "core/error.h"
#include "optim/json_params.h"

namespace zero::optim {
namespace {

class ConstantSchedule final : public LrSchedule {
 public:
  explicit ConstantSchedule(double lr) : lr_(lr) {}
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// A step-count parameter: a whole number from 0 to kMaxScheduleSteps. Read as a double and
// range-checked before it becomes an integer, so 1e30 or 2^64 (the value "auto" takes from a huge
// `zero train --steps`) is a ConfigError naming the key, not an out-of-range conversion.
int64_t step_count(JsonParams& p, const std::string& where, const char* key, int64_t fallback,
                   bool required = false) {
  // A JSON number is never NaN, so NaN as the fallback marks a missing key.
  const double missing = std::numeric_limits<double>::quiet_NaN();
  const double value = p.number(key, required ? missing : static_cast<double>(fallback));
  if (std::isnan(value)) throw ConfigError(where + "." + key + " is required");
  if (value != std::floor(value) || value > static_cast<double>(kMaxScheduleSteps)) {
    throw ConfigError(where + "." + key + " must be a whole number of steps from 0 to " +
                      std::to_string(kMaxScheduleSteps) + " (2^53), got " + number_text(value) +
                      (std::string(key) == "total_num_steps"
                           ? " (\"auto\" takes it from zero train --steps)"
                           : ""));
  }
  return static_cast<int64_t>(value);
}

// An iteration as a double: the formulas below use it + 1 and differences of step counts, which
// in int64 could overflow near the limits; every value up to 2^53 + 1 is exact as a double.
double as_real(int64_t it) { return static_cast<double>(it); }

// The warmup ramp of WarmupLR/WarmupDecayLR/WarmupCosineLR: gamma in [0, 1] over
// warmup_num_steps (at least 2), logarithmic (DeepSpeed's default) or linear.
struct Warmup {
  int64_t steps = 1000;
  bool log = true;
  double gamma(int64_t it) const {
    if (log) return std::log(as_real(it) + 1.0) / std::log(as_real(steps));
    return as_real(it) / as_real(steps);
  }
};

Warmup read_warmup(JsonParams& p, const std::string& where) {
  Warmup w;
  w.steps = std::max<int64_t>(2, step_count(p, where, "warmup_num_steps", 1000));
  w.log = p.choice("warmup_type", {"log", "linear"}) == "log";
  return w;
}

// WarmupLR: min_lr + (max_lr - min_lr) * gamma, gamma = 1 after warmup; min_lr before the start.
class WarmupLr : public LrSchedule {
 public:
  WarmupLr(JsonParams& p, const std::string& where)
      : min_lr_(p.number("warmup_min_lr", 0.0)), max_lr_(p.number("warmup_max_lr", 0.001)),
        warmup_(read_warmup(p, where)) {}
  double lr_at(int64_t it) const override {
    if (it < 0) return min_lr_;
    return min_lr_ + (max_lr_ - min_lr_) * gamma(it);
  }

 protected:
  virtual double gamma(int64_t it) const { return it < warmup_.steps ? warmup_.gamma(it) : 1.0; }
  double min_lr_, max_lr_;
  Warmup warmup_;
};

// WarmupDecayLR: WarmupLR, then linear decay to 0 at total_num_steps.
class WarmupDecayLr final : public WarmupLr {
 public:
  WarmupDecayLr(JsonParams& p, const std::string& where)
      : WarmupLr(p, where), total_(step_count(p, where, "total_num_steps", 0, true)) {}

 private:
  double gamma(int64_t it) const override {
    if (it < warmup_.steps) return warmup_.gamma(it);
    return std::max(0.0, (as_real(total_) - as_real(it)) /
                             std::max(1.0, as_real(total_) - as_real(warmup_.steps)));
  }
  int64_t total_;
};

// WarmupCosineLR: a ratio of the optimizer's lr — warmup from warmup_min_ratio to 1, then a
// cosine from 1 to cos_min_ratio at total_num_steps; 0 before the start.
class WarmupCosineLr final : public LrSchedule {
 public:
  WarmupCosineLr(JsonParams& p, const std::string& where, double optimizer_lr)
      : base_lr_(optimizer_lr), total_(step_count(p, where, "total_num_steps", 0, true)),
        min_ratio_(p.number("warmup_min_ratio", 0.0)), cos_min_ratio_(p.number("cos_min_ratio", 0.0001)),
        warmup_(read_warmup(p, where)) {}
  double lr_at(int64_t it) const override {
    if (it < 0) return 0.0;
    double ratio;
    if (it < warmup_.steps) {
      ratio = min_ratio_ + warmup_.gamma(it) * (1.0 - min_ratio_);
    } else {
      const double done = as_real(it) - as_real(warmup_.steps) + 1.0;
      const double span = as_real(total_) - as_real(warmup_.steps);
      const double cosine = (1.0 + std::cos(std::numbers::pi * done / span)) / 2.0;
      ratio = std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * cosine);
    }
    return base_lr_ * ratio;
  }

 private:
  double base_lr_;
  int64_t total_;
  double min_ratio_, cos_min_ratio_;
  Warmup warmup_;
};

// LRRangeTest: min_lr * (1 + step_rate * interval), interval = (it + 1) / step_size, floored
// when staircase.
class LrRangeTest final : public LrSchedule {
 public:
  LrRangeTest(JsonParams& p, const std::string& where)
      : min_lr_(p.number("lr_range_test_min_lr", 1e-3)),
        step_size_(as_real(std::max<int64_t>(1, step_count(p, where, "lr_range_test_step_size", 2000)))),
        step_rate_(p.number("lr_range_test_step_rate", 1.0)),
        staircase_(p.boolean("lr_range_test_staircase", false)) {}
  double lr_at(int64_t it) const override {
    if (it < 0) return min_lr_;
    double interval = (as_real(it) + 1.0) / step_size_;
    if (staircase_) interval = std::floor(interval);
    return min_lr_ * (1.0 + step_rate_ * interval);
  }

 private:
  double min_lr_, step_size_, step_rate_;
  bool staircase_;
};

// OneCycle: a triangle from cycle_min_lr up to cycle_max_lr over cycle_first_step_size steps and
// back over cycle_second_step_size (default: the first), then decay; momentum (beta1) moves the
// opposite way between cycle_max_mom and cycle_min_mom. As in DeepSpeed, beta2 is held at 0.99
// while momentum cycles, and the state before the first step is (cycle_min_lr, cycle_min_mom).
class OneCycle final : public LrSchedule {
 public:
  OneCycle(JsonParams& p, const std::string& where)
      : min_lr_(p.number("cycle_min_lr", 0.0)), max_lr_(p.number("cycle_max_lr", 0.0)),
        decay_lr_rate_(p.number("decay_lr_rate", 0.0)), decay_step_size_(p.number("decay_step_size", 0.0)),
        cycle_momentum_(p.boolean("cycle_momentum", true)), min_mom_(p.number("cycle_min_mom", 0.8)),
        max_mom_(p.number("cycle_max_mom", 0.9)), decay_mom_rate_(p.number("decay_mom_rate", 0.0)) {
    const double first = cycle_length(p, where, "cycle_first_step_size", 2000.0);
    const double second = cycle_length(p, where, "cycle_second_step_size", first);
    if (!std::isfinite(decay_step_size_) || decay_step_size_ > static_cast<double>(kMaxScheduleSteps)) {
      throw ConfigError(where + ".decay_step_size must be at most 2^53 steps, got " +
                        number_text(decay_step_size_));
    }
    // DeepSpeed reads but does not apply the stair counts.
    (void)step_count(p, where, "cycle_first_stair_count", 0);
    (void)step_count(p, where, "cycle_second_stair_count", 0);
    total_ = first + second;
    step_ratio_ = first / total_;
  }
  double lr_at(int64_t it) const override {
    if (it < 0) return min_lr_;
    if (static_cast<double>(it) < total_) return min_lr_ + (max_lr_ - min_lr_) * scale(it);
    if (decay_step_size_ == 0.0 || decay_lr_rate_ == 0.0) return min_lr_;
    const double interval = (static_cast<double>(it) - total_ + 1) / decay_step_size_;
    return min_lr_ / (1.0 + decay_lr_rate_ * interval);
  }
  std::optional<std::pair<double, double>> betas_at(int64_t it) const override {
    if (!cycle_momentum_) return std::nullopt;
    if (it < 0) return std::pair{min_mom_, 0.99};
    if (static_cast<double>(it) < total_) return std::pair{max_mom_ - (max_mom_ - min_mom_) * scale(it), 0.99};
    if (decay_step_size_ == 0.0 || decay_mom_rate_ == 0.0) return std::pair{max_mom_, 0.99};
    const double interval = (static_cast<double>(it) - total_ + 1) / decay_step_size_;
    return std::pair{max_mom_ * (1.0 + decay_mom_rate_ * interval), 0.99};
  }

 private:
  // Position in the triangle: 0 at the ends, 1 at the peak.
  double scale(int64_t it) const {
    const double iteration = as_real(it) + 1.0;
    const double cycle = std::floor(1.0 + iteration / total_);
    const double x = 1.0 + iteration / total_ - cycle;
    return x <= step_ratio_ ? x / step_ratio_ : (x - 1.0) / (step_ratio_ - 1.0);
  }
  // A cycle half in steps: positive, at most kMaxScheduleSteps (fractions allowed, as DeepSpeed).
  static double cycle_length(JsonParams& p, const std::string& where, const char* key, double fallback) {
    const double value = p.number(key, fallback, true);
    if (!std::isfinite(value) || value > static_cast<double>(kMaxScheduleSteps)) {
      throw ConfigError(where + "." + key + " must be a positive number of steps up to 2^53, got " +
                        number_text(value));
    }
    return value;
  }
  double min_lr_, max_lr_, decay_lr_rate_, decay_step_size_;
  bool cycle_momentum_;
  double min_mom_, max_mom_, decay_mom_rate_;
  double total_ = 0.0, step_ratio_ = 0.5;
};

}  // namespace

void LrSchedule::step() {
  if (last_batch_iteration_ >= kMaxScheduleSteps) {
    throw Error("the learning-rate schedule has counted " + std::to_string(kMaxScheduleSteps) +
                " (2^53) steps, the most it can; start a fresh run");
  }
  ++last_batch_iteration_;
}

void LrSchedule::set_last_batch_iteration(int64_t iteration) {
  if (iteration < -1 || iteration > kMaxScheduleSteps) {
    throw FileError("scheduler state: last_batch_iteration must be from -1 to " +
                    std::to_string(kMaxScheduleSteps) + " (2^53), got " + std::to_string(iteration));
  }
  last_batch_iteration_ = iteration;
}

void LrSchedule::load_state_json(const nlohmann::json& state) {
  const nlohmann::json* value =
      state.is_object() && state.contains("last_batch_iteration") ? &state["last_batch_iteration"] : nullptr;
  // Signed integers only: an unsigned JSON number above 2^63 - 1 or a float must not wrap.
  if (value == nullptr || !value->is_number_integer() || value->is_number_unsigned()) {
    if (value != nullptr && value->is_number_unsigned() &&
        value->get<uint64_t>() <= static_cast<uint64_t>(kMaxScheduleSteps)) {
      set_last_batch_iteration(static_cast<int64_t>(value->get<uint64_t>()));
      return;
    }
    throw FileError("scheduler state needs an integer last_batch_iteration from -1 to 2^53, got " +
                    (value == nullptr ? std::string("nothing") : value->dump()));
  }
  set_last_batch_iteration(value->get<int64_t>());
}

std::unique_ptr<LrSchedule> LrSchedule::create(const SchedulerSpec& spec, double optimizer_lr,
                                               const std::string& source) {
  if (spec.type.empty()) return std::make_unique<ConstantSchedule>(optimizer_lr);
  const std::string where = source + ".params";
  JsonParams p(spec.params, where);
  p.accept("last_batch_iteration");
  std::unique_ptr<LrSchedule> out;
  if (spec.type == "WarmupLR") {
    out = std::make_unique<WarmupLr>(p, where);
  } else if (spec.type == "WarmupDecayLR") {
    out = std::make_unique<WarmupDecayLr>(p, where);
  } else if (spec.type == "WarmupCosineLR") {
    out = std::make_unique<WarmupCosineLr>(p, where, optimizer_lr);
  } else if (spec.type == "LRRangeTest") {
    out = std::make_unique<LrRangeTest>(p, where);
  } else if (spec.type == "OneCycle") {
    out = std::make_unique<OneCycle>(p, where);
  } else {
    throw ConfigError(source + ".type = \"" + spec.type +
                      "\" is not a DeepSpeed scheduler; use WarmupLR, WarmupDecayLR, "
                      "WarmupCosineLR, OneCycle or LRRangeTest");
  }
  p.reject_unknown();
  return out;
}

}  // namespace zero::optim
