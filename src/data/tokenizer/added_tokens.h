// tokenizer.json "added_tokens": tokens matched in the raw text before the model runs (special
// tokens such as <|endoftext|>, and added words). As in Hugging Face: tokens with
// normalized=false are found in the text as given; the rest of the text is normalized and then
// searched for the normalized=true tokens (whose content is normalized too). Matching is
// leftmost-longest; single_word requires non-word characters (or the text's ends) around the
// match; lstrip/rstrip swallow the whitespace before/after it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

std::vector<AddedToken> parse_added_tokens(const Json& list, const JsonPath& at);

// A piece of the input: an added token (id set) or text for the normalizer and model.
struct Piece {
  std::string_view text;  // into the searched string
  bool is_token = false;
  uint32_t id = 0;
};

// Finds a set of added tokens in text.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is the text searched for `tokens[i]` (its content, normalized or not).
  AddedTokenMatcher(const std::vector<const AddedToken*>& tokens,
                    const std::vector<std::string>& patterns);
  bool empty() const { return nodes_.size() <= 1; }
  // Cuts `text` into pieces: the tokens found and the text between them (non-empty).
  void split(std::string_view text, std::vector<Piece>& out) const;

 private:
  // A byte trie: node 0 is the root.
  struct Node {
    std::unordered_map<unsigned char, uint32_t> next;
    int32_t token = -1;  // index into tokens_ when a pattern ends here
  };
  std::vector<Node> nodes_{Node{}};
  std::vector<const AddedToken*> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace zero::data::tokenizer
