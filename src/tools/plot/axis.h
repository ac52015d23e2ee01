// Axes for `zero plot`: a data range widened to round numbers with ticks on them (1, 2 or 5
// times a power of ten), or a log2 axis with ticks on powers of two (the loss scale, which
// DeepSpeed's scaler halves and doubles), and labels short enough to sit beside a panel.
#pragma once
#include <string>
#include <vector>

namespace zero::tools::plot {

struct Tick {
  double value;
  std::string label;
};

class Axis {
 public:
  // A linear axis covering [data_low, data_high] (finite) with at most `max_ticks` ticks.
  // `whole_numbers`: tick spacing at least 1 (training steps).
  static Axis linear(double data_low, double data_high, int max_ticks, bool whole_numbers = false);
  // A log2 axis covering [data_low, data_high] (both > 0), ticks on powers of two.
  static Axis log2(double data_low, double data_high, int max_ticks);

  double low() const { return low_; }
  double high() const { return high_; }
  const std::vector<Tick>& ticks() const { return ticks_; }
  // Where `value` falls between low (0) and high (1); values outside give <0 or >1.
  double fraction(double value) const;

 private:
  double low_ = 0.0, high_ = 1.0;
  bool log2_ = false;  // low_ and high_ are then exponents
  std::vector<Tick> ticks_;
};

// `value` as a tick label on an axis whose ticks are `spacing` apart: fixed-point with as many
// decimals as the spacing needs, or scientific ("3e-4", "1.5e6") for very small or large values.
std::string tick_label(double value, double spacing);

}  // namespace zero::tools::plot
