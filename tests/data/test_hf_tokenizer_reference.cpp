// HfTokenizer against Hugging Face's own library: tests/fixtures/tokenizers/<family>/expected.json
// holds the ids and decodes the `tokenizers` npm package (the Rust library) produced for the
// real tokenizer.json of each family over a varied corpus (make_vectors.js). Every id of every
// line, and of the whole corpus as one text, with and without special tokens, must be equal.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "data/hf_tokenizer.h"
#include "data/tokenizer_fixtures.h"

namespace zero::data {
namespace {

using testing::kFixtures;

nlohmann::json read_expected(const std::string& family) {
  std::ifstream in(kFixtures + family + "/expected.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

// Loading takes a fraction of a second per family: once per test program.
const Tokenizer& tokenizer_for(const std::string& family) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& slot = loaded[family];
  if (!slot) slot = load_hf_tokenizer(kFixtures + family);
  return *slot;
}

std::string shown(const std::string& text) { return nlohmann::json(text).dump(); }

void expect_case(const Tokenizer& tokenizer, const nlohmann::json& c, const std::string& where) {
  const std::string text = c["text"];
  const auto ids = c["ids"].get<std::vector<uint32_t>>();
  const auto ids_special = c["ids_special"].get<std::vector<uint32_t>>();
  EXPECT_EQ(tokenizer.encode(text, false), ids) << where << " text " << shown(text);
  EXPECT_EQ(tokenizer.encode(text, true), ids_special) << where << " (special) text " << shown(text);
  EXPECT_EQ(tokenizer.decode(ids, false), c["decoded"].get<std::string>()) << where;
  EXPECT_EQ(tokenizer.decode(ids_special, false), c["decoded_special"].get<std::string>()) << where;
  EXPECT_EQ(tokenizer.decode(ids_special, true), c["decoded_special_skip"].get<std::string>())
      << where;
}

class HfReference : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReference, EveryLineMatchesTheLibrary) {
  const nlohmann::json expected = read_expected(GetParam());
  const Tokenizer& tokenizer = tokenizer_for(GetParam());
  ASSERT_GT(expected["lines"].size(), 30u);
  for (size_t i = 0; i < expected["lines"].size(); ++i) {
    expect_case(tokenizer, expected["lines"][i], GetParam() + " line " + std::to_string(i));
  }
}

TEST_P(HfReference, WholeCorpusMatchesTheLibrary) {
  const nlohmann::json expected = read_expected(GetParam());
  expect_case(tokenizer_for(GetParam()), expected["whole"], GetParam() + " whole corpus");
}

TEST_P(HfReference, VocabularySizeCoversEveryId) {
  const nlohmann::json expected = read_expected(GetParam());
  EXPECT_EQ(tokenizer_for(GetParam()).vocab_size(), expected["vocab_size"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(Families, HfReference,
                         ::testing::Values("gpt2", "llama3", "qwen3", "llama2", "llama2_metaspace",
                                           "tiny", "tiny_sp"));

}  // namespace
}  // namespace zero::data
