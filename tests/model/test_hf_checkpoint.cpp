// Loading and saving Hugging Face model folders: bit-identical round trips, sharded checkpoints,
// prefix-less GPT-2 names, and a clear error for every kind of bad folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_fixture_copy.h"

namespace zero::model {
namespace {
namespace fs = std::filesystem;

using testing::hf_fixture;

class HfCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zero_hf_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A copy of a fixture folder whose weights are rewritten by `edit`.
  std::string edited_copy(const std::string& folder, const std::function<void(testing::TensorList&)>& edit) {
    return testing::edited_fixture_copy(dir_, folder, edit);
  }

  template <typename E>
  void expect_error(const std::string& dir, std::initializer_list<const char*> parts) {
    try {
      load_hf_model(dir, cpu_, DType::kF32);
      FAIL() << "expected an error";
    } catch (const E& e) {
      for (const char* part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
  backend::CpuBackend cpu_;
};

TEST_F(HfCheckpoint, SaveThenReloadIsBitIdentical) {
  for (const char* folder : {"tiny-gpt2", "tiny-llama"}) {
    auto model = load_hf_model(hf_fixture(folder), cpu_, DType::kF32);
    const std::string out = (dir_ / folder).string();
    save_hf_model(*model, out, DType::kF32);
    // The saved file holds exactly the original tensors, byte for byte, under the same names.
    auto original = io::SafetensorsFile::open(hf_fixture(folder) + "/model.safetensors");
    auto saved = io::SafetensorsFile::open(out + "/model.safetensors");
    EXPECT_EQ(original.entries().size(), saved.entries().size());
    for (const auto& e : original.entries()) {
      ASSERT_TRUE(saved.contains(e.name)) << e.name;
      Tensor a = original.tensor(e.name);
      Tensor b = saved.tensor(e.name);
      ASSERT_EQ(a.shape(), b.shape()) << e.name;
      EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes())) << e.name;
    }
    auto reloaded = load_hf_model(out, cpu_, DType::kF32);
    ASSERT_EQ(reloaded->num_parameters(), model->num_parameters());
    EXPECT_EQ(0, std::memcmp(reloaded->flat_params().raw_data(), model->flat_params().raw_data(),
                             model->flat_params().nbytes()));
    nlohmann::json config = nlohmann::json::parse(std::ifstream(out + "/config.json"));
    EXPECT_EQ(config["dtype"], "float32");
    EXPECT_EQ(config["architectures"][0], folder == std::string("tiny-gpt2") ? "GPT2LMHeadModel"
                                                                             : "LlamaForCausalLM");
  }
}

TEST_F(HfCheckpoint, ShardedIndexLoadsTheSameWeights) {
  auto file = io::SafetensorsFile::open(hf_fixture("tiny-llama") + "/model.safetensors");
  const std::string out = (dir_ / "sharded").string();
  fs::create_directories(out);
  fs::copy_file(hf_fixture("tiny-llama") + "/config.json", out + "/config.json");
  std::vector<std::pair<std::string, Tensor>> first, second;
  nlohmann::json index;
  for (size_t i = 0; i < file.entries().size(); ++i) {
    const auto& name = file.entries()[i].name;
    const bool a = i % 2 == 0;
    (a ? first : second).emplace_back(name, file.tensor(name));
    index["weight_map"][name] = a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  io::write_safetensors(out + "/model-00001-of-00002.safetensors", first);
  io::write_safetensors(out + "/model-00002-of-00002.safetensors", second);
  std::ofstream(out + "/model.safetensors.index.json") << index.dump();
  auto sharded = load_hf_model(out, cpu_, DType::kF32);
  auto single = load_hf_model(hf_fixture("tiny-llama"), cpu_, DType::kF32);
  EXPECT_EQ(0, std::memcmp(sharded->flat_params().raw_data(), single->flat_params().raw_data(),
                           single->flat_params().nbytes()));

  fs::remove(out + "/model-00002-of-00002.safetensors");
  expect_error<FileError>(out, {"model-00002-of-00002.safetensors", "does not exist"});
}

TEST_F(HfCheckpoint, Gpt2NamesWithoutTransformerPrefixLoad) {
  const std::string dir = edited_copy("tiny-gpt2", [](auto& tensors) {
    for (auto& [name, t] : tensors) name = name.substr(std::string("transformer.").size());
  });
  auto bare = load_hf_model(dir, cpu_, DType::kF32);
  auto full = load_hf_model(hf_fixture("tiny-gpt2"), cpu_, DType::kF32);
  EXPECT_EQ(0, std::memcmp(bare->flat_params().raw_data(), full->flat_params().raw_data(),
                           full->flat_params().nbytes()));
}

TEST_F(HfCheckpoint, MissingTensorIsNamed) {
  const std::string dir = edited_copy("tiny-llama", [](auto& tensors) {
    std::erase_if(tensors, [](const auto& t) { return t.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  expect_error<FileError>(dir, {"model.layers.1.mlp.up_proj.weight", "missing"});
}

TEST_F(HfCheckpoint, UnexpectedTensorIsNamed) {
  const std::string dir = edited_copy("tiny-gpt2", [](auto& tensors) {
    tensors.emplace_back("transformer.h.7.mlp.c_fc.weight", tensors.front().second);
  });
  expect_error<FileError>(dir, {"transformer.h.7.mlp.c_fc.weight", "config.json"});
}

TEST_F(HfCheckpoint, ShapeMismatchAgainstConfigIsNamed) {
  const std::string dir = edited_copy("tiny-gpt2", [](auto&) {});
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  config["n_inner"] = 128;
  std::ofstream(dir + "/config.json") << config.dump();
  expect_error<ShapeError>(dir, {"transformer.h.0.mlp.c_fc.weight", "[64, 256]", "[64, 128]"});
}

TEST_F(HfCheckpoint, MissingFilesAreNamed) {
  expect_error<FileError>((dir_ / "nope").string(), {"not a directory"});
  const std::string empty = (dir_ / "empty").string();
  fs::create_directories(empty);
  expect_error<FileError>(empty, {"config.json"});
  fs::copy_file(hf_fixture("tiny-gpt2") + "/config.json", empty + "/config.json");
  expect_error<FileError>(empty, {"model.safetensors"});
}

TEST_F(HfCheckpoint, SavesInOtherDtypes) {
  auto model = load_hf_model(hf_fixture("tiny-gpt2"), cpu_, DType::kF32);
  const std::string out = (dir_ / "bf16").string();
  save_hf_model(*model, out, DType::kBF16);
  auto saved = io::SafetensorsFile::open(out + "/model.safetensors");
  EXPECT_EQ(saved.entry("transformer.wte.weight").dtype, DType::kBF16);
  auto reloaded = load_hf_model(out, cpu_, DType::kF32);
  // bf16 keeps 8 significant bits: every weight within 2^-8 relative of the f32 original.
  const float* a = model->flat_params().data<float>();
  const float* b = reloaded->flat_params().data<float>();
  for (int64_t i = 0; i < model->num_parameters(); ++i) {
    ASSERT_NEAR(b[i], a[i], std::abs(a[i]) * (1.0 / 256)) << i;
  }
}

}  // namespace
}  // namespace zero::model
