// Strict text -> number conversion for flags and text fields: the whole string must be the
// number (no "0.1abc", no leading/trailing spaces), integers must fit int64, doubles must be
// finite ("1e400" and "nan" are rejected). Returns nothing instead of throwing, so each caller
// words its own error with the flag or key it read.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace zero {

// Decimal integer with an optional leading '-' or '+'.
std::optional<int64_t> parse_int64(std::string_view text);

// Decimal floating point (1e-4, .5, 3., -2.5E+3); finite values only.
std::optional<double> parse_finite_double(std::string_view text);

// "true"/"false" (also "1"/"0", "yes"/"no", any case: what people type for a boolean flag).
std::optional<bool> parse_bool(std::string_view text);

}  // namespace zero
