// `zero tokenize` through the built executable: the ids of a file and of standard input equal
// Hugging Face's (the reference vectors), --add-special-tokens, --decode (and
// --skip-special-tokens) back to the text, and exit code 2 with a message naming the problem for
// every user error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/shell_runner.h"

namespace tokenize_cli_test {

const std::string kFixtures = std::string(ZERO_TEST_FIXTURES) + "/tokenizers/";

using Result = zero::testing::CliResult;
using zero::testing::Stderr;

// `zero <args>`: stdout, and stderr too unless `with_stderr` is false (then it is thrown away).
Result run_zero(const std::string& args, bool with_stderr = true) {
  return zero::testing::run_shell(zero::testing::zero_cli() + args,
                                  with_stderr ? Stderr::kMerge : Stderr::kDiscard);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json expected(const std::string& family) {
  return nlohmann::json::parse(read_file(kFixtures + family + "/expected.json"));
}

class ZeroTokenize : public zero::testing::ScratchDirTest {
 protected:
  ZeroTokenize() : ScratchDirTest("zero_tokenize_") {}
  void expect_user_error(const std::string& args, const std::string& message) const {
    const Result r = run_zero("tokenize " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
};

TEST_F(ZeroTokenize, FileIdsEqualHuggingFaces) {
  const std::string corpus = kFixtures + "corpus.txt";
  for (const char* family : {"gpt2", "llama2"}) {
    const Result r = run_zero("tokenize --tokenizer " + kFixtures + family + " " + corpus, false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(r.output.back(), '\n');
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line";
    EXPECT_EQ(nlohmann::json::parse(r.output), expected(family)["whole"]["ids"]) << family;
  }
}

TEST_F(ZeroTokenize, StandardInputAndSpecialTokens) {
  const std::string tokenizer = kFixtures + "llama2/tokenizer.json.gz";
  const Result r = run_zero("tokenize --tokenizer " + tokenizer + " --add-special-tokens < " +
                                kFixtures + "corpus.txt",
                            false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output), expected("llama2")["whole"]["ids_special"]);
  const Result empty = run_zero("tokenize --tokenizer " + tokenizer + " < /dev/null", false);
  EXPECT_EQ(empty.output, "[]\n");
}

TEST_F(ZeroTokenize, DecodeGivesTheTextBack) {
  const auto vectors = expected("gpt2");
  const std::string ids = write("ids.json", vectors["whole"]["ids"].dump());
  const Result r = run_zero("tokenize --tokenizer " + kFixtures + "gpt2 --decode " + ids, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, read_file(kFixtures + "corpus.txt"));

  const auto llama = expected("llama2")["lines"][0];
  const std::string special = write("special.json", llama["ids_special"].dump());
  const std::string base = "tokenize --tokenizer " + kFixtures + "llama2 --decode ";
  EXPECT_EQ(run_zero(base + special, false).output, llama["decoded_special"].get<std::string>());
  EXPECT_EQ(run_zero(base + "--skip-special-tokens " + special, false).output,
            llama["decoded_special_skip"].get<std::string>());
  EXPECT_EQ(run_zero(base + "< " + special, false).output,
            llama["decoded_special"].get<std::string>());
}

TEST_F(ZeroTokenize, UserErrorsNameTheProblem) {
  const std::string gpt2 = "--tokenizer " + kFixtures + "gpt2 ";
  expect_user_error(kFixtures + "corpus.txt", "needs --tokenizer");
  expect_user_error("--tokenizer " + (dir_ / "nowhere").string() + " /dev/null", "nowhere");
  expect_user_error("--tokenizer " + dir_.string() + " /dev/null", "has no tokenizer.json");
  expect_user_error(gpt2 + (dir_ / "missing.txt").string(), "missing.txt");
  expect_user_error(gpt2 + write("bad.txt", "fine\nthen \xfe bad"), "byte 10");
  expect_user_error(gpt2 + "--decode " + write("big.json", "[15496, 99999]"),
                    "token id 99999 at position 1");
  expect_user_error(gpt2 + "--decode " + write("neg.json", "[1, -2]"), "element 1");
  expect_user_error(gpt2 + "--decode " + write("obj.json", "{\"ids\": [1]}"), "one JSON array");
  expect_user_error(gpt2 + "--decode " + write("cut.json", "[1, 2"), "not valid JSON");
  expect_user_error(gpt2 + "a.txt b.txt", "at most one FILE");
  expect_user_error(gpt2 + "--skip-special-tokens /dev/null", "goes with --decode");
  expect_user_error(gpt2 + "--bogus 1", "unknown flag --bogus");
  auto unsupported = nlohmann::json::parse(read_file(kFixtures + "tiny/tokenizer.json"));
  unsupported["model"]["type"] = "Unigram";
  expect_user_error("--tokenizer " + write("u.json", unsupported.dump()) + " /dev/null",
                    "model type \"Unigram\"");
}

TEST_F(ZeroTokenize, HelpListsTheFlags) {
  const Result r = run_zero("tokenize --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--tokenizer", "--add-special-tokens", "--decode", "--skip-special-tokens"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  }
}

}  // namespace tokenize_cli_test
