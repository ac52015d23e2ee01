// Safetensors edge cases beyond test_safetensors_files.cpp: duplicate header keys, shapes whose
// element count overflows, overlaps hidden behind empty tensors, the missing-tensor message,
// zero-copy views outliving the file object, writer misuse, and atomic-write failures.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/io_scratch.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace zero::io {
namespace {
namespace fs = std::filesystem;

class SafetensorsEdges : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zero_st_edges_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A file whose header is `header` (its true length) followed by `data_bytes` zero bytes.
  std::string craft(const std::string& name, const std::string& header, size_t data_bytes) {
    return craft_raw(name, header.size(), header + std::string(data_bytes, '\0'));
  }
  std::string craft_raw(const std::string& name, uint64_t declared, const std::string& rest) {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((declared >> (8 * i)) & 0xff));
    out << rest;
    return p;
  }

  // The FileError message open() throws for `p`, checked to name the file.
  static std::string open_error(const std::string& p) {
    try {
      SafetensorsFile::open(p);
    } catch (const FileError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(p), std::string::npos) << message;
      return message;
    }
    ADD_FAILURE() << "expected FileError for " << p;
    return "";
  }

  fs::path dir_;
};

using testing::has;

std::string entry_json(const std::string& name, const std::string& shape, int begin, int end) {
  return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST_F(SafetensorsEdges, DuplicateTensorKeyIsRejected) {
  const std::string p = craft("dup.safetensors",
                              "{" + entry_json("w", "[1]", 0, 4) + "," +
                                  entry_json("w", "[1]", 4, 8) + "}",
                              8);
  const std::string message = open_error(p);
  EXPECT_TRUE(has(message, "\"w\" twice")) << message;
}

TEST_F(SafetensorsEdges, DuplicateKeyInsideAnEntryIsRejected) {
  const std::string p = craft(
      "dup2.safetensors",
      R"({"w":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", 4);
  EXPECT_TRUE(has(open_error(p), "\"dtype\" twice"));
}

TEST_F(SafetensorsEdges, ShapeWhoseElementCountOverflowsIsRejected) {
  // 2^33 * 2^31 wraps to 0 in 64 bits; an unchecked product would accept 0 bytes and hand out
  // a view of 2^64 elements.
  const std::string p = craft(
      "big.safetensors",
      R"({"w":{"dtype":"F32","shape":[8589934592,2147483648],"data_offsets":[0,0]}})", 0);
  const std::string message = open_error(p);
  EXPECT_TRUE(has(message, "'w'")) << message;
  EXPECT_TRUE(has(message, "2^64")) << message;
}

TEST_F(SafetensorsEdges, FractionalShapeAndOffsetsAreRejected) {
  EXPECT_TRUE(has(open_error(craft("fs.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
                                   4)),
                  "shape"));
  EXPECT_TRUE(has(open_error(craft("fo.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})",
                                   4)),
                  "data_offsets"));
  EXPECT_TRUE(has(open_error(craft("f3.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
                                   8)),
                  "[begin, end]"));
}

TEST_F(SafetensorsEdges, EntryThatIsNotAnObjectNamesTheTensor) {
  const std::string message = open_error(craft("e.safetensors", R"({"w":[1,2,3]})", 0));
  EXPECT_TRUE(has(message, "'w'")) << message;
  EXPECT_TRUE(has(message, "object")) << message;
}

TEST_F(SafetensorsEdges, AbsurdHeaderLengthInsideTheFileIsRejected) {
  // The declared length fits the (sparse, 200 MiB) file but is far beyond any real header.
  const std::string p = path("huge.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = 150ull << 20;
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  fs::resize_file(p, 200ull << 20);
  EXPECT_TRUE(has(open_error(p), "absurdly large"));
}

TEST_F(SafetensorsEdges, OverlapBehindAnEmptyTensorIsCaught) {
  // Sorted by offset: a [0,16), e [4,4) (empty, harmless), b [8,12) inside a. Comparing only
  // neighbours would check b against e and miss the overlap with a.
  const std::string p = craft("ov.safetensors",
                              "{" + entry_json("a", "[4]", 0, 16) + "," +
                                  entry_json("e", "[0]", 4, 4) + "," +
                                  entry_json("b", "[1]", 8, 12) + "}",
                              16);
  const std::string message = open_error(p);
  EXPECT_TRUE(has(message, "'a'") && has(message, "'b'") && has(message, "overlap")) << message;
}

TEST_F(SafetensorsEdges, EmptyTensorsMaySitAnywhere) {
  const std::string p = craft("ok.safetensors",
                              "{" + entry_json("a", "[2]", 0, 8) + "," +
                                  entry_json("e", "[0,3]", 4, 4) + "," +
                                  entry_json("f", "[0]", 8, 8) + "}",
                              8);
  auto file = SafetensorsFile::open(p);
  ASSERT_EQ(file.entries().size(), 3u);
  EXPECT_EQ(file.entries()[0].name, "a");  // sorted by data offset
  EXPECT_EQ(file.tensor("e").shape(), (Shape{0, 3}));
}

TEST_F(SafetensorsEdges, TrailingSpacesAfterTheHeaderAreAccepted) {
  const std::string header = "{" + entry_json("w", "[1]", 0, 4) + "}     ";
  auto file = SafetensorsFile::open(craft("pad.safetensors", header, 4));
  EXPECT_EQ(file.entry("w").data_end, 4u);
}

TEST_F(SafetensorsEdges, MissingTensorMessageNamesTensorFileAndCloseNames) {
  Tensor t = Tensor::zeros_host({2}, DType::kF32);
  const std::string p = path("names.safetensors");
  write_safetensors(p, {{"model.layers.0.mlp.up_proj.weight", t},
                        {"model.layers.1.mlp.up_proj.weight", t},
                        {"lm_head.weight", t}});
  auto file = SafetensorsFile::open(p);
  EXPECT_FALSE(file.contains("model.layers.2.mlp.up_proj.weight"));
  try {
    file.entry("model.layers.2.mlp.up_proj.weight");
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(has(message, "tensor 'model.layers.2.mlp.up_proj.weight' not found in " + p))
        << message;
    EXPECT_TRUE(has(message, "model.layers.0.mlp.up_proj.weight")) << message;
    EXPECT_FALSE(has(message, "lm_head.weight")) << message;
  }
}

TEST_F(SafetensorsEdges, ViewsAreZeroCopyAndOutliveTheFileObject) {
  Tensor t = Tensor::zeros_host({4}, DType::kF32);
  for (int i = 0; i < 4; ++i) t.data<float>()[i] = 1.5f * static_cast<float>(i);
  const std::string p = path("v.safetensors");
  write_safetensors(p, {{"w", t}});
  Tensor view;
  {
    auto file = SafetensorsFile::open(p);
    view = file.tensor("w");
    // The writer aligns the data buffer to 8 bytes, so this f32 tensor is a borrowed view.
    EXPECT_EQ(view.raw_data(), file.tensor("w").raw_data());
  }
  fs::remove(p);  // the mapping, not the directory entry, keeps the bytes readable
  EXPECT_EQ(view.data<float>()[3], 4.5f);
}

TEST_F(SafetensorsEdges, WriterRejectsReservedNameAndUndefinedTensor) {
  Tensor t = Tensor::zeros_host({1}, DType::kF32);
  EXPECT_THROW(write_safetensors(path("r.safetensors"), {{"__metadata__", t}}), Error);
  EXPECT_THROW(write_safetensors(path("u.safetensors"), {{"w", Tensor()}}), ShapeError);
  EXPECT_FALSE(fs::exists(path("r.safetensors")));
  EXPECT_FALSE(fs::exists(path("u.safetensors")));
}

TEST_F(SafetensorsEdges, EmptyListWritesAValidFile) {
  write_safetensors(path("none.safetensors"), {});
  auto file = SafetensorsFile::open(path("none.safetensors"));
  EXPECT_TRUE(file.entries().empty());
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(fs::file_size(path("none.safetensors")) % 8, 0u);
}

TEST_F(SafetensorsEdges, AtomicWriteIntoAMissingDirectoryNamesThePath) {
  const std::string p = path("no/such/dir/x.bin");
  try {
    write_file_atomically(p, [](std::FILE*) {});
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_TRUE(has(e.what(), p)) << e.what();
  }
  EXPECT_THROW(fsync_directory(path("missing")), FileError);
}

TEST_F(SafetensorsEdges, AtomicWriteReplacesTheContentAndLeavesNoTempFile) {
  const std::string p = path("f.txt");
  write_file_atomically(p, [](std::FILE* f) { std::fputs("first", f); });
  write_file_atomically(p, [](std::FILE* f) { std::fputs("second", f); });
  std::ifstream in(p);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace zero::io
