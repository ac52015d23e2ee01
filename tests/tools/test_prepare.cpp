// `zero prepare` through the built executable: flags -> data::prepare_corpus, printed token
// counts, JSONL and prompt/response input, the tokenizer choice (--tokenizer, --model's
// tokenizer.json, the byte tokenizer), and exit code 2 with a message naming the problem for
// every user error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/token_shard.h"
#include "tools/cli_helpers.h"
#include "tools/shell_runner.h"

namespace prepare_test {

namespace fs = std::filesystem;

using Result = zero::testing::CliResult;
using zero::testing::has;

// `zero <args>`, stdout and stderr together.
Result run_zero(const std::string& args) {
  return zero::testing::run_shell(zero::testing::zero_cli() + args);
}

class ZeroPrepare : public zero::testing::ScratchDirTest {
 protected:
  ZeroPrepare() : ScratchDirTest("zero_prepare_") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    text_ = (dir_ / "a.txt").string();
    std::ofstream(text_) << std::string(1000, 'z');
  }

  void expect_user_error(const std::string& args, const std::string& message) const {
    const Result r = run_zero("prepare " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }

  std::string text_;
};

TEST_F(ZeroPrepare, WritesShardsAndPrintsCounts) {
  const std::string train = path("train.bin"), val = path("val.bin");
  const Result r =
      run_zero("prepare --out " + train + " --val-out=" + val + " --val-fraction 0.2 " + text_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(text_ + ": 1000 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + train + ": 800 tokens"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + val + ": 200 tokens"), std::string::npos) << r.output;
  EXPECT_EQ(fs::file_size(train), 1024u + 2u * 800u);
  EXPECT_EQ(fs::file_size(val), 1024u + 2u * 200u);
  // Inputs may come before the flags too; without --val-out everything is training data.
  const Result all = run_zero("prepare " + text_ + " --out " + train);
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(fs::file_size(train), 1024u + 2u * 1000u);
}

TEST_F(ZeroPrepare, UserErrorsExitWithTwoAndAMessage) {
  const std::string train = path("train.bin");
  expect_user_error("--out " + train + " " + path("missing.txt"), path("missing.txt"));
  expect_user_error(text_, "--out FILE.bin is required");
  expect_user_error("--out " + train + " --val-fraction 0.2 " + text_, "needs --val-out");
  expect_user_error(
      "--out " + train + " --val-out " + path("v.bin") + " --val-fraction abc " + text_,
      "must be a number");
  expect_user_error(
      "--out " + train + " --val-out " + path("v.bin") + " --val-fraction 1.5 " + text_, "(0, 1)");
  expect_user_error("--output " + train + " " + text_, "did you mean --out");
  expect_user_error("--out " + train, "at least one text file");
  EXPECT_FALSE(fs::exists(train));
}

TEST_F(ZeroPrepare, HelpListsTheFlags) {
  const Result r = run_zero("prepare --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--val-fraction"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--prompt-field"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--tokenizer"), std::string::npos) << r.output;
}

const std::string kFixtures = ZERO_TEST_FIXTURES;
const std::string kGpt2Tokenizer = kFixtures + "/tokenizers/gpt2";
constexpr uint32_t kGpt2EndOfText = 50256;

TEST_F(ZeroPrepare, JsonlTextFieldWithTheByteTokenizer) {
  const std::string in = write("docs.jsonl", "{\"text\": \"abc\"}\n\n{\"text\": \"de\", \"n\": 2}\n");
  const std::string train = path("train.bin");
  const Result r = run_zero("prepare --field text --threads 2 --out " + train + " " + in);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, in + ": 5 tokens")) << r.output;
  EXPECT_TRUE(has(r.output, "2 documents; tokenizer: byte tokenizer")) << r.output;
  EXPECT_TRUE(has(r.output, "wrote " + train + ": 5 tokens\n")) << r.output;
  const auto shard = zero::data::TokenShard::open(train, 256);
  EXPECT_FALSE(shard.has_mask());
  EXPECT_EQ(shard.token(3), static_cast<uint32_t>('d'));
}

