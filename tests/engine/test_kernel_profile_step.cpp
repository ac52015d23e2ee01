// `zero train --profile-kernels STEP` through run_training: the table of exactly that step,
// written as JSON, whose matrix-product FLOPs are the MFU figure's (the same convention), and a
// run whose losses and weights are bit-identical to one without the profiler. Bad requests stop
// the run before the first step with the flag's name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/profiling/profiling_backend.h"
#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/data_sources.h"
#include "engine/trainer.h"
#include "engine/zero_harness.h"
#include "tools/shell_runner.h"
#include "model/model_flops.h"

namespace zero::engine {
namespace kernel_profile_test {
namespace fs = std::filesystem;

constexpr int64_t kMicro = 2;
constexpr int64_t kGas = 2;
constexpr int64_t kSeqLen = 8;

class KernelProfileStepTest : public zero::testing::ScratchDirTest {
 protected:
  KernelProfileStepTest() : ScratchDirTest("zero_kernel_profile_") {}

  struct Trained {
    std::vector<double> losses;
    std::vector<float> weights;
    nlohmann::json log_line;  // the last step line
  };
  // Trains the small Llama for `steps` on the CPU backend, through a ProfilingBackend when
  // `profiled` (the request may still ask for no profile).
  Trained train(int64_t steps, bool profiled, const KernelProfileRequest& request = {}) {
    std::unique_ptr<backend::Backend> backend = std::make_unique<backend::CpuBackend>();
    backend::ProfilingBackend* profiler = nullptr;
    if (profiled) {
      auto wrapper = std::make_unique<backend::ProfilingBackend>(std::move(backend));
      profiler = wrapper.get();
      backend = std::move(wrapper);
    }
    EngineSettings s = zero_test::zero_settings(0, kMicro, kGas, 1);
    s.steps_per_print = 1;
    comm::SelfComm self;
    Engine engine(zero_test::small_model("llama", *backend), s, self);
    auto source = std::make_shared<data::MarkovSource>(41, 2, 3, 5);
    SyntheticData data(source, 0, 1, 0);
    TrainerOptions options;
    options.steps = steps;
    options.seq_len = kSeqLen;
    options.quiet = true;
    options.log_json_path = (dir_ / ("log" + std::to_string(runs_++) + ".jsonl")).string();
    options.kernel_profile = request;
    options.kernel_profiler = profiler;
    run_training(engine, data, nullptr, options);
    config_ = *engine.model().config();
    Trained out;
    std::ifstream log(options.log_json_path);
    for (std::string line; std::getline(log, line);) {
      out.log_line = nlohmann::json::parse(line);
      out.losses.push_back(out.log_line["loss"].get<double>());
    }
    out.weights = zero_test::to_vector(engine.gather_parameters());
    return out;
  }

  int runs_ = 0;
  model::TransformerConfig config_;
};

TEST_F(KernelProfileStepTest, ProfilesTheStepWithTheMfuFlops) {
  const std::string json_path = (dir_ / "kernels" / "step2.json").string();
  const Trained profiled = train(3, true, {2, json_path});
  const Trained plain = train(3, false);
  // Only events were added: every loss and weight is the unprofiled run's.
  EXPECT_EQ(profiled.losses, plain.losses);
  EXPECT_EQ(profiled.weights, plain.weights);

  std::ifstream in(json_path);
  ASSERT_TRUE(in.good()) << json_path;
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["step"], 2);
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_GT(json["step_seconds"].get<double>(), 0.0);
  EXPECT_LE(json["kernel_seconds"].get<double>(), json["step_seconds"].get<double>());
  double linear = 0.0, attention = 0.0;
  int64_t optimizer_calls = 0, attention_forward_calls = 0;
  for (const auto& row : json["kernels"]) {
    const std::string op = row["op"];
    if (op.rfind("linear_", 0) == 0 || op == "matmul") linear += row["flops"].get<double>();
    if (op.rfind("attention_", 0) == 0) attention += row["flops"].get<double>();
    if (op == "attention_forward") attention_forward_calls += row["calls"].get<int64_t>();
    if (op == "optimizer_update") optimizer_calls += row["calls"].get<int64_t>();
  }
  // One step: kGas micro-batches through every layer, one optimizer update at the end.
  EXPECT_EQ(attention_forward_calls, kGas * config_.num_layers);
  EXPECT_GE(optimizer_calls, 1);
  const model::StepFlops mfu = model::training_flops(config_, kMicro * kGas, kSeqLen);
  // Weight products: exactly the formula table's (3 x forward). Attention: the table counts
  // T^2/2 scores per head, the kernels the T(T+1)/2 they keep.
  EXPECT_DOUBLE_EQ(linear, mfu.matmul);
  EXPECT_DOUBLE_EQ(attention, mfu.attention * (kSeqLen + 1) / kSeqLen);
}

TEST_F(KernelProfileStepTest, StepLinesCarryTheirWindowAndTheMfuDivisor) {
  TrainerOptions defaults;
  const Trained run = train(2, false);
  const nlohmann::json& line = run.log_line;
  EXPECT_EQ(line["window_steps"], 1);
  EXPECT_EQ(line["window_tokens"], kMicro * kGas * kSeqLen);
  EXPECT_GT(line["window_seconds"].get<double>(), 0.0);
  EXPECT_EQ(line["peak_flops"].get<double>(), defaults.peak_flops);
  EXPECT_EQ(line["peak_flops_dtype"], "f32");
}

TEST_F(KernelProfileStepTest, NoProfileWithoutARequest) {
  // The wrapper alone changes nothing and writes nothing.
  const Trained wrapped = train(2, true);
  const Trained plain = train(2, false);
  EXPECT_EQ(wrapped.losses, plain.losses);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().extension(), ".jsonl") << entry.path();
  }
}

TEST_F(KernelProfileStepTest, BadRequestsStopTheRunBeforeTheFirstStep) {
  auto message = [&](const KernelProfileRequest& request) -> std::string {
    try {
      train(3, true, request);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message({4, ""}).find("--profile-kernels 4: the step to profile must be between 1 and --steps (3)"),
            std::string::npos);
  EXPECT_NE(message({-1, ""}).find("--profile-kernels -1"), std::string::npos);
  EXPECT_NE(message({0, (dir_ / "k.json").string()}).find("--profile-kernels-json needs --profile-kernels"),
            std::string::npos);
  // A directory where the file should go.
  fs::create_directories(dir_ / "taken.json");
  const std::string unwritable = message({2, (dir_ / "taken.json").string()});
  EXPECT_NE(unwritable.find("--profile-kernels-json: cannot write"), std::string::npos) << unwritable;
  EXPECT_NE(unwritable.find("it is a directory"), std::string::npos) << unwritable;
  // None of them trained a step.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension() == ".jsonl") {
      EXPECT_EQ(fs::file_size(entry.path()), 0u) << entry.path();
    }
  }
}

}  // namespace kernel_profile_test
}  // namespace zero::engine
