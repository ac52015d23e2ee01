// Token shards with a loss mask (magic 20261125): round trip at both token widths, llm.c shards
// still read with every token a target, every malformed masked header/mask is a FileError
// naming the file, and TokenDataset turns masked targets into the ignore index (-100) exactly
// at the masked positions.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/error_text.h"
#include "data/scratch_dir.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"

namespace zero::data {
namespace token_shard_mask_test {

using testing::error_of;
using testing::has;

// A masked shard written byte by byte: header ints, then raw payload bytes.
void write_raw(const std::string& path, std::vector<int32_t> header, const std::string& payload) {
  header.resize(256, 0);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out << payload;
}

TEST(TokenShardMask, RoundTripsNarrowAndWide) {
  testing::ScratchDir dir;
  const std::string narrow = dir.path("narrow.bin"), wide = dir.path("wide.bin");
  write_token_shard(narrow, {5, 6, 7, 8, 9}, {0, 0, 1, 1, 1});
  // 2 + 1 bytes per token after the header.
  EXPECT_EQ(std::filesystem::file_size(narrow), 1024u + 5u * 3u);
  const TokenShard a = TokenShard::open(narrow, 16);
  EXPECT_TRUE(a.has_mask());
  EXPECT_FALSE(a.wide());
  EXPECT_EQ(a.size(), 5);
  EXPECT_EQ(a.target_count(), 3);
  EXPECT_EQ(a.token(4), 9u);
  EXPECT_FALSE(a.is_target(0));
  EXPECT_FALSE(a.is_target(1));
  EXPECT_TRUE(a.is_target(2));

  write_token_shard(wide, {70000, 1, 2}, {1, 0, 1});
  EXPECT_EQ(std::filesystem::file_size(wide), 1024u + 3u * 5u);
  const TokenShard b = TokenShard::open(wide, 70001);
  EXPECT_TRUE(b.wide());
  EXPECT_EQ(b.token(0), 70000u);
  EXPECT_EQ(b.target_count(), 2);
  // wide = true forces uint32 even for small ids.
  write_token_shard(wide, {1, 2}, {1, 1}, true);
  EXPECT_TRUE(TokenShard::open(wide, 4).wide());

  std::vector<int64_t> targets(5);
  a.copy_targets(0, 5, kIgnoredTarget, targets.data());
  EXPECT_EQ(targets, (std::vector<int64_t>{-100, -100, 7, 8, 9}));
  std::vector<int32_t> inputs(5);
  a.copy_window(0, 5, inputs.data());  // inputs are never masked
  EXPECT_EQ(inputs, (std::vector<int32_t>{5, 6, 7, 8, 9}));
}

TEST(TokenShardMask, LlmcShardsHaveEveryTokenAsTarget) {
  testing::ScratchDir dir;
  const std::string p = dir.path("plain.bin");
  write_token_shard(p, {3, 1, 4, 1, 5});
  const TokenShard shard = TokenShard::open(p, 8);
  EXPECT_FALSE(shard.has_mask());
  EXPECT_EQ(shard.target_count(), 5);
  EXPECT_TRUE(shard.is_target(0));
  std::vector<int32_t> targets(5);
  shard.copy_targets(0, 5, kIgnoredTarget, targets.data());
  EXPECT_EQ(targets, (std::vector<int32_t>{3, 1, 4, 1, 5}));
}

TEST(TokenShardMask, EmptyMaskedShardOpens) {
  testing::ScratchDir dir;
  const std::string p = dir.path("empty.bin");
  write_token_shard(p, {}, std::vector<uint8_t>{});
  const TokenShard shard = TokenShard::open(p, 8);
  EXPECT_TRUE(shard.has_mask());
  EXPECT_EQ(shard.size(), 0);
  EXPECT_EQ(shard.target_count(), 0);
}

TEST(TokenShardMask, MalformedMaskedShardsAreNamed) {
  testing::ScratchDir dir;
  const std::string p = dir.path("m.bin");
  // 3 uint16 tokens + 3 mask bytes = 9 bytes.
  const std::string tokens("\x01\x00\x02\x00\x03\x00", 6);
  write_raw(p, {kShardMagicMasked, kShardVersionMasked, 3, 2}, tokens + std::string("\x01\x00\x01", 3));
  EXPECT_EQ(TokenShard::open(p, 8).target_count(), 2);

  write_raw(p, {kShardMagicMasked, kShardVersionMasked, 3, 2}, tokens + std::string("\x01\x02\x01", 3));
  std::string message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, p) && has(message, "loss mask value 2 at position 1")) << message;

