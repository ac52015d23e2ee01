// Shared by the core tests, which are built as one unit: returns the text of the zero::Error
// that fn throws.
#pragma once

#include <string>

#include "core/error.h"

namespace zero {

// The what() of the zero::Error that fn throws, or "(no exception)" when it throws none.
template <typename Fn>
std::string error_message(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace zero
