// The byte-level alphabet; see byte_level.h.
#include "data/tokenizer/byte_level.h"

#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {

const ByteLevelAlphabet& ByteLevelAlphabet::instance() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  // Printable bytes keep their Latin-1 code point: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF.
  // The others (controls, space, DEL, NBSP, soft hyphen) take U+0100, U+0101, ... in order.
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code_points_[b] = printable ? b : next++;
    append_utf8(characters_[b], code_points_[b]);
    bytes_[code_points_[b]] = static_cast<uint16_t>(b + 1);
  }
}

void ByteLevelAlphabet::encode(std::string_view bytes, std::string& out) const {
  for (const char c : bytes) out.append(characters_[static_cast<unsigned char>(c)]);
}

bool ByteLevelAlphabet::decode(std::string_view token, std::string& out) const {
  const size_t start = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    const uint32_t cp = next_code_point(token, pos);
    if (cp >= bytes_.size() || bytes_[cp] == 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(bytes_[cp] - 1));
  }
  return true;
}

}  // namespace zero::data::tokenizer
