// Regressions for loading a Hugging Face model folder ("Hardening" issue): weights holding Inf
// or NaN trained until "the training loss became nan" instead of being named at load; the
// sharded index was parsed without limits (depth, size, regular file) and followed shard paths
// out of the folder.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/host_convert.h"
#include "io/fifo_watchdog.h"
#include "io/io_scratch.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_fixture_copy.h"

namespace zero::model {
namespace {
namespace fs = std::filesystem;
using io::testing::has;

using testing::hf_fixture;

using Tensors = std::vector<std::pair<std::string, Tensor>>;

class HfWeightsHardening : public io::testing::IoScratch {
 protected:
  // A copy of a fixture folder whose weights are rewritten by `edit` (owned host copies).
  std::string edited_copy(const std::string& folder, const std::function<void(Tensors&)>& edit) {
    const std::string out = path(folder);
    fs::create_directories(out);
    fs::copy_file(hf_fixture(folder) + "/config.json", out + "/config.json");
    auto file = io::SafetensorsFile::open(hf_fixture(folder) + "/model.safetensors");
    Tensors tensors;
    for (const auto& e : file.entries()) {
      const Tensor view = file.tensor(e.name);
      Tensor copy = Tensor::empty(cpu_allocator(), view.shape(), view.dtype(),
                                  MemoryCategory::kOther);
      std::memcpy(copy.raw_data(), view.raw_data(), view.nbytes());
      tensors.emplace_back(e.name, copy);
    }
    edit(tensors);
    io::write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}});
    return out;
  }

  static Tensor& find(Tensors& tensors, const std::string& name) {
    for (auto& [n, t] : tensors) {
      if (n == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }

  std::string load_error(const std::string& dir) {
    try {
      load_hf_model(dir, cpu_, DType::kF32);
    } catch (const FileError& e) {
      const std::string message = e.what();
      EXPECT_FALSE(has(message, "internal error")) << message;
      return message;
    }
    ADD_FAILURE() << "expected a FileError loading " << dir;
    return "";
  }

  backend::CpuBackend cpu_;
};

TEST_F(HfWeightsHardening, InfInWeightsIsNamedAtLoadWithTensorFileAndIndex) {
  const std::string dir = edited_copy("tiny-llama", [](Tensors& t) {
    find(t, "model.layers.1.mlp.down_proj.weight").data<float>()[37] =
        std::numeric_limits<float>::infinity();
  });
  const std::string message = load_error(dir);
  EXPECT_TRUE(has(message, dir + "/model.safetensors")) << message;
  EXPECT_TRUE(has(message, "\"model.layers.1.mlp.down_proj.weight\"")) << message;
  EXPECT_TRUE(has(message, "element 37")) << message;
  EXPECT_TRUE(has(message, " is inf")) << message;
}

TEST_F(HfWeightsHardening, NegativeInfAndNanAreNamedToo) {
  std::string dir = edited_copy("tiny-gpt2", [](Tensors& t) {
    find(t, "transformer.h.0.ln_1.weight").data<float>()[0] =
        -std::numeric_limits<float>::infinity();
  });
  EXPECT_TRUE(has(load_error(dir), "element 0 (of 64) is -inf"));
  fs::remove_all(dir);
  dir = edited_copy("tiny-gpt2", [](Tensors& t) {
    find(t, "transformer.wte.weight").data<float>()[100] = std::nanf("");
  });
  const std::string message = load_error(dir);
  EXPECT_TRUE(has(message, "\"transformer.wte.weight\" element 100")) << message;
  EXPECT_TRUE(has(message, "is nan")) << message;
}

TEST_F(HfWeightsHardening, NonFinite16BitWeightsAreNamed) {
  const std::string dir = edited_copy("tiny-llama", [](Tensors& t) {
    Tensor& w = find(t, "model.norm.weight");
    Tensor half = converted_host(w, DType::kBF16);
    half.data<bf16>()[5] = bf16{0x7FC0};  // a bf16 NaN
    w = half;
  });
  EXPECT_TRUE(has(load_error(dir), "\"model.norm.weight\" element 5 (of 64) is nan"));
}

TEST_F(HfWeightsHardening, FiniteValueTooLargeForTheParameterDtypeIsNamed) {
  const std::string dir = edited_copy("tiny-llama", [](Tensors& t) {
    Tensor& w = find(t, "model.norm.weight");
    Tensor wide = converted_host(w, DType::kF64);
    wide.data<double>()[3] = 1e300;  // finite in f64, inf in f32
    w = wide;
  });
  const std::string message = load_error(dir);
  EXPECT_TRUE(has(message, "element 3")) << message;
  EXPECT_TRUE(has(message, "too large for f32")) << message;
}

TEST_F(HfWeightsHardening, FiniteWeightsStillLoad) {
  EXPECT_NO_THROW(load_hf_model(edited_copy("tiny-qwen2", [](Tensors&) {}), cpu_, DType::kF32));
}

// A sharded folder: the fixture's tensors in one shard, listed by an index we write.
class HfIndexHardening : public HfWeightsHardening {
 protected:
  std::string sharded(const std::string& index_text) {
    const std::string out = path("sharded");
    fs::create_directories(out);
    fs::copy_file(hf_fixture("tiny-gpt2") + "/config.json", out + "/config.json");
    fs::copy_file(hf_fixture("tiny-gpt2") + "/model.safetensors",
                  out + "/model-00001-of-00001.safetensors");
    std::ofstream(out + "/model.safetensors.index.json") << index_text;
    return out;
  }
};

TEST_F(HfIndexHardening, DeeplyNestedIndexIsAnErrorNamingIt) {
  const std::string dir =
      sharded("{\"metadata\": " + std::string(200000, '[') + std::string(200000, ']') +
              ", \"weight_map\": {}}");
  const std::string message = load_error(dir);
  EXPECT_TRUE(has(message, "model.safetensors.index.json")) << message;
  EXPECT_TRUE(has(message, "deeper than")) << message;
}

TEST_F(HfIndexHardening, ShardPathsMustStayInTheFolder) {
  for (const char* shard : {"../model-00001-of-00001.safetensors", "/etc/passwd", "", ".."}) {
    const std::string dir = sharded(
        nlohmann::json{{"weight_map", {{"transformer.wte.weight", shard}}}}.dump());
    const std::string message = load_error(dir);
    EXPECT_TRUE(has(message, "same folder")) << message;
    fs::remove_all(dir);
  }
}

TEST_F(HfIndexHardening, IndexThatIsAFifoOrNotAnObjectIsAFileError) {
  std::string dir = sharded("[1, 2]");
  EXPECT_TRUE(has(load_error(dir), "weight_map"));
  fs::remove(dir + "/model.safetensors.index.json");
  ASSERT_EQ(::mkfifo((dir + "/model.safetensors.index.json").c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(dir + "/model.safetensors.index.json", 5.0);
  EXPECT_TRUE(has(load_error(dir), "FIFO"));
  EXPECT_FALSE(watchdog.fired());
}

TEST_F(HfWeightsHardening, WeightsFileThatIsAFifoIsRefusedAtOnce) {
  const std::string out = path("fifo_model");
  fs::create_directories(out);
  fs::copy_file(hf_fixture("tiny-gpt2") + "/config.json", out + "/config.json");
  ASSERT_EQ(::mkfifo((out + "/model.safetensors").c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(out + "/model.safetensors", 5.0);
  EXPECT_TRUE(has(load_error(out), "FIFO"));
  EXPECT_FALSE(watchdog.fired());
}

}  // namespace
}  // namespace zero::model
