// BPE model; see bpe_model.h.
#include "data/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "data/tokenizer/utf8.h"
#include "io/bounded_json.h"

namespace zero::data::tokenizer {

// (left id, right id) -> (rank, merged id), open addressing with linear probing: the lookup in
// BPE's inner loop, so no node allocations and one cache line per probe.
class BpeModel::MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    uint32_t id;
  };

  explicit MergeTable(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, {0, 0}});
    mask_ = capacity - 1;
  }

  // A later merge of the same pair replaces the earlier one (as a Rust HashMap collect does).
  void insert(uint32_t left, uint32_t right, Merge merge) {
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = Slot{key, merge};
        return;
      }
    }
  }

  const Merge* find(uint32_t left, uint32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are < 2^32 - 1, so never a real pair
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static uint64_t pack(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
  }
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

namespace {

void require_empty_or_null(const Json& spec, const std::string& key, const JsonPath& at) {
  const Json* value = optional_field(spec, key);
  if (!value) return;
  if (value->is_string() && value->get<std::string>().empty()) return;
  throw ConfigError(at.child(key).str() + " is " + io::json_excerpt(*value) +
                    ": zero.cpp's BPE supports only null or \"\" here (no subword prefix/suffix "
                    "models such as CLIP or WordPiece-style BPE)");
}

}  // namespace

BpeModel::BpeModel(const Json& spec, BpeTables tables, const JsonPath& at) {
  if (const Json* dropout = optional_field(spec, "dropout")) {
    throw ConfigError(at.child("dropout").str() + " is " + io::json_excerpt(*dropout) +
                      ": BPE dropout makes tokenization random; zero.cpp needs it null (set "
                      "\"dropout\": null to tokenize as the model does at inference)");
  }
  require_empty_or_null(spec, "continuing_subword_prefix", at);
  require_empty_or_null(spec, "end_of_word_suffix", at);
  fuse_unk_ = bool_field(spec, "fuse_unk", at, false);
  byte_fallback_ = bool_field(spec, "byte_fallback", at, false);
  ignore_merges_ = bool_field(spec, "ignore_merges", at, false);

  if (!tables.has_vocab) {
    throw ConfigError(at.child("vocab").str() + " is missing or not an object of token -> id");
  }
  if (!tables.has_merges) {
    throw ConfigError(at.child("merges").str() + " is missing or not an array");
  }
  uint32_t end = 0;
  for (const auto& entry : tables.vocab) end = std::max(end, entry.second + 1);
  if (end > tables.vocab.size() * 4 + 1024) {
    throw ConfigError(at.child("vocab").str() + ": ids go up to " + std::to_string(end - 1) +
                      " for " + std::to_string(tables.vocab.size()) +
                      " tokens; a vocabulary with such gaps is not a real tokenizer");
  }
  tokens_.resize(end);
  has_token_.assign(end, 0);
  for (auto& [token, id] : tables.vocab) {
    tokens_[id] = std::move(token);
    has_token_[id] = 1;
  }
  index_.build(&tokens_, has_token_);

  merges_ = std::make_unique<MergeTable>(tables.merges.size());
  in_merge_.assign(end, 0);
  std::string joined;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const auto& [left, right] = tables.merges[i];
    joined.assign(left);
    joined += right;
    const auto left_id = token_to_id(left), right_id = token_to_id(right);
    const auto merged_id = token_to_id(joined);
    if (!left_id || !right_id || !merged_id) {
      const std::string& missing = !left_id ? left : !right_id ? right : joined;
      throw ConfigError(at.child("merges").index(i).str() + ": the token \"" + missing +
                        "\" is not in the vocabulary");
    }
    merges_->insert(*left_id, *right_id, {static_cast<uint32_t>(i), *merged_id});
    in_merge_[*left_id] = in_merge_[*right_id] = 1;
  }

  if (const Json* unk = optional_field(spec, "unk_token")) {
    if (!unk->is_string()) throw ConfigError(at.child("unk_token").str() + " must be a string");
    unk_id_ = token_to_id(unk->get<std::string>());
    if (!unk_id_) {
      throw ConfigError(at.child("unk_token").str() + ": \"" + unk->get<std::string>() +
                        "\" is not in the vocabulary");
    }
  }
  if (byte_fallback_) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (const auto id = token_to_id(name)) {
        byte_ids_[b] = *id;
        has_byte_ids_[b] = true;
      }
    }
  }
  // "▁" after another character inside a token would let a merge join across a word start.
  const std::string metaspace = "\xE2\x96\x81";
  splits_before_metaspace_ = !ignore_merges_ && token_to_id(metaspace).has_value();
  for (uint32_t id = 0; id < end && splits_before_metaspace_; ++id) {
    const std::string& token = tokens_[id];
    for (size_t hit = token.find(metaspace, 1); hit != std::string::npos;
         hit = token.find(metaspace, hit + 1)) {
      if (hit < 3 || token.compare(hit - 3, 3, metaspace) != 0) {
        splits_before_metaspace_ = false;
        break;
      }
    }
  }
  character_ids_.assign(kDirectCharacters, ~0u);
  std::string character;
  for (uint32_t cp = 0; cp < kDirectCharacters; ++cp) {
    character.clear();
    append_utf8(character, cp);
    if (const auto id = token_to_id(character)) character_ids_[cp] = *id;
  }
}

