// UTF-8 helpers for the Hugging Face tokenizer: validation (encode refuses invalid input),
// stepping through code points, and Rust's String::from_utf8_lossy (what HF's decoders use to
// turn byte tokens back into text), reproduced exactly so decode() matches the library.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zero::data::tokenizer {

inline constexpr size_t kValidUtf8 = static_cast<size_t>(-1);

// The byte offset of the first byte that does not start or continue a well-formed UTF-8
// sequence (overlong forms, surrogates and values above U+10FFFF are ill-formed), or kValidUtf8.
size_t first_invalid_utf8(std::string_view text);

// The code point starting at text[pos] of valid UTF-8; advances pos past it.
inline uint32_t next_code_point(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i])); };
  const uint32_t b0 = byte(pos);
  if (b0 < 0x80) {
    pos += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    const uint32_t cp = ((b0 & 0x1F) << 6) | (byte(pos + 1) & 0x3F);
    pos += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    const uint32_t cp = ((b0 & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F);
    pos += 3;
    return cp;
  }
  const uint32_t cp = ((b0 & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) |
                      ((byte(pos + 2) & 0x3F) << 6) | (byte(pos + 3) & 0x3F);
  pos += 4;
  return cp;
}

// The length in bytes of the UTF-8 sequence whose first byte is `lead` (valid UTF-8 assumed).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, uint32_t code_point);

// Rust's String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Unicode White_Space (Rust's char::is_whitespace, Oniguruma's \s).
bool is_unicode_whitespace(uint32_t code_point);
// Rust's char::is_alphanumeric (letters and numbers), as HF's single_word check uses it.
bool is_unicode_alphanumeric(uint32_t code_point);

}  // namespace zero::data::tokenizer
