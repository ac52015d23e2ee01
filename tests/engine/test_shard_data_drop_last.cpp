// dataloader_drop_last on token shards: with it, a micro-batch never spans two epochs (the
// epoch's leftover windows are skipped); without it, micro-batches run on into the next epoch.
// A share smaller than one micro-batch is an error naming the key, not an endless skip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/token_shard.h"
#include "engine/data_sources.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;

class ShardDataDropLast : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_drop_last_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // 10 windows of 4 tokens (+1 target): window w starts with token 4w.
    std::vector<uint32_t> tokens(41);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(i);
    path_ = (dir_ / "train.bin").string();
    data::write_token_shard(path_, tokens);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The windows (first token / 4) of one micro-batch.
  static std::vector<int> windows_of(const model::Batch& batch, int64_t micro) {
    std::vector<int> out;
    for (int64_t b = 0; b < micro; ++b) out.push_back(batch.tokens.data<int32_t>()[b * 4] / 4);
    return out;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(ShardDataDropLast, BatchesNeverSpanEpochsWithDropLast) {
  ShardData keep(std::vector<std::string>{path_}, 64, 4, 0, 1, 7, false);
  ShardData drop(std::vector<std::string>{path_}, 64, 4, 0, 1, 7, true);
  std::set<int> first_epoch_keep, first_epoch_drop;
  for (int i = 0; i < 2; ++i) {
    for (int w : windows_of(keep.next(4, 4), 4)) first_epoch_keep.insert(w);
    for (int w : windows_of(drop.next(4, 4), 4)) first_epoch_drop.insert(w);
  }
  EXPECT_EQ(first_epoch_keep.size(), 8u);
  EXPECT_EQ(first_epoch_drop, first_epoch_keep);  // the same order until the epoch's end
  // The third batch: without drop_last it holds the epoch's last 2 windows and 2 of the next;
  // with it, the 2 leftovers are skipped and the batch comes whole from epoch 1.
  keep.next(4, 4);
  drop.next(4, 4);
  EXPECT_EQ(keep.state()["epoch"], 1);
  EXPECT_EQ(keep.state()["position"], 2);
  EXPECT_EQ(drop.state()["epoch"], 1);
  EXPECT_EQ(drop.state()["position"], 4);
}

TEST_F(ShardDataDropLast, ShareSmallerThanAMicroBatchIsAnErrorNamingTheKey) {
  ShardData drop(std::vector<std::string>{path_}, 64, 4, 0, 1, 7, true);
  try {
    drop.next(16, 4);
    FAIL() << "every batch would be dropped";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dataloader_drop_last"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::engine
