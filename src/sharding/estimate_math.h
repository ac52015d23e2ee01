// The overflow-checked arithmetic of the memory estimates (memory_estimator.cpp,
// activation_estimator.cpp): their sizes come from files and flags (config.json,
// --total-params, --micro-batch), so every product and sum is checked, and an overflow names the
// estimate it broke instead of printing a wrapped number.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "core/checked_math.h"

namespace zero::sharding::estimate_math {

inline constexpr const char* kWhat =
    "the memory estimate for this model, micro-batch and sequence length";

inline int64_t mul(std::initializer_list<int64_t> factors) {
  return checked_product(factors, kWhat);
}
inline int64_t add(std::initializer_list<int64_t> terms) {
  int64_t sum = 0;
  for (int64_t term : terms) sum = checked_sum(sum, term, kWhat);
  return sum;
}
inline int64_t add(int64_t a, int64_t b) { return checked_sum(a, b, kWhat); }

}  // namespace zero::sharding::estimate_math
