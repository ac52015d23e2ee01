// DeepSpeed's flops_profiler through run_training: the report appears at profile_step (as
// DeepSpeed counts: after that many completed steps) and not before, has one row per unit whose
// numbers come from the FLOP formula table and sum to the totals the MFU figure uses, goes to
// output_file (atomically) or stdout, leaves every loss and weight bit-identical, refuses an
// unwritable output_file before the first step and warns when the profile step is never reached.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/data_sources.h"
#include "engine/flops_profiler.h"
#include "engine/flops_report.h"
#include "engine/trainer.h"
#include "engine/zero_harness.h"
#include "model/model_flops.h"

namespace zero::engine {
namespace flops_profiler_test {
namespace fs = std::filesystem;

constexpr int64_t kMicro = 2;
constexpr int64_t kGas = 2;
constexpr int64_t kSeqLen = 8;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Records, each time the trainer asks for a micro-batch, whether the report file exists yet.
class WatchingData final : public TrainingData {
 public:
  WatchingData(TrainingData& inner, fs::path watched) : inner_(inner), watched_(std::move(watched)) {}
  model::Batch next(int64_t micro_batch, int64_t seq_len) override {
    report_seen.push_back(fs::exists(watched_));
    return inner_.next(micro_batch, seq_len);
  }
  nlohmann::json state() const override { return inner_.state(); }
  void restore(const nlohmann::json& state) override { inner_.restore(state); }
  std::string description() const override { return "watching"; }
  std::vector<bool> report_seen;

 private:
  TrainingData& inner_;
  fs::path watched_;
};

class FlopsProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zero_flops_profiler_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  EngineSettings settings(int stage = 0) const {
    EngineSettings s = zero_test::zero_settings(stage, kMicro, kGas, 1);
    s.steps_per_print = 1;
    s.flops_profiler.enabled = true;
    s.flops_profiler.output_file = (dir_ / "flops.txt").string();
    return s;
  }
  fs::path report() const { return dir_ / "flops.txt"; }

  struct Run {
    std::vector<double> losses;  // per step, from the --log-json lines
    std::vector<float> weights;
  };
  // `watch`: record whether the report exists at each micro-batch (watch_log_).
  Run train(const EngineSettings& s, int64_t steps, bool watch = false) {
    backend::CpuBackend cpu;
    comm::SelfComm self;
    Engine engine(zero_test::small_model("llama", cpu), s, self);
    auto source = std::make_shared<data::MarkovSource>(41, 2, 3, 5);
    SyntheticData data(source, 0, 1, 0);
    TrainerOptions options;
    options.steps = steps;
    options.seq_len = kSeqLen;
    options.quiet = true;
    options.log_json_path = (dir_ / ("log" + std::to_string(runs_++) + ".jsonl")).string();
    steps_before_error_ = -1;
    std::unique_ptr<WatchingData> watching;
    if (watch) watching = std::make_unique<WatchingData>(data, report());
    try {
      run_training(engine, watching ? *watching : static_cast<TrainingData&>(data), nullptr, options);
    } catch (...) {
      steps_before_error_ = engine.global_steps();
      throw;
    }
    if (watching) watch_log_ = watching->report_seen;
    Run run;
    std::ifstream log(options.log_json_path);
    for (std::string line; std::getline(log, line);) {
      run.losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
    }
    run.weights = zero_test::to_vector(engine.gather_parameters());
    return run;
  }

