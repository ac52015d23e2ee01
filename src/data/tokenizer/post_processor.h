// tokenizer.json "post_processor": the ids added around a single sequence when
// add_special_tokens is true. Supported: TemplateProcessing (its "single" template),
// RobertaProcessing and BertProcessing (cls ... sep), ByteLevel (offsets only: no ids), and
// Sequence of these. Anything else is a ConfigError naming its path.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<uint32_t>& ids) const = 0;
  // The special ids this processor puts after the sequence (TemplateProcessing's trailing
  // special tokens, Roberta's sep): the EOS candidates.
  virtual std::vector<uint32_t> trailing_ids() const = 0;
};

// null JSON -> nullptr (nothing added).
std::unique_ptr<PostProcessor> make_post_processor(const Json& spec, const JsonPath& at);

}  // namespace zero::data::tokenizer
