// first_invalid_utf8: a table-free decoder of the well-formed byte sequences (Unicode 15,
// Table 3-7).
#include "data/utf8_check.h"

#include <algorithm>
#include <cstdint>

namespace zero::data {

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the allowed range of its second byte (the first
    // continuation byte is where overlong forms, surrogates and values past U+10FFFF show).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead == 0xe0) low = 0xa0;   // overlong below U+0800
      if (lead == 0xed) high = 0x9f;  // surrogates U+D800..U+DFFF
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead == 0xf0) low = 0x90;   // overlong below U+10000
      if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
    } else {
      return i;  // a continuation byte without a lead, 0xc0/0xc1 (overlong) or 0xf5..0xff
    }
    if (i + 1 >= n || bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (i + k >= n || (bytes[i + k] & 0xc0) != 0x80) return i;
    }
    i += length;
  }
  return std::nullopt;
}

int64_t line_of_offset(std::string_view text, size_t offset) {
  const size_t end = std::min(offset, text.size());
  return 1 + static_cast<int64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

}  // namespace zero::data
