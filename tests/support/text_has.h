// has(text, part): whether an error message or a command's output holds a phrase. One copy for
// every test folder (each folder's tests compile as one unit, where copies would clash).
#pragma once
#include <string>

namespace zero::testing {

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace zero::testing
