// HfTokenizer beyond the reference ids: clear errors for what it does not support or cannot
// read (each naming the JSON path or file and the type), invalid UTF-8, ids outside the
// vocabulary, the EOS rule of document_separator(), decode(encode(x)) == x where the tokenizer
// promises it, and concurrent encode() calls on one object.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "data/scratch_dir.h"
#include "data/tokenizer_fixtures.h"

namespace zero::data {
namespace {

using nlohmann::json;
using testing::kFixtures;
using testing::ScratchDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The small byte-level BPE fixture, as JSON to edit.
json tiny() { return json::parse(read_file(kFixtures + "tiny/tokenizer.json")); }

std::vector<std::string> corpus_lines() {
  std::vector<std::string> lines;
  std::stringstream in(read_file(kFixtures + "corpus.txt"));
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Runs `make` and expects a ConfigError whose message holds every one of `parts`.
template <typename Error = ConfigError, typename F>
void expect_error(F&& make, const std::vector<std::string>& parts) {
  try {
    make();
    FAIL() << "expected an error mentioning " << parts[0];
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

void expect_config_error(const json& tokenizer, const std::vector<std::string>& parts) {
  expect_error([&] { HfTokenizer(tokenizer.dump(), "edited.json"); }, parts);
}

TEST(HfTokenizer, UnsupportedModelTypeIsNamed) {
  json t = tiny();
  t["model"]["type"] = "WordPiece";
  expect_config_error(t, {"edited.json", "model", "\"WordPiece\"", "not supported"});
  t["model"]["type"] = "Unigram";
  expect_config_error(t, {"model", "\"Unigram\""});
}

TEST(HfTokenizer, UnsupportedComponentsAreNamedWithTheirPath) {
  json t = tiny();
  t["normalizer"]["normalizers"][1] = {{"type", "BertNormalizer"}};
  expect_config_error(t, {"normalizer.normalizers[1]", "normalizer type \"BertNormalizer\""});
  t = tiny();
  t["pre_tokenizer"]["pretokenizers"][2] = {{"type", "Whitespace"}};
  expect_config_error(t, {"pre_tokenizer.pretokenizers[2]", "\"Whitespace\""});
  t = tiny();
  t["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}};
  expect_config_error(t, {"pre_tokenizer", "\"Digits\""});
  t = tiny();
  t["decoder"] = {{"type", "WordPiece"}};
  expect_config_error(t, {"decoder", "decoder type \"WordPiece\""});
  t = tiny();
  t["post_processor"] = {{"type", "SomethingNew"}};
  expect_config_error(t, {"post_processor", "\"SomethingNew\""});
}

TEST(HfTokenizer, BpeOptionsItCannotHonourAreErrors) {
  json t = tiny();
  t["model"]["dropout"] = 0.1;
  expect_config_error(t, {"model.dropout", "null"});
  t = tiny();
  t["model"]["continuing_subword_prefix"] = "##";
  expect_config_error(t, {"model.continuing_subword_prefix", "##"});
  t = tiny();
  t["model"]["end_of_word_suffix"] = "</w>";
  expect_config_error(t, {"model.end_of_word_suffix"});
  t = tiny();
  t["model"]["merges"][0] = json::array({"nope", "x"});
  expect_config_error(t, {"model.merges[0]", "\"nope\" is not in the vocabulary"});
  t = tiny();
  t["model"]["merges"][3] = "a b c";
  expect_config_error(t, {"model.merges[3]", "two tokens"});
  t = tiny();
  t["model"]["vocab"]["!"] = -1;
  expect_config_error(t, {"model.vocab[\"!\"]"});
  t = tiny();
  t["model"].erase("vocab");
  expect_config_error(t, {"model.vocab", "missing"});
}

// Llama 3.1 files wrap the template in a Sequence with ByteLevel; Roberta-style files give
// cls/sep as ["<s>", id].
TEST(HfTokenizer, PostProcessorSequenceAndRoberta) {
  const json t = tiny();
  const uint32_t bos = t["added_tokens"][1]["id"], eos = t["added_tokens"][2]["id"];
  const HfTokenizer plain(t.dump(), "t.json");
  const auto body = plain.encode("some text", false);
  std::vector<uint32_t> wrapped{bos};
  wrapped.insert(wrapped.end(), body.begin(), body.end());
  wrapped.push_back(eos);
  EXPECT_EQ(plain.encode("some text", true), wrapped);

  json sequence = t;
  sequence["post_processor"] = {{"type", "Sequence"},
                                {"processors", json::array({{{"type", "ByteLevel"}}, t["post_processor"]})}};
  EXPECT_EQ(HfTokenizer(sequence.dump(), "s.json").encode("some text", true), wrapped);

  json roberta = t;
  roberta["post_processor"] = {{"type", "RobertaProcessing"},
                               {"cls", json::array({"<s>", bos})},
                               {"sep", json::array({"</s>", eos})}};
  const HfTokenizer r(roberta.dump(), "r.json");
  EXPECT_EQ(r.encode("some text", true), wrapped);
  EXPECT_EQ(r.document_separator(), eos);

  json bad = t;
  bad["post_processor"]["special_tokens"]["</s>"]["ids"] = json::array({999999});
  expect_config_error(bad, {"post_processor", "999999"});
}

TEST(HfTokenizer, BadRegexIsAConfigErrorNamingThePattern) {
  json t = tiny();
  t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([a-z";
  expect_config_error(t, {"pre_tokenizer.pretokenizers[0].pattern", "([a-z", "does not compile"});
}

TEST(HfTokenizer, MalformedJsonIsAFileErrorNamingTheByte) {
  const std::string text = tiny().dump();
  expect_error<FileError>([&] { HfTokenizer(text.substr(0, text.size() / 2), "cut.json"); },
                          {"cut.json", "not valid JSON", "at byte"});
  expect_error<FileError>([&] { HfTokenizer("", "empty.json"); }, {"empty.json"});
  // Nesting is bounded: no stack overflow on hostile input.
  expect_error<FileError>([&] { HfTokenizer(std::string(100000, '['), "deep.json"); },
                          {"deep.json", "nests deeper"});
}

TEST(HfTokenizer, MissingFilesAreFileErrorsNamingThePath) {
  ScratchDir dir;
  expect_error<FileError>([&] { load_hf_tokenizer(dir.path("absent.json")); }, {"absent.json"});
  expect_error<FileError>([&] { load_hf_tokenizer(dir.path("")); }, {"has no tokenizer.json"});
  write_file(dir.path("tokenizer.json.gz"), "not gzip at all");
  expect_error<FileError>([&] { load_hf_tokenizer(dir.path("")); },
                          {"tokenizer.json.gz", "gzip"});
}

TEST(HfTokenizer, LoadsAFolderAFileAndAGzipFile) {
  ScratchDir dir;
  write_file(dir.path("tokenizer.json"), read_file(kFixtures + "tiny/tokenizer.json"));
  const auto from_folder = load_hf_tokenizer(dir.path(""));
  const auto from_file = load_hf_tokenizer(dir.path("tokenizer.json"));
  const auto from_gzip = load_hf_tokenizer(kFixtures + "gpt2/tokenizer.json.gz");
  EXPECT_EQ(from_folder->encode("hello there", false), from_file->encode("hello there", false));
  EXPECT_EQ(from_gzip->encode("Hello world", false), (std::vector<uint32_t>{15496, 995}));
  EXPECT_NE(from_gzip->description().find("tokenizer.json.gz"), std::string::npos);
}

TEST(HfTokenizer, InvalidUtf8IsAConfigErrorNamingTheByteOffset) {
  const auto tokenizer = load_hf_tokenizer(kFixtures + "gpt2");
  expect_error([&] { tokenizer->encode("ab\xff" "cd", false); }, {"not valid UTF-8", "byte 2", "0xff"});
  expect_error([&] { tokenizer->encode("abc\xe2\x82", false); }, {"byte 3"});   // truncated
  expect_error([&] { tokenizer->encode("\xc0\xaf", false); }, {"byte 0"});      // overlong
  expect_error([&] { tokenizer->encode("x\xed\xa0\x80", false); }, {"byte 1"});  // surrogate
  EXPECT_TRUE(tokenizer->encode("", false).empty());
}

TEST(HfTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  const auto tokenizer = load_hf_tokenizer(kFixtures + "gpt2");
  EXPECT_EQ(tokenizer->vocab_size(), 50257);
  expect_error([&] { tokenizer->decode({15496, 50257}, false); },
               {"token id 50257 at position 1", "not in the vocabulary"});
}

TEST(HfTokenizer, DocumentSeparatorFollowsTheDocumentedRule) {
  // Rule 1: tokenizer_config.json's eos_token.
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "gpt2")->document_separator(), 50256u);
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "llama2")->document_separator(), 2u);
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "llama3")->document_separator(), 128001u);
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "qwen3")->document_separator(), 151645u);  // <|im_end|>
  const json t = tiny();
  const uint32_t base = t["added_tokens"][0]["id"];  // <|endoftext|>, then <s>, </s>
  ScratchDir dir;
  write_file(dir.path("tokenizer.json"), t.dump());
  write_file(dir.path("tokenizer_config.json"), R"({"eos_token": {"content": "<|endoftext|>"}})");
  EXPECT_EQ(load_hf_tokenizer(dir.path(""))->document_separator(), base);
  // Rule 2: the post-processor's trailing special token (tiny's template is "<s> $A </s>").
  EXPECT_EQ(HfTokenizer(t.dump(), "t.json").document_separator(), base + 2);
  // Rule 3: a special added token with an EOS name.
  json no_template = t;
  no_template["post_processor"] = nullptr;
  EXPECT_EQ(HfTokenizer(no_template.dump(), "t.json").document_separator(), base);
  // Rule 4: none.
  no_template["added_tokens"] = json::array();
  EXPECT_EQ(HfTokenizer(no_template.dump(), "t.json").document_separator(), std::nullopt);
}

