// has() and error_of(), which several data tests used alike; one copy here since the folder's
// tests are built as one unit.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "support/text_has.h"

namespace zero::data::testing {

using zero::testing::has;

// The what() of the E that `call` throws; a test failure and "" when it throws none.
template <typename E, typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

}  // namespace zero::data::testing
