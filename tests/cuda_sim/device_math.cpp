// Device math functions whose host versions need more than one line.
#include <cmath>

// f64 -> f32 rounding toward zero: the nearest-even conversion, stepped back toward zero when it
// rounded away (also turning an overflow to infinity into the largest finite float).
float __double2float_rz(double value) {
  const float nearest = static_cast<float>(value);
  if (std::isnan(value) || std::isinf(value)) return nearest;
  if (std::fabs(static_cast<double>(nearest)) > std::fabs(value)) {
    return std::nextafter(nearest, 0.0f);
  }
  return nearest;
}
