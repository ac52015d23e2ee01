// GPT-2's byte-level alphabet: every byte 0..255 is shown as a printable code point (bytes that
// are printable Latin-1 stand for themselves, the rest are moved to U+0100 and up, in byte
// order), so a byte-level BPE vocabulary is plain text. Used by the ByteLevel pre-tokenizer
// (bytes -> characters) and decoder (characters -> bytes).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace zero::data::tokenizer {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& instance();

  uint32_t code_point(unsigned char byte) const { return code_points_[byte]; }
  // The UTF-8 text of the character standing for `byte` (1 or 2 bytes).
  std::string_view character(unsigned char byte) const { return characters_[byte]; }
  // Appends the byte-level characters of `bytes` to `out`.
  void encode(std::string_view bytes, std::string& out) const;
  // The bytes `token` stands for; false (and `out` unchanged) when a character of `token` is
  // not in the alphabet (an added token such as "<|endoftext|>" is then taken as it is).
  bool decode(std::string_view token, std::string& out) const;

 private:
  ByteLevelAlphabet();
  std::array<uint32_t, 256> code_points_{};
  std::array<std::string, 256> characters_{};
  // code point (< 324) -> byte + 1; 0 = not in the alphabet.
  std::array<uint16_t, 324> bytes_{};
};

}  // namespace zero::data::tokenizer
