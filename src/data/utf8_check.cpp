#include "data/utf8_check.h"

#include <algorithm>
#include <cstdint>

#include "data/tokenizer/utf8.h"

namespace zero::data {

std::optional<size_t> invalid_utf8_offset(std::string_view text) {
  const size_t offset = tokenizer::first_invalid_utf8(text);
  if (offset == tokenizer::kValidUtf8) return std::nullopt;
  return offset;
}

int64_t line_of_offset(std::string_view text, size_t offset) {
  const size_t end = std::min(offset, text.size());
  return 1 + static_cast<int64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

}  // namespace zero::data
