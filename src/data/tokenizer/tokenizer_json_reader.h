// Parsing a tokenizer.json in one streaming (SAX) pass. The two big members, model.vocab
// (100k+ entries) and model.merges (100k-300k), go straight into flat vectors; everything else
// (normalizer, pre-tokenizer, added tokens, ...) becomes an ordinary JSON value. A DOM of the
// whole file would spend most of the load time building and freeing std::map nodes.
// Nesting deeper than io::kMaxJsonDepth and text that is not JSON are FileErrors naming the
// byte; a vocab entry that is not an id or a merge that is not two tokens is a ConfigError
// naming its JSON path.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

struct BpeTables {
  bool has_vocab = false;
  bool has_merges = false;
  std::vector<std::pair<std::string, uint32_t>> vocab;  // in file order
  std::vector<std::pair<std::string, std::string>> merges;
};

struct TokenizerJson {
  Json root;  // model.vocab and model.merges are left empty here
  BpeTables tables;
};

TokenizerJson read_tokenizer_json(std::string_view text, const std::string& origin);

}  // namespace zero::data::tokenizer
