// zero.Init from a Hugging Face folder (model/hf_unit_values.h): a model built partitioned reads
// any range of any unit's values from the folder with exactly the bits load_hf_model gives the
// whole model (GPT-2 with transposed Conv1D weights and tied embeddings, Llama; single files and
// sharded indexes); bad folders fail before any data is read, with load_hf_weights' errors, and
// an Inf in a part read names its index in the whole tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_fixture_copy.h"
#include "model/hf_unit_values.h"

namespace zero::model {
namespace {
namespace fs = std::filesystem;

using testing::hf_fixture;

class HfUnitValues : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zero_hf_units_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A copy of a fixture folder whose weights are rewritten by `edit`.
  std::string edited_copy(const std::string& folder, const std::function<void(testing::TensorList&)>& edit) {
    return testing::edited_fixture_copy(dir_, folder, edit);
  }

  // Every unit's values from the partitioned model, read in three uneven ranges per unit.
  std::vector<float> read_all_units(Model& model) {
    std::vector<float> all(static_cast<size_t>(model.num_parameters()), 0.0f);
    for (size_t u = 0; u < model.units().size(); ++u) {
      const Unit& unit = *model.units()[u];
      const int64_t n = unit.flat_numel();
      const int64_t cuts[] = {0, n / 3, n / 3 + 1, n};
      for (int i = 0; i < 3; ++i) {
        const int64_t count = cuts[i + 1] - cuts[i];
        Tensor out = Tensor::empty(cpu_allocator(), {count}, DType::kF32, MemoryCategory::kOther);
        model.value_source()->unit_values(model, u, cuts[i], count, out);
        std::memcpy(all.data() + unit.flat_begin() + cuts[i], out.raw_data(), static_cast<size_t>(count) * 4);
      }
    }
    return all;
  }

  fs::path dir_;
  backend::CpuBackend cpu_;
};

TEST_F(HfUnitValues, PartsEqualTheWholeModelsValues) {
  for (const char* folder : {"tiny-gpt2", "tiny-llama"}) {
    auto whole = load_hf_model(hf_fixture(folder), cpu_, DType::kF32);
    auto partitioned = load_hf_model_partitioned(hf_fixture(folder), cpu_, DType::kF32);
    EXPECT_FALSE(partitioned->flat_params().defined()) << "no flat buffer is allocated";
    ASSERT_EQ(partitioned->num_parameters(), whole->num_parameters());
    const std::vector<float> values = read_all_units(*partitioned);
    EXPECT_EQ(0, std::memcmp(values.data(), whole->flat_params().raw_data(), whole->flat_params().nbytes()))
        << folder;
  }
}

TEST_F(HfUnitValues, BadFoldersFailBeforeAnyDataIsRead) {
  auto expect_error = [&](const std::string& dir, const std::string& part) {
    auto model = load_hf_model_partitioned(dir, cpu_, DType::kF32);
    Tensor out = Tensor::empty(cpu_allocator(), {1}, DType::kF32, MemoryCategory::kOther);
    try {
      model->value_source()->unit_values(*model, 0, 0, 1, out);
      ADD_FAILURE() << "no error for " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(edited_copy("tiny-llama", [](auto& t) { t.pop_back(); }), "is missing from the weights");
  fs::remove_all(dir_ / "tiny-llama");
  expect_error(edited_copy("tiny-llama",
                           [](auto& t) { t.emplace_back("extra.weight", Tensor::zeros_host({2}, DType::kF32)); }),
               "tensors the model does not have: extra.weight");
  fs::remove_all(dir_ / "tiny-llama");
  expect_error(edited_copy("tiny-llama",
                           [](auto& t) {
                             for (auto& [name, tensor] : t) {
                               if (name == "model.norm.weight") tensor = Tensor::zeros_host({3}, DType::kF32);
                             }
                           }),
               "expects");
  EXPECT_THROW(load_hf_model_partitioned((dir_ / "missing").string(), cpu_, DType::kF32), FileError);
}

TEST_F(HfUnitValues, InfInAPartNamesItsIndexInTheWholeTensor) {
  const std::string dir = edited_copy("tiny-llama", [](auto& t) {
    for (auto& [name, tensor] : t) {
      if (name != "model.embed_tokens.weight") continue;
      Tensor copy = Tensor::zeros_host(tensor.shape(), DType::kF32);
      std::memcpy(copy.raw_data(), tensor.raw_data(), copy.nbytes());
      copy.data<float>()[copy.numel() - 1] = std::numeric_limits<float>::infinity();
      tensor = copy;
    }
  });
  auto model = load_hf_model_partitioned(dir, cpu_, DType::kF32);
  const Parameter& embedding = model->units()[0]->parameters().front();
  const int64_t n = embedding.numel();
  Tensor out = Tensor::empty(cpu_allocator(), {10}, DType::kF32, MemoryCategory::kOther);
  model->value_source()->unit_values(*model, 0, 0, 10, out);  // the first elements are fine
  try {
    model->value_source()->unit_values(*model, 0, n - 10, 10, out);
    FAIL() << "the Inf was not found";
  } catch (const FileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("element " + std::to_string(n - 1) + " (of " + std::to_string(n) + ") is inf"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace zero::model
