// The "model" of a tokenizer.json of type BPE: vocabulary (token text -> id) and ranked merges.
// A word becomes its characters' ids (byte_fallback: <0xXX> tokens for characters missing from
// the vocabulary; otherwise unk_token, fused when fuse_unk), then the lowest-ranked adjacent pair
// is merged until no pair has a merge (ties: leftmost first), as Hugging Face's BPE does with
// dropout off. ignore_merges: a word that is itself in the vocabulary is one token.
// Unsupported (ConfigError naming the field): dropout, continuing_subword_prefix and
// end_of_word_suffix other than null or "".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/token_index.h"
#include "data/tokenizer/tokenizer_json_reader.h"

namespace zero::data::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `spec` is the tokenizer.json "model" object (type BPE); `tables` its vocab and merges
  // (read_tokenizer_json takes them out of `spec`).
  BpeModel(const Json& spec, BpeTables tables, const JsonPath& at);
  ~BpeModel();

  // Appends the ids of `word` (one pre-tokenized word, valid UTF-8) to `out`.
  void encode_word(std::string_view word, std::vector<uint32_t>& out) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // True when the one-character text `character` always becomes ids that take part in no merge
  // (SentencePiece's "\n" is the byte token <0x0A>): a word can then be cut after it and its
  // parts encoded apart, with the same ids. False with ignore_merges (a part might be a token).
  bool is_merge_barrier(std::string_view character) const;
  // True when no merge can join a character other than "▁" (U+2581) with a "▁" after it: no
  // token of the vocabulary holds such a pair (SentencePiece vocabularies, whose pieces start
  // at a word's "▁"). A SentencePiece word (a whole line, with no pre-tokenizer) can then be
  // encoded as its "▁"-started parts, each cacheable, with the same ids. False with
  // ignore_merges or when "▁" is not a token.
  bool splits_before_metaspace() const { return splits_before_metaspace_; }
  // nullptr when `id` is not in the vocabulary.
  const std::string* id_to_token(uint32_t id) const;
  // One past the largest id in the vocabulary.
  uint32_t id_end() const { return static_cast<uint32_t>(tokens_.size()); }

 private:
  class MergeTable;
  // Merges the run `ids` (all taking part in some merge) and appends the result to `out`.
  void merge_run(const uint32_t* ids, size_t count, std::vector<uint32_t>& out) const;
  // The id of the one-character token `character` (code point `cp`), if any.
  std::optional<uint32_t> character_id(uint32_t cp, std::string_view character) const;

  TokenIndex index_;
  std::vector<std::string> tokens_;
  std::vector<uint8_t> has_token_;
  // 1 where the id is the left or right side of some merge. An id in no merge never changes and
  // never joins a neighbour, so a word is merged run by run between such ids: exact, and a long
  // word (SentencePiece models see a whole line as one) needs memory only for its longest run.
  std::vector<uint8_t> in_merge_;
  std::unique_ptr<MergeTable> merges_;
  // Ids of one-character tokens for code points below kDirectCharacters (~0u = none).
  static constexpr uint32_t kDirectCharacters = 0x800;
  std::vector<uint32_t> character_ids_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool splits_before_metaspace_ = false;
  uint32_t byte_ids_[256] = {};  // <0xXX> tokens, valid where byte_fallback_ and has_byte_ids_
  bool has_byte_ids_[256] = {};
};

}  // namespace zero::data::tokenizer
