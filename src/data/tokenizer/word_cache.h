// WordCache: the ids of words already run through the BPE model. Text repeats its words (a
// 20 MB corpus has a few hundred thousand distinct ones), so most merge work is skipped, as
// Hugging Face's BPE cache does. HfTokenizer keeps one per thread (encode() stays const and
// lock-free) that lives across calls, so documents encoded one by one share it. Keys and ids
// live in two flat arrays.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zero::data::tokenizer {

class WordCache {
 public:
  // Words longer than this are not cached (rare, and they would bloat the arrays).
  static constexpr size_t kMaxWordBytes = 64;
  // Past this many words the cache stops growing: about 16 MB per thread at most.
  static constexpr size_t kMaxWords = 1u << 18;

  // Appends the cached ids of `word` to `out` and returns true; false when not cached.
  bool find(std::string_view word, std::vector<uint32_t>& out) const;
  // Remembers ids[0..count) as the ids of `word` (ignored when too long or full).
  void insert(std::string_view word, const uint32_t* ids, size_t count);
  void clear();

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_length = 0;
    uint16_t ids_length = 0;
    bool used = false;
  };
  void grow();
  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::string keys_;
  std::vector<uint32_t> ids_;
};

}  // namespace zero::data::tokenizer
