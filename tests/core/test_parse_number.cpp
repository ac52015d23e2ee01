// parse_number.h: the whole string is the number, integers fit int64, doubles are finite;
// anything else is "no number" for the caller to word as an error naming its flag or key.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/parse_number.h"

namespace zero {
namespace {

TEST(ParseNumber, Int64AcceptsWholeDecimalIntegers) {
  EXPECT_EQ(parse_int64("0"), 0);
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-7"), -7);
  EXPECT_EQ(parse_int64("+7"), 7);
  EXPECT_EQ(parse_int64("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse_int64("-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(ParseNumber, Int64RejectsEverythingElse) {
  for (const char* text : {"", " ", "+", "-", "1 ", " 1", "1.0", "1e3", "0x10", "12abc", "abc",
                           "9223372036854775808", "-9223372036854775809",
                           "99999999999999999999999", "++1", "+-1", "--1", "1-"}) {
    EXPECT_FALSE(parse_int64(text)) << "'" << text << "'";
  }
}

TEST(ParseNumber, DoubleAcceptsPlainDecimals) {
  EXPECT_EQ(parse_finite_double("1e-4"), 1e-4);
  EXPECT_EQ(parse_finite_double(".5"), 0.5);
  EXPECT_EQ(parse_finite_double("3."), 3.0);
  EXPECT_EQ(parse_finite_double("-2.5E+3"), -2500.0);
  EXPECT_EQ(parse_finite_double("+0.25"), 0.25);
  EXPECT_EQ(parse_finite_double("7"), 7.0);
}

TEST(ParseNumber, DoubleRejectsNonFiniteAndPartialText) {
  for (const char* text : {"", "+", "-", "nan", "NaN", "inf", "-inf", "infinity", "1e400",
                           "-1e400", "0x1p3", "0.1abc", " 1", "1 ", "1e", "e5", ".", "++1",
                           "+-1", "1,5"}) {
    EXPECT_FALSE(parse_finite_double(text)) << "'" << text << "'";
  }
}

TEST(ParseNumber, BoolAcceptsWhatPeopleTypeForAFlag) {
  for (const char* text : {"true", "TRUE", "True", "1", "yes", "YES"}) {
    EXPECT_EQ(parse_bool(text), true) << text;
  }
  for (const char* text : {"false", "False", "0", "no", "NO"}) {
    EXPECT_EQ(parse_bool(text), false) << text;
  }
  for (const char* text : {"", "t", "y", "2", "on", "off", "true ", "yes!"}) {
    EXPECT_FALSE(parse_bool(text)) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace zero
