// checked_math.h: products and sums of sizes from outside either fit int64 or throw a
// ConfigError naming the quantity; nothing wraps.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/checked_math.h"
#include "core/error.h"

namespace zero {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedMath, MulIfFitsAtTheEdges) {
  EXPECT_EQ(mul_if_fits(3, 4), 12);
  EXPECT_EQ(mul_if_fits(kMax, 1), kMax);
  EXPECT_EQ(mul_if_fits(kMax, 0), 0);
  EXPECT_EQ(mul_if_fits(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(mul_if_fits(int64_t{1} << 32, int64_t{1} << 31));  // exactly 2^63
  EXPECT_FALSE(mul_if_fits(kMax, 2));
  EXPECT_FALSE(mul_if_fits(kMin, -1));
  EXPECT_EQ(mul_if_fits(-(int64_t{1} << 62), 2), kMin);
}

TEST(CheckedMath, AddIfFitsAtTheEdges) {
  EXPECT_EQ(add_if_fits(kMax - 1, 1), kMax);
  EXPECT_FALSE(add_if_fits(kMax, 1));
  EXPECT_FALSE(add_if_fits(kMin, -1));
  EXPECT_EQ(add_if_fits(kMin, kMax), -1);
}

TEST(CheckedMath, CheckedProductNamesWhatOverflowed) {
  EXPECT_EQ(checked_product({}, "nothing"), 1);
  EXPECT_EQ(checked_product({2, 3, 7}, "x"), 42);
  EXPECT_EQ(checked_product({int64_t{1} << 62, 0}, "x"), 0);
  try {
    checked_product({int64_t{1} << 40, int64_t{1} << 30}, "vocab_size * hidden_size in m/config.json");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("vocab_size * hidden_size in m/config.json is too large"),
              std::string::npos)
        << message;
  }
}

TEST(CheckedMath, ProductOverflowIsCaughtEvenWhenALaterFactorIsZero) {
  // The running product overflows before the zero: the sizes themselves are nonsense.
  EXPECT_THROW(checked_product({int64_t{1} << 62, 4, 0}, "shape"), ConfigError);
}

TEST(CheckedMath, CheckedSumNamesWhatOverflowed) {
  EXPECT_EQ(checked_sum(40, 2, "x"), 42);
  try {
    checked_sum(kMax, 1, "the token count of the shards");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the token count of the shards is too large"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zero
