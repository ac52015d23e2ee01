// TokenIndex; see token_index.h.
#include "data/tokenizer/token_index.h"

#include <cstring>

namespace zero::data::tokenizer {

uint64_t TokenIndex::hash(std::string_view text) {
  // 8 bytes at a time, multiply-xorshift mixing; tokens are short, so this is a few rounds.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ text.size();
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (i < text.size()) {
    uint64_t word = 0;
    std::memcpy(&word, text.data() + i, text.size() - i);
    h = (h ^ word) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
  }
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 32);
}

void TokenIndex::build(const std::vector<std::string>* tokens, const std::vector<uint8_t>& present) {
  tokens_ = tokens;
  size_t capacity = 16;
  while (capacity < tokens->size() * 2) capacity *= 2;
  slots_.assign(capacity, kEmpty);
  tags_.assign(capacity, 0);
  mask_ = capacity - 1;
  for (uint32_t id = 0; id < tokens->size(); ++id) {
    if (!present[id]) continue;
    const std::string& text = (*tokens)[id];
    const uint64_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == kEmpty) {
        slots_[i] = id;
        tags_[i] = static_cast<uint32_t>(h >> 32);
        break;
      }
      if (tags_[i] == static_cast<uint32_t>(h >> 32) && (*tokens)[slots_[i]] == text) {
        slots_[i] = id;
        break;
      }
    }
  }
}

std::optional<uint32_t> TokenIndex::find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t h = hash(token);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const uint32_t id = slots_[i];
    if (id == kEmpty) return std::nullopt;
    if (tags_[i] == tag && (*tokens_)[id] == token) return id;
  }
}

}  // namespace zero::data::tokenizer
