// Fuzzes the tokenizer.json reader: the input is parsed as a tokenizer.json (HfTokenizer's
// constructor, the streaming reader and every component factory), and a tokenizer that loads
// encodes and decodes a short mixed text, with and without special tokens, as
// `zero tokenize` would.
#include <cstddef>
#include <cstdint>

#include "data/hf_tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = zero::fuzz::as_text(data, size);
  zero::fuzz::expect_only_user_errors([&] {
    const zero::data::HfTokenizer tokenizer(text, "fuzz.json");
    const auto ids = tokenizer.encode("Hello wörld <s> 123 ▁x\n\t<|endoftext|> é", true);
    for (const uint32_t id : ids) {
      if (static_cast<int64_t>(id) >= tokenizer.vocab_size()) {
        zero::fuzz::report_finding("an id at or above vocab_size", "encode");
      }
    }
    (void)tokenizer.decode(ids, false);
    (void)tokenizer.decode(ids, true);
    (void)tokenizer.document_separator();
  });
  return 0;
}
