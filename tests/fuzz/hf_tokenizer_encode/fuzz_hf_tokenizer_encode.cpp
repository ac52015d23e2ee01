// Fuzzes HfTokenizer::encode/decode on arbitrary bytes with real tokenizers from the fixtures:
// GPT-2 (byte-level BPE), the Mistral-style SentencePiece BPE with byte fallback and Metaspace,
// and the small one with every other feature (normalizers, split behaviours, added tokens with
// lstrip/rstrip/single_word). The first byte picks the tokenizer and the flags. Invalid UTF-8
// must be a ConfigError; byte-level GPT-2 must give back exactly the text it was given; every
// id must be inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "data/hf_tokenizer.h"
#include "fuzz_support.h"

namespace {

const zero::data::Tokenizer& tokenizer(int which) {
  static const std::string root = std::string(ZERO_TEST_FIXTURES) + "/tokenizers/";
  static const std::unique_ptr<zero::data::Tokenizer> loaded[3] = {
      zero::data::load_hf_tokenizer(root + "gpt2"),
      zero::data::load_hf_tokenizer(root + "llama2_metaspace"),
      zero::data::load_hf_tokenizer(root + "tiny"),
  };
  return *loaded[which];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const bool special = (data[0] & 4) != 0;
  const std::string text = zero::fuzz::as_text(data + 1, size - 1);
  const zero::data::Tokenizer& t = tokenizer(which);
  zero::fuzz::expect_only_user_errors([&] {
    const auto ids = t.encode(text, special);
    for (const uint32_t id : ids) {
      if (static_cast<int64_t>(id) >= t.vocab_size()) {
        zero::fuzz::report_finding("an id at or above vocab_size", text.c_str());
      }
    }
    const std::string back = t.decode(ids, false);
    (void)t.decode(ids, true);
    if (which == 0 && back != text) {
      zero::fuzz::report_finding("GPT-2 decode(encode(x)) != x", text.c_str());
    }
  });
  return 0;
}
