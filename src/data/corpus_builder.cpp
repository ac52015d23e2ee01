// CorpusBuilder: ordered appends with the separator and the mask.
#include "data/corpus_builder.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace zero::data {

CorpusBuilder::CorpusBuilder(std::optional<uint32_t> separator, bool masked, int64_t max_tokens,
                             int64_t expected_tokens)
    : separator_(separator), masked_(masked), max_tokens_(max_tokens) {
  const auto reserve = static_cast<size_t>(std::clamp<int64_t>(expected_tokens, 0, max_tokens));
  tokens_.reserve(reserve);
  if (masked_) mask_.reserve(reserve);
}

int64_t CorpusBuilder::append(const EncodedDocument& document) {
  const size_t added = document.tokens.size() + (separator_ ? 1 : 0);
  if (static_cast<int64_t>(tokens_.size() + added) > max_tokens_) {
    throw ConfigError("zero prepare: the corpus holds more than " + std::to_string(max_tokens_) +
                      " tokens, more than the shards can count (a .bin shard holds at most "
                      "2,147,483,647); prepare the files in several groups, one shard each");
  }
  tokens_.insert(tokens_.end(), document.tokens.begin(), document.tokens.end());
  if (separator_) tokens_.push_back(*separator_);
  if (masked_) {
    mask_.insert(mask_.end(), document.prompt_tokens, uint8_t{0});
    mask_.insert(mask_.end(), added - document.prompt_tokens, uint8_t{1});
  }
  document_ends_.push_back(static_cast<int64_t>(tokens_.size()));
  return static_cast<int64_t>(added);
}

int64_t CorpusBuilder::targets(int64_t begin, int64_t end) const {
  if (!masked_) return end - begin;
  return std::count(mask_.begin() + begin, mask_.begin() + end, uint8_t{1});
}

}  // namespace zero::data
