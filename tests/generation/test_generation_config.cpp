// generation_config.json (generation/generation_config.h): the settings generate() takes, the
// eos ids as one id or a list (and config.json's when it has none), what is not applied, and
// errors that name the file and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "generation/generation_config.h"

namespace zero::generation {
namespace test_generation_config {

namespace fs = std::filesystem;

TEST(GenerationConfig, ReadsTheSamplingSettingsAndEosIds) {
  const GenerationDefaults d = parse_generation_config(
      R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.9,
          "repetition_penalty": 1.1, "max_new_tokens": 128, "eos_token_id": [2, 32000],
          "bos_token_id": 1, "pad_token_id": null, "num_beams": 1, "transformers_version": "5"})",
      "gen.json");
  EXPECT_EQ(d.do_sample, true);
  EXPECT_EQ(d.temperature, 0.6);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.9);
  EXPECT_EQ(d.repetition_penalty, 1.1);
  EXPECT_EQ(d.max_new_tokens, 128);
  EXPECT_EQ(d.eos_token_ids, (std::vector<int64_t>{2, 32000}));
  EXPECT_TRUE(d.not_applied.empty());
  const GenerationDefaults empty = parse_generation_config(R"({"temperature": null})", "g");
  EXPECT_FALSE(empty.temperature.has_value());
  EXPECT_FALSE(empty.do_sample.has_value());
}

TEST(GenerationConfig, NamesWhatItDoesNotApply) {
  const GenerationDefaults d = parse_generation_config(
      R"({"num_beams": 4, "length_penalty": 1.0, "no_repeat_ngram_size": 3, "eos_token_id": 7,
          "max_length": 512})",
      "g");
  EXPECT_EQ(d.not_applied, (std::vector<std::string>{"max_length = 512", "num_beams = 4",
                                                     "no_repeat_ngram_size = 3"}));
  EXPECT_EQ(d.eos_token_ids, (std::vector<int64_t>{7}));
}

TEST(GenerationConfig, BadValuesNameTheFileAndKey) {
  auto message = [](const std::string& text) -> std::string {
    try {
      parse_generation_config(text, "model/generation_config.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(R"({"temperature": "hot"})")
                .find("model/generation_config.json: \"temperature\" is \"hot\"; it must be a "
                      "finite number"),
            std::string::npos);
  EXPECT_NE(message(R"({"temperature": 0})").find("above 0"), std::string::npos);
  EXPECT_NE(message(R"({"top_p": 1.5})").find("\"top_p\" is 1.5; it must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(message(R"({"top_k": -1})").find("\"top_k\""), std::string::npos);
  EXPECT_NE(message(R"({"top_k": 2.5})").find("a whole number"), std::string::npos);
  EXPECT_NE(message(R"({"do_sample": 1})").find("true or false"), std::string::npos);
  EXPECT_NE(message(R"({"max_new_tokens": 0})").find("\"max_new_tokens\""), std::string::npos);
  EXPECT_NE(message(R"({"eos_token_id": [1, -2]})").find("a token id or a list of them"),
            std::string::npos);
  EXPECT_NE(message(R"({"eos_token_id": 99999999999})").find("\"eos_token_id\""),
            std::string::npos);
  EXPECT_NE(message("[1, 2]").find("must hold one JSON object"), std::string::npos);
  EXPECT_THROW(parse_generation_config("{\"top_k\": ", "g"), FileError);
}

TEST(GenerationConfig, FallsBackToTheModelConfigsEosId) {
  const fs::path dir = fs::temp_directory_path() / "zero_test_generation_config";
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_TRUE(read_generation_defaults(dir.string()).eos_token_ids.empty());  // no files: unset
  std::ofstream(dir / "config.json") << R"({"eos_token_id": 50256})";
  EXPECT_EQ(read_generation_defaults(dir.string()).eos_token_ids, (std::vector<int64_t>{50256}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [1, 2], "top_k": 5})";
  const GenerationDefaults d = read_generation_defaults(dir.string());
  EXPECT_EQ(d.eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d.top_k, 5);
  fs::remove_all(dir);
}

}  // namespace test_generation_config
}  // namespace zero::generation
