// Regressions for token shard and text inputs ("Hardening" issue): `--data` naming a FIFO blocked
// forever in open(); a directory or device gave an obscure error or was read without end. Each
// is now a FileError naming the path, at once; header counts are checked against the file size.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/error_text.h"
#include "data/prepare_text.h"
#include "data/raw_shard.h"
#include "data/scratch_dir.h"
#include "data/token_dataset.h"
#include "data/token_shard.h"
#include "io/fifo_watchdog.h"

namespace zero::data {
namespace {

using testing::error_of;
using testing::has;
using testing::write_raw;

TEST(TokenShardHardening, FifoAsDataErrorsAtOnceInsteadOfBlocking) {
  testing::ScratchDir dir;
  const std::string pipe = dir.path("train.bin");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(pipe, 5.0);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of<FileError>([&] { TokenShard::open(pipe, 256); });
  EXPECT_TRUE(has(message, pipe) && has(message, "FIFO")) << message;
  EXPECT_TRUE(has(message, "token shard")) << message;
  const std::string via_dataset =
      error_of<FileError>([&] { TokenDataset::open({pipe}, 256, 4); });
  EXPECT_TRUE(has(via_dataset, "FIFO")) << via_dataset;
  EXPECT_FALSE(watchdog.fired()) << "open() blocked on the FIFO";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST(TokenShardHardening, DirectoryAndDevicesAreRefused) {
  testing::ScratchDir dir;
  EXPECT_TRUE(has(error_of<FileError>([&] { TokenShard::open(dir.dir().string(), 256); }),
                  "directory"));
  EXPECT_TRUE(has(error_of<FileError>([&] { TokenShard::open("/dev/zero", 256); }),
                  "character device"));
}

TEST(TokenShardHardening, HeaderCountIsCheckedAgainstTheFileSize) {
  testing::ScratchDir dir;
  const std::string p = dir.path("s.bin");
  // The largest count an int32 header holds, with 10 tokens of payload: no overflow, an error.
  write_raw(p, {kShardMagicU32, kShardVersionU32, INT32_MAX}, 40);
  const std::string message = error_of<FileError>([&] { TokenShard::open(p, 256); });
  EXPECT_TRUE(has(message, "2,147,483,647 tokens")) << message;
  EXPECT_TRUE(has(message, "truncated")) << message;
  write_raw(p, {kShardMagicU16, kShardVersionU16, INT32_MIN}, 0);
  EXPECT_TRUE(has(error_of<FileError>([&] { TokenShard::open(p, 256); }), "negative"));
}

TEST(TokenShardHardening, PrepareRefusesFifoAndDeviceInputs) {
  testing::ScratchDir dir;
  const std::string pipe = dir.path("input.txt");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(pipe, 5.0);
  const std::string out = dir.path("out.bin");
  const std::string message =
      error_of<FileError>([&] { prepare_text_files({pipe}, out, "", 0.0); });
  EXPECT_TRUE(has(message, pipe) && has(message, "FIFO")) << message;
  EXPECT_FALSE(watchdog.fired());
  EXPECT_TRUE(has(error_of<FileError>([&] { prepare_text_files({"/dev/zero"}, out, "", 0.0); }),
                  "character device"));
}

TEST(TokenShardHardening, PrepareRefusesInputsTooLargeForOneShardBeforeReadingThem) {
  testing::ScratchDir dir;
  const std::string text = dir.path("huge.txt");
  { std::ofstream(text) << "x"; }
  std::filesystem::resize_file(text, uint64_t{3} << 30);  // sparse: 3 GiB of zero bytes
  const auto start = std::chrono::steady_clock::now();
  const std::string message =
      error_of<ConfigError>([&] { prepare_text_files({text}, dir.path("out.bin"), "", 0.0); });
  EXPECT_TRUE(has(message, "3221225472 bytes") && has(message, "several groups")) << message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

}  // namespace
}  // namespace zero::data