// Byte-level BPE loses nothing: every text comes back byte for byte.
TEST(HfTokenizer, ByteLevelFamiliesRoundTripEveryText) {
  for (const char* family : {"gpt2", "llama3", "qwen3"}) {
    const auto tokenizer = load_hf_tokenizer(kFixtures + family);
    // Qwen's NFC normalizer composes decomposed accents: that line decodes to its NFC form.
    const bool nfc = std::string(family) == "qwen3";
    std::string whole;
    for (const auto& line : corpus_lines()) {
      if (nfc && line.find("Decomposed") != std::string::npos) continue;
      EXPECT_EQ(tokenizer->decode(tokenizer->encode(line, false), false), line) << family;
      whole += line + "\n";
    }
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(whole, false), false), whole) << family;
    std::string bytes;  // every valid one-byte and some multi-byte characters
    for (int c = 1; c < 128; ++c) bytes += static_cast<char>(c);
    bytes += "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(bytes, false), false), bytes) << family;
  }
}

// SentencePiece BPE (Llama 2 / Mistral) round-trips text, with the exceptions Hugging Face
// has too (the reference tests check that decode is the same as the library's):
//  - added-token strings: the legacy Prepend normalizer gives every piece after an added token
//    a "▁" of its own, an extra space in the decode;
//  - a literal "▁" in the text decodes as a space;
//  - Metaspace decoder: every "▁" of the first token is dropped, so a text starting with
//    several spaces comes back with one fewer... or none ("▁▁▁" is one token).
TEST(HfTokenizer, SentencePieceFamiliesRoundTripTextWithoutAddedTokens) {
  for (const std::string family : {"llama2", "llama2_metaspace"}) {
    const auto tokenizer = load_hf_tokenizer(kFixtures + family);
    for (const auto& line : corpus_lines()) {
      if (line.find("<s>") != std::string::npos || line.find("</s>") != std::string::npos ||
          line.find("<unk>") != std::string::npos || line.find("\u2581") != std::string::npos) {
        continue;
      }
      if (family == "llama2_metaspace" && line.rfind("  ", 0) == 0) continue;
      EXPECT_EQ(tokenizer->decode(tokenizer->encode(line, false), false), line) << family;
    }
  }
}

