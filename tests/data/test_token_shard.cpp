// TokenShard: uint16 and uint32 round trips (bytes on disk checked against llm.c's layout),
// window copies, and every bad-file case with a message naming the file and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/raw_shard.h"
#include "data/scratch_dir.h"
#include "data/token_shard.h"

namespace zero::data {
namespace {

namespace fs = std::filesystem;

using testing::write_raw;

std::vector<int32_t> read_header(const std::string& path) {
  std::vector<int32_t> header(256);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header.data()), 1024);
  return header;
}

// Runs `open` and expects a FileError whose message contains the path and every `parts`.
void expect_file_error(const std::string& path, int64_t vocab,
                       const std::vector<std::string>& parts) {
  try {
    TokenShard::open(path, vocab);
    ADD_FAILURE() << "expected FileError for " << path;
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(TokenShard, NarrowRoundTrip) {
  testing::ScratchDir dir;
  const std::string path = dir.path("narrow.bin");
  const std::vector<uint32_t> tokens = {0, 1, 2, 65535, 7, 50256};
  write_token_shard(path, tokens);
  EXPECT_EQ(fs::file_size(path), 1024u + 2u * tokens.size());
  const auto header = read_header(path);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 6);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << i;

  const TokenShard shard = TokenShard::open(path, 65536);
  EXPECT_FALSE(shard.wide());
  ASSERT_EQ(shard.size(), 6);
  for (int64_t i = 0; i < shard.size(); ++i)
    EXPECT_EQ(shard.token(i), tokens[static_cast<size_t>(i)]);
  EXPECT_EQ(shard.max_token(), 65535u);
  EXPECT_EQ(shard.path(), path);
}

TEST(TokenShard, WideRoundTripAndForcedWide) {
  testing::ScratchDir dir;
  const std::string big = dir.path("big.bin"), forced = dir.path("forced.bin");
  write_token_shard(big, {1, 128255, 70000});  // an id >= 65536 makes the file uint32
  EXPECT_EQ(fs::file_size(big), 1024u + 12u);
  EXPECT_EQ(read_header(big)[0], 20240801);
  EXPECT_EQ(read_header(big)[1], 7);
  const TokenShard shard = TokenShard::open(big, 128256);
  EXPECT_TRUE(shard.wide());
  EXPECT_EQ(shard.token(1), 128255u);
  EXPECT_EQ(shard.token(2), 70000u);

  write_token_shard(forced, {5, 6}, /*wide=*/true);
  EXPECT_EQ(fs::file_size(forced), 1024u + 8u);
  const TokenShard small = TokenShard::open(forced, 10);
  EXPECT_TRUE(small.wide());
  EXPECT_EQ(small.token(1), 6u);
}

TEST(TokenShard, EmptyShardAndCopiesShareTheMapping) {
  testing::ScratchDir dir;
  write_token_shard(dir.path("empty.bin"), {});
  EXPECT_EQ(TokenShard::open(dir.path("empty.bin"), 1).size(), 0);
  write_token_shard(dir.path("a.bin"), {9, 8, 7});
  TokenShard copy = TokenShard::open(dir.path("a.bin"), 10);
  {
    const TokenShard original = TokenShard::open(dir.path("a.bin"), 10);
    copy = original;
  }
  EXPECT_EQ(copy.token(2), 7u);  // still mapped after the original is gone
}

TEST(TokenShard, CopyWindowToInt32AndInt64) {
  testing::ScratchDir dir;
  for (const bool wide : {false, true}) {
    const std::string path = dir.path(wide ? "w.bin" : "n.bin");
    write_token_shard(path, {10, 11, 12, 13, 14}, wide);
    const TokenShard shard = TokenShard::open(path, 100);
    std::vector<int32_t> narrow(3);
    shard.copy_window(1, 3, narrow.data());
    EXPECT_EQ(narrow, (std::vector<int32_t>{11, 12, 13}));
    std::vector<int64_t> wide_out(2);
    shard.copy_window(3, 2, wide_out.data());
    EXPECT_EQ(wide_out, (std::vector<int64_t>{13, 14}));
    EXPECT_THROW(shard.copy_window(4, 2, narrow.data()), InternalError);
  }
}

TEST(TokenShard, AtomicWriteReplacesAndLeavesNoTemporaries) {
  testing::ScratchDir dir;
  const std::string path = dir.path("a.bin");
  write_token_shard(path, {1, 2, 3});
  write_token_shard(path, {4});
  EXPECT_EQ(TokenShard::open(path, 10).size(), 1);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.dir())) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_THROW(write_token_shard(dir.path("no/such/dir/x.bin"), {1}), FileError);
}

TEST(TokenShard, ShorterThanTheHeader) {
  testing::ScratchDir dir;
  const std::string path = dir.path("short.bin");
  std::ofstream(path, std::ios::binary) << "short";
  expect_file_error(path, 100, {"5 bytes", "shorter than the 1024-byte"});
}

TEST(TokenShard, BadMagicNamesTheKnownOnes) {
  testing::ScratchDir dir;
  const std::string path = dir.path("magic.bin");
  write_raw(path, {123, 1, 4}, 8);
  expect_file_error(path, 100, {"bad magic 123", "20240520", "20240801"});
}

TEST(TokenShard, VersionMustMatchTheMagic) {
  testing::ScratchDir dir;
  const std::string path = dir.path("version.bin");
  write_raw(path, {20240520, 7, 4}, 8);
  expect_file_error(path, 100, {"version 7", "magic 20240520", "version is 1"});
  write_raw(path, {20240801, 1, 2}, 8);
  expect_file_error(path, 100, {"version 1", "magic 20240801", "version is 7"});
}

TEST(TokenShard, CountDisagreesWithTheFileSize) {
  testing::ScratchDir dir;
  const std::string path = dir.path("count.bin");
  write_raw(path, {20240520, 1, 10}, 8);
  expect_file_error(path, 100, {"10 tokens", "1,044 bytes", "1,032 bytes", "truncated"});
  write_raw(path, {20240520, 1, 2}, 8);
  expect_file_error(path, 100, {"2 tokens", "trailing data"});
  write_raw(path, {20240801, 7, 3}, 8);  // 8 bytes of uint32 tokens is 2, not 3
  expect_file_error(path, 100, {"3 tokens", "truncated"});
  write_raw(path, {20240520, 1, -5}, 8);
  expect_file_error(path, 100, {"negative"});
}

TEST(TokenShard, TokenOutsideTheVocabularyNamesIdAndPosition) {
  testing::ScratchDir dir;
  const std::string path = dir.path("vocab.bin");
  std::vector<uint32_t> tokens(1500, 7);
  tokens[1234] = 51234;
  tokens[1400] = 60000;  // only the first offender is reported
  write_token_shard(path, tokens);
  expect_file_error(path, 50257,
                    {"token 51234 at position 1,234", "vocabulary size 50257", "another model"});
  EXPECT_EQ(TokenShard::open(path, 60001).size(), 1500);  // large enough: fine
}

TEST(TokenShard, MissingFileAndDirectory) {
  testing::ScratchDir dir;
  expect_file_error(dir.path("missing.bin"), 10, {"cannot open", "No such file"});
  expect_file_error(dir.dir().string(), 10, {"not a regular file"});
  EXPECT_THROW(TokenShard::open(dir.path("missing.bin"), 0), ConfigError);
}

}  // namespace
}  // namespace zero::data
