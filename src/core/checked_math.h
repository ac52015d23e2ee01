// Overflow-checked arithmetic on sizes read from outside (files, flags). Every product or sum of
// outside numbers goes through these before it sizes an allocation, a loop or an offset: signed
// overflow is undefined behaviour, and a wrapped size turns into nonsense much later.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/error.h"

namespace zero {

// a * b, or nothing when it does not fit int64.
inline std::optional<int64_t> mul_if_fits(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nothing when it does not fit int64.
inline std::optional<int64_t> add_if_fits(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of `factors`; throws ConfigError "<what> is too large: ..." when it overflows.
// `what` names the quantity and where its factors came from ("vocab_size * hidden_size in
// model/config.json") so the user knows which number to fix.
inline int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t product = 1;
  for (const int64_t factor : factors) {
    const std::optional<int64_t> next = mul_if_fits(product, factor);
    if (!next) {
      throw ConfigError(what + " is too large: the product overflows a 64-bit integer; check "
                               "the sizes that make it up");
    }
    product = *next;
  }
  return product;
}

// a + b; throws ConfigError naming `what` when it overflows.
inline int64_t checked_sum(int64_t a, int64_t b, const std::string& what) {
  const std::optional<int64_t> sum = add_if_fits(a, b);
  if (!sum) {
    throw ConfigError(what + " is too large: the sum overflows a 64-bit integer; check the "
                             "numbers that make it up");
  }
  return *sum;
}

}  // namespace zero