// A text of 1 MiB or more is cut and encoded on several threads where that is exact: the ids
// must be those of one thread. Lines holding "<" are left out so that the SentencePiece text is
// one long piece (the case cut after newlines).
TEST(HfTokenizer, LongTextsGiveTheSameIdsOnSeveralThreads) {
  std::string text;
  while (text.size() < (3u << 19)) {
    for (const auto& line : corpus_lines()) {
      if (line.find('<') == std::string::npos) text += line + "\n";
    }
  }
  for (const char* family :
       {"gpt2", "llama3", "qwen3", "llama2", "llama2_metaspace", "tiny", "tiny_sp"}) {
    auto tokenizer = load_hf_tokenizer(kFixtures + family);
    auto& hf = dynamic_cast<HfTokenizer&>(*tokenizer);
    hf.set_max_threads(1);
    const auto serial = hf.encode(text, true);
    hf.set_max_threads(3);
    EXPECT_EQ(hf.encode(text, true), serial) << family;
    EXPECT_EQ(hf.decode(serial, false).size(), hf.decode(hf.encode(text, true), false).size());
  }
}

// Each thread keeps a word cache across calls; switching tokenizers on one thread must not
// hand one tokenizer the other's cached words (both have "Hello" etc. with other ids).
TEST(HfTokenizer, WordCacheNeverMixesTokenizers) {
  const auto gpt2 = load_hf_tokenizer(kFixtures + "gpt2");
  const auto qwen = load_hf_tokenizer(kFixtures + "qwen3");
  const std::string text = "Hello world, hello again world";
  const auto gpt2_ids = gpt2->encode(text, false);
  const auto qwen_ids = qwen->encode(text, false);
  EXPECT_NE(gpt2_ids, qwen_ids);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(gpt2->encode(text, false), gpt2_ids);
    EXPECT_EQ(qwen->encode(text, false), qwen_ids);
  }
  EXPECT_EQ(gpt2_ids, (std::vector<uint32_t>{15496, 995, 11, 23748, 757, 995}));
}

TEST(HfTokenizer, ConcurrentEncodeCallsAgree) {
  const auto tokenizer = load_hf_tokenizer(kFixtures + "llama3");
  const auto lines = corpus_lines();
  std::vector<std::vector<uint32_t>> expected;
  for (const auto& line : lines) expected.push_back(tokenizer->encode(line, true));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < lines.size(); ++i) {
          if (tokenizer->encode(lines[i], true) != expected[i]) ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << "thread " << t;
}

}  // namespace
}  // namespace zero::data
