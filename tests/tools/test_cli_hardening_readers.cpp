// The "Hardening" issue's reader bugs, reached the way users reached them: through the `zero`
// program. Each bad input must end within seconds with exit code 2 and a message naming the
// file, key or flag — never a hang, a crash, or an "internal error".
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "core/tensor.h"
#include "io/fifo_watchdog.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"
#include "tools/cli_helpers.h"
#include "tools/shell_runner.h"

namespace cli_hardening_readers_test {
namespace fs = std::filesystem;

using Result = zero::testing::CliResult;
using zero::testing::has;

Result run(const std::string& args) { return zero::testing::run_cli(args, 60); }

std::string fixture(const std::string& folder) {
  return std::string(ZERO_TEST_FIXTURES) + "/hf/" + folder;
}

class CliHardeningReaders : public zero::testing::ScratchDirTest {
 protected:
  CliHardeningReaders() : ScratchDirTest("zero_cli_readers_") {}

  // A model folder holding only config.json: the fixture's GPT-2 config with `edit` applied.
  std::string model_with(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(fixture("tiny-gpt2") + "/config.json"));
    edit(config);
    const fs::path model = dir_ / "model";
    fs::create_directories(model);
    std::ofstream(model / "config.json") << config.dump();
    return model.string();
  }

  // Expects a clean refusal: exit 2 within `seconds`, naming every part, no internal error.
  static void expect_refusal(const Result& r, std::initializer_list<std::string> parts,
                             double seconds = 10.0) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_LT(r.seconds, seconds) << r.output;
    EXPECT_FALSE(has(r.output, "internal")) << r.output;
    for (const std::string& part : parts) EXPECT_TRUE(has(r.output, part)) << part << "\n" << r.output;
  }
};

TEST_F(CliHardeningReaders, NLayer2To40IsRefusedNotSpunOn) {
  const std::string model = model_with([](nlohmann::json& c) { c["n_layer"] = int64_t{1} << 40; });
  expect_refusal(run("train --model " + model + " --steps 1"),
                 {model + "/config.json", "'n_layer' = 1099511627776", "10000"});
}

TEST_F(CliHardeningReaders, SizesNearTheInt64EdgeAreRefusedNotOverflowed) {
  for (const char* key : {"vocab_size", "n_embd", "n_head", "n_inner", "n_positions"}) {
    const std::string model = model_with([&](nlohmann::json& c) { c[key] = int64_t{1} << 62; });
    expect_refusal(run("train --model " + model + " --steps 1"),
                   {model + "/config.json", std::string("'") + key + "'", "out of range"});
    fs::remove_all(model);
  }
}

TEST_F(CliHardeningReaders, DeeplyNestedUnusedKeyIsRefusedNotACrash) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  std::string text = nlohmann::json::parse(std::ifstream(fixture("tiny-gpt2") + "/config.json")).dump();
  text.pop_back();
  text += ", \"unused\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  std::ofstream(model / "config.json") << text;
  expect_refusal(run("train --model " + model.string() + " --steps 1"),
                 {(model / "config.json").string(), "deeper than"});
}

TEST_F(CliHardeningReaders, ModelLargerThanMemoryIsRefusedBeforeAllocating) {
  const std::string model = model_with([](nlohmann::json& c) {
    c["n_embd"] = 1 << 20;
    c["n_head"] = 8192;
    c["n_layer"] = 10000;
  });
  // `zero train`'s memory preflight refuses it (the model builder would too, for other callers).
  expect_refusal(run("train --model " + model + " --steps 1"),
                 {"GiB", "of physical memory", "config.json", "--micro-batch"}, 5.0);
}

TEST_F(CliHardeningReaders, FifoAsDataErrorsAtOnce) {
  const std::string pipe = (dir_ / "train.bin").string();
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(pipe, 20.0);
  expect_refusal(run("train --model tiny --steps 1 --data " + pipe), {pipe, "FIFO"});
  EXPECT_FALSE(watchdog.fired()) << "zero blocked opening the FIFO";
}

TEST_F(CliHardeningReaders, FifoAsPrepareInputErrorsAtOnce) {
  const std::string pipe = (dir_ / "text.txt").string();
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  zero::testing::FifoWatchdog watchdog(pipe, 20.0);
  expect_refusal(run("prepare " + pipe + " --out " + (dir_ / "out.bin").string()), {pipe, "FIFO"});
  EXPECT_FALSE(watchdog.fired()) << "zero blocked opening the FIFO";
}

TEST_F(CliHardeningReaders, InfInWeightsIsNamedAtLoadNotAsANanLossLater) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  fs::copy_file(fixture("tiny-gpt2") + "/config.json", model / "config.json");
  auto file = zero::io::SafetensorsFile::open(fixture("tiny-gpt2") + "/model.safetensors");
  std::vector<std::pair<std::string, zero::Tensor>> tensors;
  for (const auto& e : file.entries()) {
    const zero::Tensor view = file.tensor(e.name);
    zero::Tensor copy = zero::Tensor::empty(zero::cpu_allocator(), view.shape(), view.dtype(),
                                            zero::MemoryCategory::kOther);
    std::memcpy(copy.raw_data(), view.raw_data(), view.nbytes());
    if (e.name == "transformer.h.1.attn.c_attn.weight") {
      copy.data<float>()[1234] = std::numeric_limits<float>::infinity();
    }
    tensors.emplace_back(e.name, copy);
  }
  zero::io::write_safetensors((model / "model.safetensors").string(), tensors);
  expect_refusal(run("train --model " + model.string() + " --steps 2 --seq-len 16"),
                 {(model / "model.safetensors").string(), "transformer.h.1.attn.c_attn.weight",
                  "element 1234", "inf"});
}

}  // namespace cli_hardening_readers_test
