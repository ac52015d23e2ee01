// ZERO_CHECK: invariant checks that throw zero::InternalError (never abort), so a failing rank
// can report the message and bring the job down cleanly.
#pragma once
#include <sstream>
#include <string>

#include "core/error.h"

namespace zero::detail {
[[noreturn]] void throw_check_failure(const char* condition, const char* file, int line,
                                      const std::string& message);
}  // namespace zero::detail

#define ZERO_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      std::ostringstream zero_check_stream_;                                               \
      zero_check_stream_ << "" __VA_ARGS__;                                                \
      ::zero::detail::throw_check_failure(#cond, __FILE__, __LINE__, zero_check_stream_.str()); \
    }                                                                                      \
  } while (0)
