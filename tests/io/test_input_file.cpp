// input_file.h: only regular files are inputs, each refusal a FileError naming the path and what
// it is (a FIFO must fail at once, not block in open()), and text inputs are capped in size
// before they are read.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "io/fifo_watchdog.h"
#include "io/input_file.h"
#include "io/io_scratch.h"

namespace zero::io {
namespace {

using testing::has;

class InputFileTest : public testing::IoScratch {
 protected:
  // The FileError message `call` throws, checked to name `p`.
  template <typename Call>
  std::string error_of(const std::string& p, Call call) {
    try {
      call();
    } catch (const FileError& e) {
      const std::string message = e.what();
      EXPECT_TRUE(has(message, p)) << message;
      EXPECT_FALSE(has(message, "internal error")) << message;
      return message;
    }
    ADD_FAILURE() << "expected a FileError for " << p;
    return "";
  }
};

TEST_F(InputFileTest, ReadsARegularFile) {
  const std::string p = write("config.json", "{\"a\": 1}");
  require_regular_file(p, "the config");
  EXPECT_EQ(regular_file_size(p, "the config"), 8u);
  EXPECT_EQ(read_text_file(p, "the config", kMaxConfigBytes), "{\"a\": 1}");
  EXPECT_EQ(read_text_file(write("empty", ""), "the config", kMaxConfigBytes), "");
  const InputFile file = open_regular_file(p, "the config");
  EXPECT_GE(file.fd(), 0);
  EXPECT_EQ(file.size(), 8u);
}

TEST_F(InputFileTest, FifoIsRefusedAtOnceNotBlockedOn) {
  const std::string p = fifo("pipe");
  zero::testing::FifoWatchdog watchdog(p, 5.0);
  const auto start = std::chrono::steady_clock::now();
  const std::string message =
      error_of(p, [&] { read_text_file(p, "the DeepSpeed config", kMaxConfigBytes); });
  EXPECT_TRUE(has(message, "FIFO")) << message;
  EXPECT_TRUE(has(message, "the DeepSpeed config")) << message;
  EXPECT_TRUE(has(error_of(p, [&] { open_regular_file(p, "the token shard"); }), "FIFO"));
  EXPECT_TRUE(has(error_of(p, [&] { require_regular_file(p, "the token shard"); }), "FIFO"));
  EXPECT_FALSE(watchdog.fired()) << "a reader blocked on the FIFO";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST_F(InputFileTest, DirectoryIsRefused) {
  const std::string message =
      error_of(dir_.string(), [&] { read_text_file(dir_.string(), "the config", 100); });
  EXPECT_TRUE(has(message, "is a directory")) << message;
  EXPECT_TRUE(has(error_of(dir_.string(), [&] { open_regular_file(dir_.string(), "x"); }),
                  "directory"));
}

TEST_F(InputFileTest, CharacterDeviceIsRefusedNotReadForever) {
  // /dev/zero would be read until memory runs out.
  const std::string message =
      error_of("/dev/zero", [&] { read_text_file("/dev/zero", "the config", kMaxConfigBytes); });
  EXPECT_TRUE(has(message, "character device")) << message;
  EXPECT_TRUE(has(error_of("/dev/zero", [&] { open_regular_file("/dev/zero", "the shard"); }),
                  "character device"));
}

TEST_F(InputFileTest, OversizeFileIsRefusedBeforeReading) {
  const std::string p = path("big.json");
  {
    std::ofstream(p) << "{}";
  }
  std::filesystem::resize_file(p, kMaxConfigBytes + 1);  // sparse: nothing is written
  const std::string message =
      error_of(p, [&] { read_text_file(p, "the model's config.json", kMaxConfigBytes); });
  EXPECT_TRUE(has(message, "4 MiB")) << message;
  EXPECT_TRUE(has(message, "the model's config.json")) << message;
  // At the cap exactly it is read.
  std::filesystem::resize_file(p, 64);
  EXPECT_EQ(read_text_file(p, "x", 64).size(), 64u);
  EXPECT_TRUE(has(error_of(p, [&] { read_text_file(p, "x", 63); }), "63 bytes"));
}

TEST_F(InputFileTest, MissingFileNamesThePathAndTheReason) {
  const std::string p = path("nope.json");
  const std::string message = error_of(p, [&] { read_text_file(p, "the config", 100); });
  EXPECT_TRUE(has(message, "No such file")) << message;
  EXPECT_TRUE(has(message, "the config")) << message;
  error_of(p, [&] { open_regular_file(p, "the config"); });
  error_of(p, [&] { regular_file_size(p, "the config"); });
}

TEST_F(InputFileTest, SymlinkToARegularFileIsFollowed) {
  const std::string target = write("target.json", "{}");
  const std::string link = path("link.json");
  std::filesystem::create_symlink(target, link);
  EXPECT_EQ(read_text_file(link, "the config", 100), "{}");
}

}  // namespace
}  // namespace zero::io