  fs::path dir_;
  int runs_ = 0;
  int64_t steps_before_error_ = -1;
  std::vector<bool> watch_log_;
};

TEST_F(FlopsProfilerTest, ReportIsWrittenAtTheProfileStepAndNotBefore) {
  EngineSettings s = settings();
  s.flops_profiler.profile_step = 2;  // the third step: two completed steps before it
  train(s, 4, /*watch=*/true);
  // kGas micro-batches per step: steps 0..2 start without a report, step 3 with one.
  const std::vector<bool> expected = {false, false, false, false, false, false, true, true};
  EXPECT_EQ(watch_log_, expected);
  const std::string text = read_text(report());
  EXPECT_NE(text.find("Profile Summary at step 2:"), std::string::npos) << text;
  // Written once, through a temporary file that is gone.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().filename().string().rfind("flops.txt", 0) == 0) ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(FlopsProfilerTest, OneRowPerUnitAndTotalsFromTheMfuFormulaTable) {
  const EngineSettings s = settings();
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(zero_test::small_model("gpt2", cpu), s, self);
  FlopsProfiler profiler(s.flops_profiler, engine.model(), {0, 1, kMicro, kGas, kSeqLen});
  int64_t step = 0;
  for (; step < 3; ++step) {
    profiler.before_step(engine.global_steps());
    zero_test::train_step(engine, step, 0, kSeqLen);
    profiler.after_step();
  }
  profiler.finish(engine.global_steps());
  ASSERT_TRUE(profiler.profiled());
  ASSERT_TRUE(profiler.last_profile().has_value());
  const FlopsProfile& p = *profiler.last_profile();
  EXPECT_EQ(p.profile_step, 1);
  const auto& units = engine.model().units();
  ASSERT_EQ(p.units.size(), units.size());
  const model::TransformerConfig& config = *engine.model().config();
  double params = 0.0, flops = 0.0, fwd = 0.0, bwd = 0.0;
  for (size_t i = 0; i < units.size(); ++i) {
    EXPECT_EQ(p.units[i].flops.name, units[i]->name());
    EXPECT_EQ(p.units[i].kind, units[i]->kind());
    EXPECT_GT(p.units[i].forward_seconds, 0.0) << units[i]->name();
    EXPECT_GT(p.units[i].backward_seconds, 0.0) << units[i]->name();
    params += p.units[i].flops.params();
    flops += p.units[i].flops.training_flops();
    fwd += p.units[i].forward_seconds;
    bwd += p.units[i].backward_seconds;
  }
  EXPECT_EQ(params, static_cast<double>(config.num_parameters()));
  EXPECT_EQ(p.params(), params);
  // The step's FLOPs (micro x gas sequences on this rank) are the MFU figure's.
  const double mfu_flops = model::training_flops(config, kMicro * kGas, kSeqLen).total();
  EXPECT_EQ(flops, mfu_flops);
  EXPECT_EQ(p.training_flops(), mfu_flops);
  EXPECT_EQ(p.forward_seconds(), fwd);
  EXPECT_EQ(p.backward_seconds(), bwd);
  // The step's wall clock contains every unit's time.
  EXPECT_GE(p.iter_seconds, fwd + bwd);

  // The text: one table row per unit, then the total row.
  const std::string text = read_text(report());
  std::istringstream lines(text);
  std::vector<std::string> rows;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("unit ", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("total ", 0) == 0) break;
    rows.push_back(line.substr(0, line.find(' ')));
  }
  ASSERT_EQ(rows.size(), units.size()) << text;
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(rows[i], units[i]->name());
  EXPECT_NE(text.find(format_count(mfu_flops)), std::string::npos) << text;
  EXPECT_NE(text.find("params of model:"), std::string::npos);
  // detailed (DeepSpeed's default true): the tree with the formula table's operations.
  EXPECT_NE(text.find("Detailed Profile per rank"), std::string::npos);
  EXPECT_NE(text.find("    qkv projection: "), std::string::npos) << text;
}

// Ulysses: a rank of a sequence group of 2 computes half of every sequence's products, and the
// report counts data-parallel ranks as world / sp.
TEST_F(FlopsProfilerTest, SequenceParallelRanksReportTheirShareOfTheWork) {
  const EngineSettings s = settings();
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(zero_test::small_model("llama", cpu), s, self);
  FlopsProfiler profiler(s.flops_profiler, engine.model(), {0, 4, kMicro, kGas, kSeqLen, 2});
  for (int64_t step = 0; step < 2; ++step) {
    profiler.before_step(engine.global_steps());
    zero_test::train_step(engine, step, 0, kSeqLen);
    profiler.after_step();
  }
  ASSERT_TRUE(profiler.last_profile().has_value());
  const FlopsProfile& p = *profiler.last_profile();
  double whole = 0.0;
  for (const auto& unit : model::unit_flops(*engine.model().config(), kMicro * kGas, kSeqLen)) {
    whole += unit.forward_flops();
  }
  EXPECT_DOUBLE_EQ(p.forward_flops(), whole / 2.0);
  const std::string text = read_text(report());
  EXPECT_NE(text.find("data parallel size:"), std::string::npos) << text;
  const size_t dp = text.find("data parallel size:");
  EXPECT_EQ(text.substr(dp, text.find('\n', dp) - dp).back(), '2') << text;
  EXPECT_NE(text.find("sequence parallel size:"), std::string::npos) << text;
}

