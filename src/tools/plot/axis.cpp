#include "tools/plot/axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zero::tools::plot {
namespace {

// The smallest of 1, 2 and 5 times a power of ten that is at least `raw`.
double round_spacing(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double mantissa : {1.0, 2.0, 5.0, 10.0}) {
    if (mantissa * power >= raw * (1 - 1e-9)) return mantissa * power;
  }
  return 10.0 * power;
}

std::string trimmed_scientific(double value, int decimals) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*e", decimals, value);
  std::string text = buffer;
  const size_t e = text.find('e');
  std::string mantissa = text.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  // "e-04" -> "e-4", "e+06" -> "e6".
  const int exponent = std::stoi(text.substr(e + 1));
  return mantissa + "e" + std::to_string(exponent);
}

}  // namespace

std::string tick_label(double value, double spacing) {
  if (std::fabs(value) < spacing * 1e-6) return "0";
  const double magnitude = std::fabs(value);
  const int spacing_power = static_cast<int>(std::floor(std::log10(spacing) + 1e-9));
  if (magnitude >= 1e-3 && magnitude < 1e6) {
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "%.*f", std::max(0, -spacing_power), value);
    return buffer;
  }
  const int value_power = static_cast<int>(std::floor(std::log10(magnitude) + 1e-9));
  return trimmed_scientific(value, std::max(0, value_power - spacing_power));
}

Axis Axis::linear(double data_low, double data_high, int max_ticks, bool whole_numbers) {
  if (data_high < data_low) std::swap(data_low, data_high);
  if (data_high - data_low <= std::fabs(data_high) * 1e-12) {
    // One value (or several equal ones): a band around it, so it sits in the middle.
    const double pad = data_high != 0.0 ? std::fabs(data_high) * 0.1 : 1.0;
    data_low -= pad;
    data_high += pad;
  }
  double spacing = round_spacing((data_high - data_low) / std::max(1, max_ticks - 1));
  if (whole_numbers) spacing = std::max(spacing, 1.0);
  Axis axis;
  axis.low_ = std::floor(data_low / spacing + 1e-9) * spacing;
  axis.high_ = std::ceil(data_high / spacing - 1e-9) * spacing;
  const auto count = static_cast<int64_t>(std::llround((axis.high_ - axis.low_) / spacing));
  for (int64_t i = 0; i <= count; ++i) {
    const double value = axis.low_ + static_cast<double>(i) * spacing;
    axis.ticks_.push_back({value, tick_label(value, spacing)});
  }
  return axis;
}

Axis Axis::log2(double data_low, double data_high, int max_ticks) {
  Axis axis;
  axis.log2_ = true;
  double low = std::floor(std::log2(std::min(data_low, data_high)));
  double high = std::ceil(std::log2(std::max(data_low, data_high)));
  if (high <= low) {
    --low;
    ++high;
  }
  const auto spacing =
      static_cast<int64_t>(std::max(1.0, std::ceil((high - low) / std::max(1, max_ticks - 1))));
  // Start and end on multiples of the spacing, so the labels are 2^0, 2^4, 2^8 and not 2^1, 2^5.
  low = std::floor(low / static_cast<double>(spacing)) * static_cast<double>(spacing);
  high = std::ceil(high / static_cast<double>(spacing)) * static_cast<double>(spacing);
  axis.low_ = low;
  axis.high_ = high;
  for (auto power = static_cast<int64_t>(low); power <= static_cast<int64_t>(high);
       power += spacing) {
    // Powers of two up to 2^20 read best as numbers (65536 is the usual fp16 scale).
    const std::string label = power >= 0 && power <= 20 ? std::to_string(int64_t{1} << power)
                                                        : "2^" + std::to_string(power);
    axis.ticks_.push_back({std::ldexp(1.0, static_cast<int>(power)), label});
  }
  return axis;
}

double Axis::fraction(double value) const {
  const double position = log2_ ? std::log2(value) : value;
  return (position - low_) / (high_ - low_);
}

}  // namespace zero::tools::plot
