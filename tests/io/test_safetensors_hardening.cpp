// Regressions for the safetensors reader's "Hardening" issue: a deeply nested __metadata__ value
// overflowed the stack; a FIFO or directory given as the file blocked in open() or failed
// obscurely; shapes whose element count fits uint64 but not int64 (or that hide an overflow
// behind a zero dimension) passed the checks.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "core/error.h"
#include "io/fifo_watchdog.h"
#include "io/io_scratch.h"
#include "io/safetensors_reader.h"

namespace zero::io {
namespace {

using testing::has;

class SafetensorsHardening : public testing::IoScratch {
 protected:
  // A file with `header` (its true length) followed by `data_bytes` zero bytes.
  std::string craft(const std::string& name, const std::string& header, size_t data_bytes) {
    std::string bytes;
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((n >> (8 * i)) & 0xff);
    return write(name, bytes + header + std::string(data_bytes, '\0'));
  }

  static std::string open_error(const std::string& p) {
    try {
      SafetensorsFile::open(p);
    } catch (const FileError& e) {
      const std::string message = e.what();
      EXPECT_TRUE(has(message, p)) << message;
      EXPECT_FALSE(has(message, "internal error")) << message;
      return message;
    }
    ADD_FAILURE() << "expected FileError for " << p;
    return "";
  }
};

TEST_F(SafetensorsHardening, DeeplyNestedMetadataValueIsAnErrorNamingTheFile) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string p = craft("deep.safetensors", "{\"__metadata__\": {\"k\": " + deep + "}}", 0);
  EXPECT_TRUE(has(open_error(p), "deeper than")) << open_error(p);
}

TEST_F(SafetensorsHardening, FifoIsRefusedAtOnce) {
  const std::string p = fifo("weights.safetensors");
  zero::testing::FifoWatchdog watchdog(p, 5.0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(has(open_error(p), "FIFO"));
  EXPECT_FALSE(watchdog.fired()) << "open() blocked on the FIFO";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
}

TEST_F(SafetensorsHardening, DirectoryAndDeviceAreRefused) {
  EXPECT_TRUE(has(open_error(dir_.string()), "directory"));
  EXPECT_TRUE(has(open_error("/dev/null"), "character device"));
}

TEST_F(SafetensorsHardening, ElementCountBeyondInt64IsRejected) {
  // 2^62 * 3 fits uint64 but not int64: shape_numel would overflow on it later.
  const std::string p = craft(
      "big.safetensors",
      R"({"w":{"dtype":"U8","shape":[4611686018427387904,3],"data_offsets":[0,0]}})", 0);
  const std::string message = open_error(p);
  EXPECT_TRUE(has(message, "'w'")) << message;
  EXPECT_TRUE(has(message, "2^63 elements")) << message;
}

TEST_F(SafetensorsHardening, ZeroDimensionDoesNotHideAnOverflowingShape) {
  const std::string p = craft(
      "zero.safetensors",
      R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", 0);
  EXPECT_TRUE(has(open_error(p), "'w'"));
  // An honest empty tensor still loads.
  const std::string ok = craft(
      "empty.safetensors", R"({"w":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})", 0);
  EXPECT_EQ(SafetensorsFile::open(ok).tensor("w").numel(), 0);
}

TEST_F(SafetensorsHardening, ShapeWithAbsurdRankIsRejected) {
  std::string shape = "[";
  for (int i = 0; i < 100; ++i) shape += (i ? ",1" : "1");
  shape += "]";
  const std::string p =
      craft("rank.safetensors", R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", 4);
  EXPECT_TRUE(has(open_error(p), "dimensions"));
}

TEST_F(SafetensorsHardening, HugeOffsetsAreRejectedWithoutWrapping) {
  const std::string p = craft(
      "off.safetensors",
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})",
      4);
  EXPECT_TRUE(has(open_error(p), "past the data buffer"));
}

TEST_F(SafetensorsHardening, LongBadValuesAreQuotedShortly) {
  const std::string p = craft("long.safetensors",
                              R"({"__metadata__":{"k":[")" + std::string(5000, 'x') + R"("]}})", 0);
  const std::string message = open_error(p);
  EXPECT_LT(message.size(), 400u) << message;
}

}  // namespace
}  // namespace zero::io
