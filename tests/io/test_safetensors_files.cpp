// Safetensors reader and writer: round trips of every dtype, the real Hugging Face file, and a
// clear FileError (naming the file and tensor) for every kind of damaged file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/half.h"
#include "io/atomic_file.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace zero::io {
namespace {
namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zero_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a file from a JSON header text and `data_bytes` bytes of payload.
  std::string craft(const std::string& name, const std::string& header, size_t data_bytes,
                    uint64_t declared_size = UINT64_MAX) {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    const uint64_t n = declared_size == UINT64_MAX ? header.size() : declared_size;
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << std::string(data_bytes, '\0');
    return p;
  }

  // Expects open() to throw FileError mentioning the file and each of `parts`.
  static void expect_file_error(const std::string& p, std::initializer_list<const char*> parts) {
    try {
      SafetensorsFile::open(p);
      FAIL() << "expected FileError for " << p;
    } catch (const FileError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(p), std::string::npos) << message;
      for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }

  fs::path dir_;
};

Tensor filled(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t = Tensor::zeros_host(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return t;
}

TEST_F(Safetensors, RoundTripEveryDtypeBitExact) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", filled({3, 5}, DType::kF32, 1)},  {"f64", filled({2, 2}, DType::kF64, 2)},
      {"bf16", filled({7}, DType::kBF16, 3)},   {"f16", filled({1, 3}, DType::kF16, 4)},
      {"i64", filled({2}, DType::kI64, 5)},     {"i32", filled({4}, DType::kI32, 6)},
      {"u8", filled({5}, DType::kU8, 7)},       {"scalar", filled({}, DType::kF32, 8)},
      {"empty", filled({0, 4}, DType::kF32, 9)}};
  write_safetensors(path("a.safetensors"), tensors, {{"format", "pt"}, {"note", "x"}});
  auto file = SafetensorsFile::open(path("a.safetensors"));
  EXPECT_EQ(file.entries().size(), tensors.size());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  for (const auto& [name, t] : tensors) {
    Tensor back = file.tensor(name);
    EXPECT_EQ(back.dtype(), t.dtype()) << name;
    EXPECT_EQ(back.shape(), t.shape()) << name;
    EXPECT_EQ(0, std::memcmp(back.raw_data(), t.raw_data(), t.nbytes())) << name;
  }
  // The data buffer starts 8-byte aligned, as the reference implementation pads it.
  std::ifstream in(path("a.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST_F(Safetensors, ReadsAndRewritesTheHuggingFaceFile) {
  const std::string hf = std::string(ZERO_TEST_FIXTURES) + "/hf/tiny-gpt2/model.safetensors";
  auto file = SafetensorsFile::open(hf);
  EXPECT_EQ(file.entries().size(), 28u);
  EXPECT_EQ(file.entry("transformer.wte.weight").shape, (Shape{256, 64}));
  EXPECT_EQ(file.entry("transformer.h.0.attn.c_attn.weight").shape, (Shape{64, 192}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  Tensor wte = file.tensor("transformer.wte.weight");
  for (int64_t i = 0; i < wte.numel(); ++i) ASSERT_TRUE(std::isfinite(wte.data<float>()[i]));
  std::vector<std::pair<std::string, Tensor>> all;
  for (const auto& e : file.entries()) all.emplace_back(e.name, file.tensor(e.name));
  write_safetensors(path("copy.safetensors"), all, file.metadata());
  auto copy = SafetensorsFile::open(path("copy.safetensors"));
  for (const auto& e : file.entries()) {
    Tensor a = file.tensor(e.name), b = copy.tensor(e.name);
    EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes())) << e.name;
  }
  EXPECT_THROW(file.entry("transformer.h.9.ln_1.weight"), FileError);
}

TEST_F(Safetensors, TruncatedFile) {
  const std::string hf = std::string(ZERO_TEST_FIXTURES) + "/hf/tiny-gpt2/model.safetensors";
  std::ifstream in(hf, std::ios::binary | std::ios::ate);
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string p = path("half.safetensors");
  std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_file_error(p, {"past the data buffer"});
  const std::string tiny = path("tiny.safetensors");
  std::ofstream(tiny, std::ios::binary) << "abc";
  expect_file_error(tiny, {"too short"});
}

TEST_F(Safetensors, HeaderLengthPastEndOfFile) {
  expect_file_error(craft("h.safetensors", "{}", 0, 1u << 20), {"header length", "past the end"});
}

TEST_F(Safetensors, OverlappingOffsets) {
  const std::string p = craft("o.safetensors",
                              R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12);
  expect_file_error(p, {"'a'", "'b'", "overlap"});
}

TEST_F(Safetensors, OutOfRangeAndInconsistentOffsets) {
  expect_file_error(craft("r.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                    {"'w'", "past the data buffer"});
  expect_file_error(craft("s.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
                    {"'w'", "needs 12"});
  expect_file_error(craft("b.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 16),
                    {"'w'", "after end"});
  expect_file_error(craft("n.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 16),
                    {"'w'", "non-negative"});
}

TEST_F(Safetensors, UnknownDtypeAndBadShapes) {
  expect_file_error(craft("d.safetensors", R"({"w":{"dtype":"F8_E4M3X","shape":[1],"data_offsets":[0,1]}})", 1),
                    {"'w'", "unknown dtype", "F8_E4M3X", "BF16"});
  expect_file_error(craft("sh.safetensors", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                    {"'w'", "shape"});
  expect_file_error(craft("m.safetensors", R"({"w":{"dtype":"F32","shape":[1]}})", 4), {"'w'", "data_offsets"});
}

TEST_F(Safetensors, BadJsonAndMetadata) {
  expect_file_error(craft("j.safetensors", "{not json", 0), {"not valid JSON"});
  expect_file_error(craft("a.safetensors", "[1,2]", 0), {"JSON object"});
  expect_file_error(craft("md.safetensors", R"({"__metadata__":{"k":3}})", 0), {"__metadata__", "string"});
}

TEST_F(Safetensors, MissingTensorNamesTheFileAndSimilarNames) {
  write_safetensors(path("x.safetensors"), {{"model.norm.weight", filled({2}, DType::kF32, 1)}});
  auto file = SafetensorsFile::open(path("x.safetensors"));
  try {
    file.tensor("norm.weight");
    FAIL();
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'norm.weight' not found"), std::string::npos) << message;
    EXPECT_NE(message.find("model.norm.weight"), std::string::npos) << message;
  }
}

TEST_F(Safetensors, WriterRejectsDuplicatesAndNonContiguous) {
  Tensor t = filled({2, 2}, DType::kF32, 1);
  EXPECT_THROW(write_safetensors(path("d.safetensors"), {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(write_safetensors(path("n.safetensors"), {{"a", t.narrow(1, 0, 1)}}), ShapeError);
}

TEST_F(Safetensors, MisalignedDataIsCopiedAligned) {
  // One byte of u8 first puts the f32 tensor at an odd address inside the mapping.
  write_safetensors(path("m.safetensors"), {{"pad", filled({1}, DType::kU8, 1)}, {"w", filled({3}, DType::kF32, 2)}});
  auto file = SafetensorsFile::open(path("m.safetensors"));
  Tensor w = file.tensor("w");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.raw_data()) % 4, 0u);
  EXPECT_EQ(0, std::memcmp(w.raw_data(), filled({3}, DType::kF32, 2).raw_data(), 12));
}

TEST_F(Safetensors, AtomicWriteKeepsTheOldFileWhenTheWriterFails) {
  const std::string p = path("keep.txt");
  write_file_atomically(p, [](std::FILE* f) { std::fputs("old", f); });
  EXPECT_THROW(write_file_atomically(p, [](std::FILE* f) {
                 std::fputs("partial", f);
                 throw Error("simulated crash");
               }),
               Error);
  std::ifstream in(p);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "old");
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace zero::io
