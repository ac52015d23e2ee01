// The options shared by the Metaspace pre-tokenizer and decoder (SentencePiece's "▁" for
// spaces): the replacement character, when a leading one is prepended, and whether words split
// at it. Older files spell prepend_scheme as add_prefix_space (true = always, false = never).
#pragma once
#include <string>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

enum class PrependScheme { kAlways, kFirst, kNever };

struct MetaspaceOptions {
  std::string replacement;  // one character, UTF-8
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};

MetaspaceOptions parse_metaspace(const Json& spec, const JsonPath& at);

}  // namespace zero::data::tokenizer