TEST_F(ZeroPrepare, PromptResponseJsonlWritesAMaskedShardThatInspectReports) {
  ASSERT_TRUE(fs::exists(kGpt2Tokenizer)) << "missing fixture " << kGpt2Tokenizer;
  const std::string in = write("pairs.jsonl",
                               "{\"q\": \"Hello, \", \"a\": \"world!\"}\n"
                               "{\"q\": \"2+2=\", \"a\": \"4\"}\n"
                               "{\"q\": \"Say hi\", \"a\": \" hi\"}\n");
  const std::string train = path("train.bin"), val = path("val.bin");
  const Result r = run_zero("prepare --tokenizer " + kGpt2Tokenizer +
                            " --prompt-field q --response-field a --val-out " + val +
                            " --val-fraction 0.3 --out " + train + " " + in);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "Hugging Face tokenizer")) << r.output;
  // GPT-2: "Hello" "," " " | "world" "!" <eot> | "2" "+" "2" "=" | "4" <eot> | "Say" " hi" | " hi" <eot>
  EXPECT_TRUE(has(r.output, "wrote " + train + ": 12 tokens, 5 of them loss targets")) << r.output;
  EXPECT_TRUE(has(r.output, "wrote " + val + ": 4 tokens, 2 of them loss targets")) << r.output;
  const auto shard = zero::data::TokenShard::open(train, 50257);
  ASSERT_TRUE(shard.has_mask());
  const std::vector<bool> targets = {false, false, false, true, true, true,
                                     false, false, false, false, true, true};
  ASSERT_EQ(shard.size(), 12);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(shard.is_target(i), targets[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(shard.token(5), kGpt2EndOfText);
  EXPECT_EQ(shard.token(11), kGpt2EndOfText);
  const Result inspect = run_zero("inspect " + train);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_TRUE(has(inspect.output, "loss mask: 5 of 12 tokens are targets")) << inspect.output;
}

TEST_F(ZeroPrepare, InspectSaysWhenAShardHasNoMask) {
  const std::string train = path("train.bin");
  ASSERT_EQ(run_zero("prepare --out " + train + " " + text_).exit_code, 0);
  const Result inspect = run_zero("inspect " + train);
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_TRUE(has(inspect.output, "no loss mask: every token is a target")) << inspect.output;
}

TEST_F(ZeroPrepare, ModelFolderProvidesTheTokenizer) {
  ASSERT_TRUE(fs::exists(kGpt2Tokenizer)) << "missing fixture " << kGpt2Tokenizer;
  const std::string train = path("train.bin");
  // A folder without tokenizer.json: the byte tokenizer, with a note.
  const std::string tiny = kFixtures + "/hf/tiny-gpt2";
  Result r = run_zero("prepare --model " + tiny + " --out " + train + " " + text_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "has no tokenizer.json; using the byte tokenizer")) << r.output;
  // A folder with one: that tokenizer, checked against the model's vocabulary.
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  fs::copy(kGpt2Tokenizer, model, fs::copy_options::recursive);
  r = run_zero("prepare --model " + model.string() + " --out " + train + " " + text_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "Hugging Face tokenizer")) << r.output;
  fs::copy_file(tiny + "/config.json", model / "config.json");  // vocab_size 256
  expect_user_error("--model " + model.string() + " --out " + train + " " + text_,
                    "embeds only 256");
  expect_user_error("--model " + path("nowhere") + " --out " + train + " " + text_,
                    "--model must be a Hugging Face model folder");
}

TEST_F(ZeroPrepare, JsonlAndTokenizerErrorsExitWithTwoAndAMessage) {
  const std::string train = path("train.bin");
  const std::string bad = write("bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": oops}\n");
  expect_user_error("--field text --out " + train + " " + bad, bad + " line 3");
  expect_user_error("--field text --out " + train + " " + bad, "not valid JSON");
  const std::string missing = write("missing.jsonl", "{\"body\": \"a\"}\n");
  expect_user_error("--field text --out " + train + " " + missing, "line 1: the record has no field \"text\"");
  const std::string number = write("number.jsonl", "{\"text\": 3}\n");
  expect_user_error("--field text --out " + train + " " + number, "not a string");
  const std::string array = write("array.jsonl", "[\"text\"]\n");
  expect_user_error("--field text --out " + train + " " + array, "not a JSON object");
  expect_user_error("--field text --prompt-field q --response-field a --out " + train + " " + bad,
                    "one or the other");
  expect_user_error("--prompt-field q --out " + train + " " + bad, "--prompt-field needs --response-field");
  expect_user_error("--response-field a --out " + train + " " + bad, "--response-field needs --prompt-field");
  expect_user_error("--out " + path("no/such/dir/train.bin") + " " + text_, "does not exist");
  expect_user_error("--threads 0 --out " + train + " " + text_, "--threads must be from 1");
  expect_user_error("--threads many --out " + train + " " + text_, "--threads");
  expect_user_error("--tokenizer " + path("nothing.json") + " --out " + train + " " + text_,
                    path("nothing.json"));
  // Invalid UTF-8: the byte tokenizer takes it, a Hugging Face tokenizer does not.
  const std::string latin1 = write("latin1.txt", "caf\xe9 au lait\n");
  const Result bytes = run_zero("prepare --out " + train + " " + latin1);
  EXPECT_EQ(bytes.exit_code, 0) << bytes.output;
  if (fs::exists(kGpt2Tokenizer)) {
    expect_user_error("--tokenizer " + kGpt2Tokenizer + " --out " + train + " " + latin1,
                      latin1 + ": invalid UTF-8 at byte offset 3 (line 1)");
  }
  fs::remove(train);
  expect_user_error("--field text --out " + train + " " + bad, "line 3");
  EXPECT_FALSE(fs::exists(train));
}

}  // namespace prepare_test
