#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

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

// The warmup ramp of WarmupLR/WarmupDecayLR/WarmupCosineLR: gamma in [0, 1] over
// warmup_num_steps (at least 2), logarithmic (DeepSpeed's default) or linear.
struct Warmup {
  int64_t steps = 1000;
  bool log = true;
  double gamma(int64_t it) const {
    if (log) return std::log(static_cast<double>(it + 1)) / std::log(static_cast<double>(steps));
    return static_cast<double>(it) / static_cast<double>(steps);
  }
};

Warmup read_warmup(JsonParams& p) {
  Warmup w;
  w.steps = std::max<int64_t>(2, p.integer("warmup_num_steps", 1000));
  w.log = p.choice("warmup_type", {"log", "linear"}) == "log";
  return w;
}

// WarmupLR: min_lr + (max_lr - min_lr) * gamma, gamma = 1 after warmup; min_lr before the start.
class WarmupLr : public LrSchedule {
 public:
  explicit WarmupLr(JsonParams& p)
      : min_lr_(p.number("warmup_min_lr", 0.0)), max_lr_(p.number("warmup_max_lr", 0.001)),
        warmup_(read_warmup(p)) {}
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
  explicit WarmupDecayLr(JsonParams& p) : WarmupLr(p), total_(p.required_integer("total_num_steps")) {}

 private:
  double gamma(int64_t it) const override {
    if (it < warmup_.steps) return warmup_.gamma(it);
    return std::max(0.0, static_cast<double>(total_ - it) /
                             std::max(1.0, static_cast<double>(total_ - warmup_.steps)));
  }
  int64_t total_;
};

// WarmupCosineLR: a ratio of the optimizer's lr — warmup from warmup_min_ratio to 1, then a
// cosine from 1 to cos_min_ratio at total_num_steps; 0 before the start.
class WarmupCosineLr final : public LrSchedule {
 public:
  WarmupCosineLr(JsonParams& p, double optimizer_lr)
      : base_lr_(optimizer_lr), total_(p.required_integer("total_num_steps")),
        min_ratio_(p.number("warmup_min_ratio", 0.0)), cos_min_ratio_(p.number("cos_min_ratio", 0.0001)),
        warmup_(read_warmup(p)) {}
  double lr_at(int64_t it) const override {
    if (it < 0) return 0.0;
    double ratio;
    if (it < warmup_.steps) {
      ratio = min_ratio_ + warmup_.gamma(it) * (1.0 - min_ratio_);
    } else {
      const double done = static_cast<double>(it - warmup_.steps + 1);
      const double span = static_cast<double>(total_ - warmup_.steps);
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
  explicit LrRangeTest(JsonParams& p)
      : min_lr_(p.number("lr_range_test_min_lr", 1e-3)),
        step_size_(static_cast<double>(std::max<int64_t>(1, p.integer("lr_range_test_step_size", 2000)))),
        step_rate_(p.number("lr_range_test_step_rate", 1.0)),
        staircase_(p.boolean("lr_range_test_staircase", false)) {}
  double lr_at(int64_t it) const override {
    if (it < 0) return min_lr_;
    double interval = static_cast<double>(it + 1) / step_size_;
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
  explicit OneCycle(JsonParams& p)
      : min_lr_(p.number("cycle_min_lr", 0.0)), max_lr_(p.number("cycle_max_lr", 0.0)),
        decay_lr_rate_(p.number("decay_lr_rate", 0.0)), decay_step_size_(p.number("decay_step_size", 0.0)),
        cycle_momentum_(p.boolean("cycle_momentum", true)), min_mom_(p.number("cycle_min_mom", 0.8)),
        max_mom_(p.number("cycle_max_mom", 0.9)), decay_mom_rate_(p.number("decay_mom_rate", 0.0)) {
    const double first = p.number("cycle_first_step_size", 2000.0, true);
    const double second = p.number("cycle_second_step_size", first, true);
    p.integer("cycle_first_stair_count", 0);   // DeepSpeed reads but does not apply the stair counts
    p.integer("cycle_second_stair_count", 0);
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
    const double iteration = static_cast<double>(it + 1);
    const double cycle = std::floor(1.0 + iteration / total_);
    const double x = 1.0 + iteration / total_ - cycle;
    return x <= step_ratio_ ? x / step_ratio_ : (x - 1.0) / (step_ratio_ - 1.0);
  }
  double min_lr_, max_lr_, decay_lr_rate_, decay_step_size_;
  bool cycle_momentum_;
  double min_mom_, max_mom_, decay_mom_rate_;
  double total_ = 0.0, step_ratio_ = 0.5;
};

}  // namespace

void LrSchedule::load_state_json(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("last_batch_iteration") ||
      !state["last_batch_iteration"].is_number_integer()) {
    throw FileError("scheduler state is missing last_batch_iteration");
  }
  last_batch_iteration_ = state["last_batch_iteration"].get<int64_t>();
}

std::unique_ptr<LrSchedule> LrSchedule::create(const SchedulerSpec& spec, double optimizer_lr,
                                               const std::string& source) {
  if (spec.type.empty()) return std::make_unique<ConstantSchedule>(optimizer_lr);
  JsonParams p(spec.params, source + ".params");
  p.accept("last_batch_iteration");
  std::unique_ptr<LrSchedule> out;
  if (spec.type == "WarmupLR") {
    out = std::make_unique<WarmupLr>(p);
  } else if (spec.type == "WarmupDecayLR") {
    out = std::make_unique<WarmupDecayLr>(p);
  } else if (spec.type == "WarmupCosineLR") {
    out = std::make_unique<WarmupCosineLr>(p, optimizer_lr);
  } else if (spec.type == "LRRangeTest") {
    out = std::make_unique<LrRangeTest>(p);
  } else if (spec.type == "OneCycle") {
    out = std::make_unique<OneCycle>(p);
  } else {
    throw ConfigError(source + ".type = \"" + spec.type +
                      "\" is not a DeepSpeed scheduler; use WarmupLR, WarmupDecayLR, "
                      "WarmupCosineLR, OneCycle or LRRangeTest");
  }
  p.reject_unknown();
  return out;
}

}  // namespace zero::optim
