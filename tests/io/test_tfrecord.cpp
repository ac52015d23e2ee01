// TFRecord framing and TensorBoard events, checked with the independent reader of
// support/tfevents_reader.h: the CRC32C test vector, every record's two CRCs, a byte-exact
// Event encoding worked out by hand from the protobuf rules, scalars read back with their tags,
// steps and values, and files that hold only whole records.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/io_scratch.h"
#include "io/tensorboard_events.h"
#include "io/tfrecord_writer.h"
#include "support/tfevents_reader.h"

namespace zero::io {
namespace {

// "events.out.tfevents.<10 digits>.<host>.<pid>.<n>" (no std::regex: GCC 12's sanitizer build
// warns inside <regex>).
bool is_event_file_name(const std::string& name) {
  const std::string prefix = "events.out.tfevents.";
  if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 11) return false;
  for (size_t i = prefix.size(); i < prefix.size() + 10; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  if (name[prefix.size() + 10] != '.') return false;
  // The last two dot-separated fields are numbers; a host name sits between.
  const size_t last = name.rfind('.');
  const size_t before = name.rfind('.', last - 1);
  if (before <= prefix.size() + 10 || last + 1 >= name.size()) return false;
  for (size_t i = before + 1; i < name.size(); ++i) {
    if (i != last && (name[i] < '0' || name[i] > '9')) return false;
  }
  return last > before + 1;
}
namespace fs = std::filesystem;
using testing::IoScratch;
using zero::testing::read_event_file;
using zero::testing::read_scalars;
using zero::testing::read_tfrecords;
using zero::testing::read_whole_file;

using TfRecordTest = IoScratch;

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(zero::testing::reference_crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  const std::string text = "The writer's table and the reader's bit loop agree on any bytes";
  EXPECT_EQ(crc32c(text), zero::testing::reference_crc32c(text));
  EXPECT_EQ(mask_crc32c(0xE3069283u), zero::testing::reference_mask(0xE3069283u));
}

TEST_F(TfRecordTest, RecordsOfEverySizeReadBackWithValidCrcs) {
  std::vector<std::string> records = {"", "x", std::string(127, 'a'), std::string(128, 'b'),
                                      std::string(70000, '\xff')};
  for (int i = 0; i < 256; ++i) records[2][static_cast<size_t>(i) % 127] = static_cast<char>(i);
  const std::string file = path("r.tfrecord");
  {
    auto writer = TfRecordWriter::create_new(file);
    ASSERT_NE(writer, nullptr);
    for (const std::string& r : records) writer->append(r);
    writer->flush();
    EXPECT_EQ(writer->records_written(), static_cast<int64_t>(records.size()));
  }
  EXPECT_EQ(read_tfrecords(read_whole_file(file)), records);
}

TEST_F(TfRecordTest, TheReaderCatchesAFlippedByte) {
  const std::string framed = frame_tfrecord("payload") + frame_tfrecord("second");
  for (size_t at = 0; at < framed.size(); ++at) {
    std::string damaged = framed;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
    EXPECT_THROW(read_tfrecords(damaged), std::runtime_error) << "flipped byte " << at;
  }
}

TEST_F(TfRecordTest, OnlyFlushedRecordsReachTheFileAndTheDestructorFlushes) {
  const std::string file = path("r.tfrecord");
  auto writer = TfRecordWriter::create_new(file);
  ASSERT_NE(writer, nullptr);
  writer->append("one");
  writer->flush();
  writer->append("two");
  EXPECT_EQ(read_tfrecords(read_whole_file(file)), std::vector<std::string>{"one"});
  writer.reset();
  EXPECT_EQ(read_tfrecords(read_whole_file(file)), (std::vector<std::string>{"one", "two"}));
}

TEST_F(TfRecordTest, AnExistingFileIsNeverReopened) {
  const std::string file = write("taken", "earlier run");
  EXPECT_EQ(TfRecordWriter::create_new(file), nullptr);
  EXPECT_EQ(read_whole_file(file), "earlier run");
  try {
    TfRecordWriter::create_new(path("missing_dir/r.tfrecord"));
    FAIL() << "created a file in a missing directory";
  } catch (const FileError& e) {
    EXPECT_TRUE(testing::has(e.what(), path("missing_dir/r.tfrecord"))) << e.what();
  }
}

// Worked out from the protobuf encoding rules, independently of the encoder.
TEST(TensorBoardEvents, ScalarEventBytesMatchAHandEncoding) {
  const std::string expected = std::string("\x09", 1) +                   // wall_time, fixed64
                               std::string("\0\0\0\0\0\0\xf8\x3f", 8) +   // 1.5
                               std::string("\x10\x03", 2) +               // step 3
                               std::string("\x2a\x0a", 2) +               // summary, 10 bytes
                               std::string("\x0a\x08", 2) +               // value, 8 bytes
                               std::string("\x0a\x01", 2) + "a" +         // tag "a"
                               std::string("\x15\0\0\x80\x3f", 5);        // simple_value 1.0f
  EXPECT_EQ(encode_scalar_event(1.5, 3, "a", 1.0f), expected);
  EXPECT_EQ(encode_file_version_event(1.5),
            std::string("\x09\0\0\0\0\0\0\xf8\x3f\x1a\x0d", 11) + "brain.Event:2");
  // A large step is a multi-byte varint: 300 = 0xAC 0x02.
  EXPECT_EQ(encode_scalar_event(1.5, 300, "a", 1.0f).substr(9, 3), std::string("\x10\xac\x02", 3));
}

TEST_F(TfRecordTest, EventFileReadsBackTagsStepsAndValues) {
  const double before = wall_time_now();
  std::string file;
  {
    EventFileWriter events(dir_.string());
    file = events.path();
    events.add_scalar("Train/Samples/train_loss", 2.75f, 0);
    events.add_scalar("Train/Samples/lr", 1e-5f, 16);
    events.add_scalar("Train/Samples/loss_scale", 65536.0f, int64_t{1} << 40);
    events.add_scalar("a tag with spaces/é", -0.125f, 7);
    events.add_scalar("tiny", std::numeric_limits<float>::denorm_min(), 8);
    events.flush();
  }
  EXPECT_TRUE(is_event_file_name(fs::path(file).filename().string())) << file;
  const auto events = read_event_file(file);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  ASSERT_TRUE(events[0].wall_time.has_value());
  EXPECT_GE(*events[0].wall_time, std::floor(before));
  EXPECT_LE(*events[0].wall_time, wall_time_now());
  const auto scalars = read_scalars(file);
  ASSERT_EQ(scalars.size(), 5u);
  EXPECT_EQ(scalars[0].tag, "Train/Samples/train_loss");
  EXPECT_EQ(scalars[0].step, 0);
  EXPECT_EQ(scalars[0].value, 2.75f);
  EXPECT_EQ(scalars[1].tag, "Train/Samples/lr");
  EXPECT_EQ(scalars[1].step, 16);
  EXPECT_EQ(scalars[1].value, 1e-5f);
  EXPECT_EQ(scalars[2].step, int64_t{1} << 40);
  EXPECT_EQ(scalars[2].value, 65536.0f);
  EXPECT_EQ(scalars[3].tag, "a tag with spaces/é");
  EXPECT_EQ(scalars[3].value, -0.125f);
  EXPECT_EQ(std::bit_cast<uint32_t>(scalars[4].value), 1u);
}

TEST_F(TfRecordTest, TwoWritersInOneDirectoryMakeTwoFiles) {
  EventFileWriter first(dir_.string());
  EventFileWriter second(dir_.string());
  EXPECT_NE(first.path(), second.path());
  first.add_scalar("x", 1.0f, 1);
  second.add_scalar("x", 2.0f, 2);
  first.flush();
  second.flush();
  EXPECT_EQ(read_scalars(first.path()).at(0).value, 1.0f);
  EXPECT_EQ(read_scalars(second.path()).at(0).value, 2.0f);
}

TEST_F(TfRecordTest, AnUnwritableDirectoryIsAFileErrorNamingIt) {
  const std::string not_a_dir = write("plain_file", "x");
  try {
    EventFileWriter events(not_a_dir);
    FAIL() << "wrote events inside a regular file";
  } catch (const FileError& e) {
    EXPECT_TRUE(testing::has(e.what(), not_a_dir)) << e.what();
  }
}

}  // namespace
}  // namespace zero::io