TEST_F(FlopsProfilerTest, ProfilingLeavesLossesAndWeightsBitIdenticalUnderZero3) {
  EngineSettings with = settings(3);
  EngineSettings without = settings(3);
  without.flops_profiler.enabled = false;
  const Run a = train(with, 3);
  const Run b = train(without, 3);
  ASSERT_TRUE(fs::exists(report()));
  ASSERT_EQ(a.losses.size(), 3u);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.weights, b.weights);
}

TEST_F(FlopsProfilerTest, WithoutOutputFileTheReportGoesToStdout) {
  EngineSettings s = settings();
  s.flops_profiler.output_file.reset();
  s.flops_profiler.profile_step = 0;
  s.flops_profiler.detailed = false;
  ::testing::internal::CaptureStdout();
  train(s, 1);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("Profile Summary at step 0:"), std::string::npos) << out;
  EXPECT_NE(out.find("Aggregated Profile per rank"), std::string::npos) << out;
  EXPECT_EQ(out.find("Detailed Profile per rank"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(report()));
}

TEST_F(FlopsProfilerTest, AProfileStepPastTheRunWarnsThatItNeverRan) {
  EngineSettings s = settings();
  s.flops_profiler.profile_step = 3;  // a 3-step run completes steps 0, 1, 2 before each step
  ::testing::internal::CaptureStderr();
  train(s, 3);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: flops_profiler: no profile was taken: profile_step is 3"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(report()));
}

TEST_F(FlopsProfilerTest, AnUnwritableOutputFileIsRefusedBeforeTheFirstStep) {
  const fs::path regular = dir_ / "a_file";
  std::ofstream(regular) << "not a directory";
  fs::create_directories(dir_ / "a_dir");
  for (const fs::path& bad : {regular / "flops.txt", dir_ / "a_dir"}) {
    EngineSettings s = settings();
    s.flops_profiler.output_file = bad.string();
    try {
      train(s, 2);
      ADD_FAILURE() << "trained with output_file " << bad;
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("flops_profiler.output_file"), std::string::npos) << message;
      EXPECT_NE(message.find(bad.string()), std::string::npos) << message;
      EXPECT_EQ(steps_before_error_, 0) << message;
    }
  }
  // A missing directory is created (as the monitors do).
  EngineSettings s = settings();
  s.flops_profiler.output_file = (dir_ / "new" / "sub" / "flops.txt").string();
  s.flops_profiler.profile_step = 0;
  train(s, 1);
  EXPECT_TRUE(fs::exists(dir_ / "new" / "sub" / "flops.txt"));
}

TEST_F(FlopsProfilerTest, OutOfRangeValuesNameTheKey) {
  backend::CpuBackend cpu;
  auto net = zero_test::small_model("gpt2", cpu);
  const auto refused = [&](auto change, const char* key) {
    config::FlopsProfilerConfig c = settings().flops_profiler;
    change(c);
    try {
      FlopsProfiler profiler(c, *net, {0, 1, kMicro, kGas, kSeqLen});
      ADD_FAILURE() << key << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("flops_profiler.") + key), std::string::npos)
          << e.what();
    }
  };
  refused([](config::FlopsProfilerConfig& c) { c.profile_step = -1; }, "profile_step");
  refused([](config::FlopsProfilerConfig& c) { c.module_depth = -2; }, "module_depth");
  refused([](config::FlopsProfilerConfig& c) { c.top_modules = -1; }, "top_modules");
  refused([](config::FlopsProfilerConfig& c) { c.recompute_fwd_factor = -0.5; },
          "recompute_fwd_factor");
  refused([](config::FlopsProfilerConfig& c) { c.output_file = ""; }, "output_file");
  // Disabled: nothing is checked, nothing happens.
  config::FlopsProfilerConfig off;
  off.output_file = "";
  off.profile_step = -5;
  FlopsProfiler profiler(off, *net, {0, 1, kMicro, kGas, kSeqLen});
  profiler.before_step(-5);
  profiler.after_step();
  EXPECT_FALSE(profiler.profiled());
}