  write_raw(p, {kShardMagicMasked, kShardVersionMasked, 3, 3}, tokens + std::string(3, '\1'));
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, p) && has(message, "3 bytes per token")) << message;

  write_raw(p, {kShardMagicMasked, 2, 3, 2}, tokens + std::string(3, '\1'));
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, p) && has(message, "version 2")) << message;

  // The mask is missing (an llm.c-sized payload under the masked magic): truncated.
  write_raw(p, {kShardMagicMasked, kShardVersionMasked, 3, 2}, tokens);
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, p) && has(message, "with their loss mask") && has(message, "truncated"))
      << message;

  write_raw(p, {kShardMagicMasked, kShardVersionMasked, 3, 2}, tokens + std::string(4, '\1'));
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, "trailing data")) << message;

  // The largest count with a tiny payload: no overflow in the size check, an error.
  write_raw(p, {kShardMagicMasked, kShardVersionMasked, INT32_MAX, 4}, std::string(10, '\0'));
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, "2,147,483,647 tokens")) << message;

  // Token ids are still checked against the vocabulary.
  write_token_shard(p, {1, 9, 2}, {1, 1, 1});
  message = error_of<FileError>([&] { TokenShard::open(p, 8); });
  EXPECT_TRUE(has(message, "token 9 at position 1")) << message;
}

TEST(TokenShardMask, WriterRejectsBadMasks) {
  testing::ScratchDir dir;
  const std::string p = dir.path("w.bin");
  std::string message =
      error_of<ConfigError>([&] { write_token_shard(p, {1, 2, 3}, std::vector<uint8_t>{1, 0}); });
  EXPECT_TRUE(has(message, "2 values for 3 tokens")) << message;
  message = error_of<ConfigError>([&] { write_token_shard(p, {1, 2}, std::vector<uint8_t>{1, 7}); });
  EXPECT_TRUE(has(message, "mask value 7 at position 1")) << message;
  EXPECT_FALSE(std::filesystem::exists(p));
}

// The data-level proof: prompt tokens (mask 0) become -100 in the targets, exactly there.
TEST(TokenShardMask, DatasetTargetsAreIgnoredExactlyAtMaskedTokens) {
  testing::ScratchDir dir;
  const std::string p = dir.path("pairs.bin");
  // Two prompt/response records: prompt 10 11 | response 20 21 | sep 0, prompt 12 | 22 23 | 0.
  const std::vector<uint32_t> tokens = {10, 11, 20, 21, 0, 12, 22, 23, 0};
  const std::vector<uint8_t> mask = {0, 0, 1, 1, 1, 0, 1, 1, 1};
  write_token_shard(p, tokens, mask);
  const TokenDataset dataset = TokenDataset::open({p}, 32, 4);
  ASSERT_EQ(dataset.num_samples(), 2);
  for (int64_t sample = 0; sample < 2; ++sample) {
    std::vector<int64_t> inputs(4), targets(4);
    dataset.copy_sample(sample, inputs.data(), targets.data());
    for (int64_t t = 0; t < 4; ++t) {
      const auto next = static_cast<size_t>(sample * 4 + t + 1);
      EXPECT_EQ(inputs[static_cast<size_t>(t)], tokens[next - 1]);
      const int64_t expected = mask[next] != 0 ? static_cast<int64_t>(tokens[next]) : -100;
      EXPECT_EQ(targets[static_cast<size_t>(t)], expected) << "sample " << sample << " t " << t;
    }
  }
  // Sample 1 starts at token 4 (the separator): targets 12 (prompt) -> -100.
  std::vector<int32_t> inputs(4), targets(4);
  dataset.copy_sample(1, inputs.data(), targets.data());
  EXPECT_EQ(targets, (std::vector<int32_t>{-100, 22, 23, 0}));
}

}  // namespace token_shard_mask_test
}  // namespace zero::data
