// Hostile DeepSpeed configs: each is an error (or a warning) within moments, never a crash, a
// hang or a library exception — megabyte keys and values (the key suggester compares a bounded
// prefix), deep nesting (bounded recursion), devices and FIFOs instead of files, huge files.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/deepspeed_config.h"
#include "config/key_suggestion.h"
#include "core/error.h"

namespace zero::config {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(ConfigHardening, MegabyteKeyIsAQuickWarningNotMinutesOfEditDistance) {
  const std::string key(1 << 20, 'k');
  const auto start = Clock::now();
  const DeepSpeedConfig c =
      DeepSpeedConfig::from_text("{\"train_batch_size\": 1, \"" + key + "\": 1}", "big.json");
  EXPECT_LT(seconds_since(start), 2.0);
  const auto warnings = c.notes.of_kind(ConfigNote::Kind::kWarning);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_LT(warnings[0].text.size(), 400u) << "the message shortens the key";
}

TEST(ConfigHardening, MegabyteChoiceValueIsAQuickError) {
  const std::string value(1 << 20, 'v');
  const auto start = Clock::now();
  try {
    DeepSpeedConfig::from_text(
        R"({"train_batch_size": 1, "communication_data_type": ")" + value + "\"}", "big.json");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_LT(std::string(e.what()).size(), 600u);
  }
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(ConfigHardening, EditDistanceComparesABoundedPrefix) {
  const std::string a(100000, 'a');
  const auto start = Clock::now();
  EXPECT_EQ(edit_distance(a, a + "b"), 0u);  // both cut to kMaxComparedChars
  EXPECT_LT(seconds_since(start), 0.5);
}

TEST(ConfigHardening, DeepNestingIsAnErrorNamingTheFile) {
  const std::string text = "{\"a\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  try {
    DeepSpeedConfig::from_text(text, "deep.json");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.json:1:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nesting deeper"), std::string::npos) << e.what();
  }
}

TEST(ConfigHardening, OnlyRegularFilesOfSaneSizeAreRead) {
  EXPECT_THROW(DeepSpeedConfig::from_file("/dev/zero"), FileError);
  const fs::path dir = fs::temp_directory_path() / ("zero_cfg_hard_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_THROW(DeepSpeedConfig::from_file(dir.string()), FileError);
  const fs::path fifo = dir / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = Clock::now();
  try {
    DeepSpeedConfig::from_file(fifo.string());
    ADD_FAILURE() << "a FIFO was read";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(fifo.string()), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(start), 2.0);
  const fs::path huge = dir / "huge.json";
  {
    std::ofstream out(huge);
    out << "{\"x\": \"" << std::string(5 << 20, 'x') << "\"}";
  }
  try {
    DeepSpeedConfig::from_file(huge.string());
    ADD_FAILURE() << "a 5 MiB config was read";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ConfigHardening, AbsurdBatchSizesAreRangeErrorsNotOverflow) {
  AutoValues autos;
  autos.world_size = 4;
  EXPECT_THROW(DeepSpeedConfig::from_text(
                   R"({"train_micro_batch_size_per_gpu": 9223372036854775807,
                       "gradient_accumulation_steps": 2})",
                   "c.json", autos),
               ConfigError);
  EXPECT_THROW(DeepSpeedConfig::from_text(
                   R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4611686018427387904})",
                   "c.json", autos),
               ConfigError);
  EXPECT_THROW(DeepSpeedConfig::from_text(R"({"train_batch_size": 18446744073709551615})",
                                          "c.json", autos),
               ConfigError);
}

}  // namespace
}  // namespace zero::config
