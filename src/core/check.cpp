#include "core/check.h"

namespace zero::detail {

void throw_check_failure(const char* condition, const char* file, int line,
                         const std::string& message) {
  std::ostringstream out;
  out << "internal check failed: " << condition << " at " << file << ":" << line;
  if (!message.empty()) out << ": " << message;
  throw InternalError(out.str());
}

}  // namespace zero::detail