BpeModel::~BpeModel() = default;

std::optional<uint32_t> BpeModel::token_to_id(std::string_view token) const {
  return index_.find(token);
}

bool BpeModel::is_merge_barrier(std::string_view character) const {
  if (ignore_merges_ || character.empty()) return false;
  size_t end = 0;
  const uint32_t cp = next_code_point(character, end);
  if (end != character.size()) return false;
  if (const auto id = character_id(cp, character)) return !in_merge_[*id];
  if (!byte_fallback_) return false;
  for (const char c : character) {
    const auto b = static_cast<unsigned char>(c);
    if (!has_byte_ids_[b] || in_merge_[byte_ids_[b]]) return false;
  }
  return true;
}

const std::string* BpeModel::id_to_token(uint32_t id) const {
  return id < tokens_.size() && has_token_[id] ? &tokens_[id] : nullptr;
}

std::optional<uint32_t> BpeModel::character_id(uint32_t cp, std::string_view character) const {
  if (cp < kDirectCharacters) {
    const uint32_t id = character_ids_[cp];
    if (id == ~0u) return std::nullopt;
    return id;
  }
  return token_to_id(character);
}

namespace {

struct Symbol {
  uint32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  uint32_t rank;
  uint32_t pos;
  uint32_t id;
  // std::push_heap builds a max-heap: "less" here means a later merge (higher rank, then
  // further right), so the top is the lowest rank, leftmost.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : pos > other.pos;
  }
};

}  // namespace

void BpeModel::encode_word(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  thread_local std::vector<uint32_t> initial;
  initial.clear();
  // A pending unknown run (Hugging Face adds it when the next known character comes).
  bool unk_pending = false;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t start = pos;
    const uint32_t cp = next_code_point(word, pos);
    const std::string_view character = word.substr(start, pos - start);
    if (const auto id = character_id(cp, character)) {
      if (unk_pending) initial.push_back(*unk_id_), unk_pending = false;
      initial.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : character) all = all && has_byte_ids_[static_cast<unsigned char>(c)];
      if (all) {
        for (const char c : character) initial.push_back(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (unk_pending && !fuse_unk_) initial.push_back(*unk_id_);
      unk_pending = true;
    }
    // Without an unk_token an unknown character is dropped, as in Hugging Face.
  }
  if (unk_pending) initial.push_back(*unk_id_);

  size_t i = 0;
  while (i < initial.size()) {
    if (!in_merge_[initial[i]]) {
      out.push_back(initial[i++]);
      continue;
    }
    size_t j = i + 1;
    while (j < initial.size() && in_merge_[initial[j]]) ++j;
    merge_run(initial.data() + i, j - i, out);
    i = j;
  }
}

void BpeModel::merge_run(const uint32_t* ids, size_t count, std::vector<uint32_t>& out) const {
  if (count == 1) {
    out.push_back(ids[0]);
    return;
  }
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();
  for (size_t i = 0; i < count; ++i) {
    symbols.push_back({ids[i], static_cast<int32_t>(i) - 1,
                       i + 1 < count ? static_cast<int32_t>(i + 1) : -1, true});
  }
  for (size_t i = 0; i + 1 < count; ++i) {
    if (const auto* merge = merges_->find(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({merge->rank, static_cast<uint32_t>(i), merge->id});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // A stale candidate: the pair at this position changed since it was queued.
    const auto* merge = merges_->find(left.id, right.id);
    if (!merge || merge->id != top.id) continue;
    left.id = top.id;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) {
      const Symbol& before = symbols[static_cast<size_t>(left.prev)];
      if (const auto* m = merges_->find(before.id, left.id)) {
        heap.push_back({m->rank, static_cast<uint32_t>(left.prev), m->id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (left.next >= 0) {
      const Symbol& after = symbols[static_cast<size_t>(left.next)];
      if (const auto* m = merges_->find(left.id, after.id)) {
        heap.push_back({m->rank, top.pos, m->id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    out.push_back(symbols[static_cast<size_t>(i)].id);
  }
}

}  // namespace zero::data::tokenizer
