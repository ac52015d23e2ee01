// WordCache; see word_cache.h.
#include "data/tokenizer/word_cache.h"

#include "data/tokenizer/token_index.h"

namespace zero::data::tokenizer {

bool WordCache::find(std::string_view word, std::vector<uint32_t>& out) const {
  if (slots_.empty() || word.size() > kMaxWordBytes) return false;
  const uint64_t h = TokenIndex::hash(word);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (!slot.used) return false;
    if (slot.hash == h && slot.key_length == word.size() &&
        std::string_view(keys_).substr(slot.key_offset, slot.key_length) == word) {
      out.insert(out.end(), ids_.begin() + slot.ids_offset,
                 ids_.begin() + slot.ids_offset + slot.ids_length);
      return true;
    }
  }
}

void WordCache::insert(std::string_view word, const uint32_t* ids, size_t count) {
  if (word.size() > kMaxWordBytes || count > 0xFFFF || used_ >= kMaxWords) return;
  if ((used_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = TokenIndex::hash(word);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].used) i = (i + 1) & mask;
  Slot& slot = slots_[i];
  slot.used = true;
  slot.hash = h;
  slot.key_offset = static_cast<uint32_t>(keys_.size());
  slot.key_length = static_cast<uint16_t>(word.size());
  slot.ids_offset = static_cast<uint32_t>(ids_.size());
  slot.ids_length = static_cast<uint16_t>(count);
  keys_.append(word);
  ids_.insert(ids_.end(), ids, ids + count);
  ++used_;
}

void WordCache::clear() {
  slots_.clear();
  used_ = 0;
  keys_.clear();
  ids_.clear();
}

void WordCache::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 4096 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (!slot.used) continue;
    size_t i = slot.hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

}  // namespace zero::data::tokenizer
