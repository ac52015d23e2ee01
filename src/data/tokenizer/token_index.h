// TokenIndex: token text -> id for a vocabulary held in one vector (id -> text), as a flat
// open-addressing table of ids. Loading a 128k-token vocabulary and resolving 300k merges
// (three lookups each) is most of a tokenizer's load time; this keeps it to one array probe
// and one string compare per lookup, with no allocation per token.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data::tokenizer {

class TokenIndex {
 public:
  // `tokens[id]` is the text of `id`; `present[id]` is 0 for holes. Later ids win when two
  // share a text.
  void build(const std::vector<std::string>* tokens, const std::vector<uint8_t>& present);
  std::optional<uint32_t> find(std::string_view token) const;

  static uint64_t hash(std::string_view text);

 private:
  static constexpr uint32_t kEmpty = ~0u;
  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<uint32_t> slots_;  // ids
  std::vector<uint32_t> tags_;   // high bits of the hash, to skip most string compares
  size_t mask_ = 0;
};

}  // namespace zero::data::tokenizer
