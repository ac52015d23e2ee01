// prepare_text_files: text files -> byte-token shards, with an optional validation split from
// the end; every input is checked before anything is written; clear errors for bad arguments.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/prepare_text.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"

namespace zero::data {
namespace prepare_text_test {

namespace fs = std::filesystem;

std::string write_text(const testing::ScratchDir& dir, const std::string& name,
                       const std::string& text) {
  const std::string path = dir.path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string shard_text(const std::string& path) {
  const TokenShard shard = TokenShard::open(path, kByteVocabSize);
  std::vector<uint32_t> tokens(static_cast<size_t>(shard.size()));
  for (int64_t i = 0; i < shard.size(); ++i) tokens[static_cast<size_t>(i)] = shard.token(i);
  return decode_bytes(tokens);
}

template <typename Error, typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(PrepareText, ConcatenatesFilesAndSplitsTheEnd) {
  testing::ScratchDir dir;
  std::string first, second;
  for (int i = 0; i < 30; ++i) first += "line " + std::to_string(i) + "\n";
  for (int i = 0; i < 10; ++i) second += "\xc3\xa9t\xc3\xa9 " + std::to_string(i) + "\n";  // UTF-8
  const auto a = write_text(dir, "a.txt", first), b = write_text(dir, "b.txt", second);
  const std::string train = dir.path("train.bin"), val = dir.path("val.bin");
  const PrepareResult result = prepare_text_files({a, b}, train, val, 0.25);
  const std::string all = first + second;
  ASSERT_EQ(result.file_tokens, (std::vector<int64_t>{static_cast<int64_t>(first.size()),
                                                      static_cast<int64_t>(second.size())}));
  const auto val_tokens = static_cast<int64_t>(static_cast<double>(all.size()) * 0.25);
  EXPECT_EQ(result.val_tokens, val_tokens);
  EXPECT_EQ(result.train_tokens, static_cast<int64_t>(all.size()) - val_tokens);
  EXPECT_EQ(shard_text(train) + shard_text(val), all);
  EXPECT_EQ(shard_text(val), all.substr(all.size() - static_cast<size_t>(val_tokens)));
  EXPECT_FALSE(TokenShard::open(train, 256).wide());
}

TEST(PrepareText, WithoutValOutEverythingIsTraining) {
  testing::ScratchDir dir;
  const auto a = write_text(dir, "a.txt", "hello world");
  const std::string train = dir.path("train.bin");
  const PrepareResult result = prepare_text_files({a}, train, "", 0.5);  // fraction unused
  EXPECT_EQ(result.train_tokens, 11);
  EXPECT_EQ(result.val_tokens, 0);
  EXPECT_EQ(shard_text(train), "hello world");
}

TEST(PrepareText, MissingInputIsNamedAndNothingIsWritten) {
  testing::ScratchDir dir;
  const auto a = write_text(dir, "a.txt", "some text here");
  const std::string missing = dir.path("missing.txt"), train = dir.path("train.bin");
  expect_error<FileError>(
      [&] {
        prepare_text_files({a, missing}, train, "", 0.1);
      },
      {missing, "cannot open", "No such file"});
  EXPECT_FALSE(fs::exists(train));
  expect_error<FileError>([&] { prepare_text_files({dir.dir().string()}, train, "", 0.1); },
                          {"is a directory"});
}

TEST(PrepareText, BadArgumentsAreConfigErrors) {
  testing::ScratchDir dir;
  const auto a = write_text(dir, "a.txt", std::string(100, 'x'));
  const auto empty = write_text(dir, "empty.txt", "");
  const std::string train = dir.path("train.bin"), val = dir.path("val.bin");
  expect_error<ConfigError>([&] { prepare_text_files({}, train, "", 0.1); },
                            {"at least one text file"});
  expect_error<ConfigError>([&] { prepare_text_files({a}, "", "", 0.1); }, {"--out"});
  expect_error<ConfigError>([&] { prepare_text_files({a}, train, val, 1.0); },
                            {"--val-fraction", "(0, 1)"});
  expect_error<ConfigError>([&] { prepare_text_files({a}, train, val, 0.0); }, {"--val-fraction"});
  expect_error<ConfigError>([&] { prepare_text_files({a}, train, train, 0.1); }, {"same file"});
  expect_error<ConfigError>([&] { prepare_text_files({empty}, train, "", 0.1); }, {"empty"});
  expect_error<ConfigError>([&] { prepare_text_files({a}, train, val, 0.01); },
                            {"99 training and 1 validation tokens"});
  EXPECT_FALSE(fs::exists(train));
  EXPECT_FALSE(fs::exists(val));
}

}  // namespace prepare_text_test
}  // namespace zero::data