TEST_F(FlopsProfilerTest, OnlyRankZeroProfiles) {
  const EngineSettings s = settings();
  backend::CpuBackend cpu;
  comm::SelfComm self;
  Engine engine(zero_test::small_model("gpt2", cpu), s, self);
  FlopsProfiler profiler(s.flops_profiler, engine.model(), {1, 2, kMicro, kGas, kSeqLen});
  profiler.before_step(1);
  zero_test::train_step(engine, 0, 0, kSeqLen);
  profiler.after_step();
  EXPECT_FALSE(profiler.profiled());
  EXPECT_FALSE(fs::exists(report()));
}

// The formatter on fixed numbers: DeepSpeed's number style, module_depth and top_modules.
TEST(FlopsReport, DepthAndTopModulesShapeTheAggregatedProfile) {
  EXPECT_EQ(format_count(336.23e6), "336.23 M");
  EXPECT_EQ(format_count(6279.86e9), "6.28 T");
  EXPECT_EQ(format_count(512), "512");
  EXPECT_EQ(format_seconds(0.07667), "76.67 ms");
  EXPECT_EQ(format_seconds(34.09e-6), "34.09 us");
  EXPECT_EQ(format_flop_rate(81.9e12), "81.90 TFLOP/s");

  const model::TransformerConfig c = zero_test::small_config("gpt2");
  FlopsProfile p;
  p.model_name = "GPT2LMHeadModel";
  p.profile_step = 1;
  p.micro_batch_size = 2;
  p.seq_len = 8;
  std::vector<model::UnitFlops> table = model::unit_flops(c, 2, 8);
  const char* kinds[] = {"embedding", "transformer_block", "transformer_block", "lm_head"};
  ASSERT_EQ(table.size(), 4u);
  for (size_t i = 0; i < table.size(); ++i) {
    p.units.push_back({kinds[i], table[i], 0.001 * static_cast<double>(i + 1), 0.002});
  }
  p.iter_seconds = 0.05;
  config::FlopsProfilerConfig config;
  config.module_depth = 1;
  config.top_modules = 2;
  config.detailed = true;
  const std::string text = format_flops_report(p, config);
  EXPECT_NE(text.find("Top 2 modules"), std::string::npos) << text;
  EXPECT_NE(text.find("depth 1:"), std::string::npos) << text;
  EXPECT_EQ(text.find("depth 2:"), std::string::npos) << text;
  // Blocks aggregate by kind (DeepSpeed groups by class): both blocks' 2 + 3 ms.
  EXPECT_NE(text.find("fwd latency - {'transformer_block': '5.00 ms', 'lm_head': '4.00 ms'}"),
            std::string::npos)
      << text;
  // module_depth 1: the detailed tree stops at units.
  EXPECT_NE(text.find("\n  block1: "), std::string::npos) << text;
  EXPECT_EQ(text.find("qkv projection: "), std::string::npos) << text;
  // Summary latencies are the sums over units: 1+2+3+4 ms forward, 4 x 2 ms backward.
  EXPECT_NE(text.find("fwd latency:"), std::string::npos);
  EXPECT_NE(text.find("10.00 ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("8.00 ms\n"), std::string::npos) << text;

  config.module_depth = -1;
  const std::string all = format_flops_report(p, config);
  EXPECT_NE(all.find("depth 2:"), std::string::npos) << all;
  EXPECT_NE(all.find("(not measured inside a unit"), std::string::npos) << all;
  EXPECT_NE(all.find("    mlp up projection: "), std::string::npos) << all;
}

}  // namespace flops_profiler_test
}  // namespace zero::engine
