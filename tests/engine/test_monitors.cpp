// The csv_monitor and tensorboard monitors through run_training: DeepSpeed's file layout and
// metric names, values that agree with the --log-json lines, files written at print steps only,
// a resumed run that adds to its directory without damaging what is there, an unwritable
// output_path refused before the first step, and nothing written by ranks other than 0.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "comm/self_comm.h"
#include "core/error.h"
#include "engine/csv_monitor.h"
#include "engine/data_sources.h"
#include "engine/monitor.h"
#include "engine/trainer.h"
#include "engine/zero_harness.h"
#include "support/tfevents_reader.h"

namespace zero::engine {
namespace monitors_test {
namespace fs = std::filesystem;
using zero::testing::read_scalars;
using zero::testing::Scalar;

constexpr int64_t kMicro = 2;
constexpr int64_t kGas = 2;
constexpr int64_t kBatch = kMicro * kGas;  // samples per step (one rank)
constexpr int64_t kSeqLen = 8;

struct Row {
  int64_t step;
  double value;
};

struct CsvFile {
  std::string header;
  std::vector<Row> rows;
};

CsvFile read_csv(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  CsvFile file;
  std::getline(in, file.header);
  std::string line;
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    EXPECT_NE(comma, std::string::npos) << path << ": " << line;
    file.rows.push_back({std::stoll(line.substr(0, comma)), std::stod(line.substr(comma + 1))});
  }
  return file;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Scalar> scalars_tagged(const std::vector<Scalar>& all, std::string_view tag) {
  std::vector<Scalar> out;
  for (const Scalar& s : all) {
    if (s.tag == tag) out.push_back(s);
  }
  return out;
}

// Counts the lines of a file (0 when it does not exist) each time the trainer asks for data,
// which shows when the monitors' files change during a run.
class WatchingData final : public TrainingData {
 public:
  WatchingData(TrainingData& inner, fs::path watched) : inner_(inner), watched_(std::move(watched)) {}
  model::Batch next(int64_t micro_batch, int64_t seq_len) override {
    int64_t lines = 0;
    std::ifstream in(watched_);
    for (std::string line; std::getline(in, line);) ++lines;
    seen_lines.push_back(lines);
    return inner_.next(micro_batch, seq_len);
  }
  nlohmann::json state() const override { return inner_.state(); }
  void restore(const nlohmann::json& state) override { inner_.restore(state); }
  std::string description() const override { return "watching"; }
  std::vector<int64_t> seen_lines;

 private:
  TrainingData& inner_;
  fs::path watched_;
};

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zero_monitors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir_ / "locked", fs::perms::owner_all, ignored);
    fs::remove_all(dir_, ignored);
  }

  EngineSettings settings(bool fp16 = false) const {
    EngineSettings s = zero_test::zero_settings(0, kMicro, kGas, 1);
    s.steps_per_print = 1;
    s.fp16.enabled = fp16;
    s.fp16.initial_scale_power = 8;
    s.tensorboard.enabled = true;
    s.tensorboard.output_path = (dir_ / "tb").string();
    s.tensorboard.job_name = "job";
    s.csv_monitor.enabled = true;
    s.csv_monitor.output_path = (dir_ / "csv").string();
    s.csv_monitor.job_name = "job";
    return s;
  }
  fs::path tb_dir() const { return dir_ / "tb" / "job"; }
  fs::path csv_dir() const { return dir_ / "csv" / "job"; }

  TrainingSummary train(const EngineSettings& s, TrainerOptions options,
                        TrainingData* data_override = nullptr, bool with_eval = false) {
    backend::CpuBackend cpu;
    comm::SelfComm self;
    Engine engine(zero_test::small_model("llama", cpu), s, self);
    auto source = std::make_shared<data::MarkovSource>(41, 2, 3, 5);
    SyntheticData data(source, 0, 1, 0);
    SyntheticData eval(source, 0, 1, 1);
    options.seq_len = kSeqLen;
    options.quiet = true;
    options.eval_batches = 1;
    TrainingData& train_data = data_override != nullptr ? *data_override : data;
    steps_before_error_ = -1;
    try {
      return run_training(engine, train_data, with_eval ? &eval : nullptr, options);
    } catch (...) {
      steps_before_error_ = engine.global_steps();
      throw;
    }
  }

  fs::path dir_;
  int64_t steps_before_error_ = -1;
};

TEST_F(MonitorTest, BothMonitorsWriteDeepSpeedsMetricsIndexedBySamples) {
  TrainerOptions options;
  options.steps = 4;
  options.eval_every = 2;
  options.log_json_path = (dir_ / "log.jsonl").string();
  train(settings(/*fp16=*/true), options, nullptr, /*with_eval=*/true);

  // The --log-json lines (one per step with steps_per_print 1) hold the same values.
  std::vector<nlohmann::json> log;
  std::ifstream log_in(dir_ / "log.jsonl");
  int64_t eval_lines = 0;
  for (std::string line; std::getline(log_in, line);) {
    nlohmann::json entry = nlohmann::json::parse(line);
    // Evaluations (every 2 steps and at the end) have lines of their own.
    if (entry.contains("eval_loss")) {
      ++eval_lines;
      continue;
    }
    log.push_back(std::move(entry));
  }
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(eval_lines, 2);

  // CSV: a file per metric, header "step,<last part of the name>".
  EXPECT_EQ(csv_metric_file_name("Train/Samples/train_loss"), "Train_Samples_train_loss.csv");
  const CsvFile loss = read_csv(csv_dir() / "Train_Samples_train_loss.csv");
  const CsvFile lr = read_csv(csv_dir() / "Train_Samples_lr.csv");
  const CsvFile scale = read_csv(csv_dir() / "Train_Samples_loss_scale.csv");
  const CsvFile eval = read_csv(csv_dir() / "Train_Samples_eval_loss.csv");
  EXPECT_EQ(loss.header, "step,train_loss");
  EXPECT_EQ(lr.header, "step,lr");
  EXPECT_EQ(scale.header, "step,loss_scale");
  EXPECT_EQ(eval.header, "step,eval_loss");
  ASSERT_EQ(loss.rows.size(), 4u);
  ASSERT_EQ(lr.rows.size(), 4u);
  ASSERT_EQ(scale.rows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto step = static_cast<int64_t>(i);
    // As DeepSpeed: the loss at the samples seen before its step, lr and scale after it.
    EXPECT_EQ(loss.rows[i].step, step * kBatch);
    EXPECT_EQ(lr.rows[i].step, (step + 1) * kBatch);
    EXPECT_EQ(scale.rows[i].step, (step + 1) * kBatch);
    EXPECT_EQ(loss.rows[i].value, log[i]["loss"].get<double>()) << i;
    EXPECT_EQ(lr.rows[i].value, log[i]["lr"].get<double>()) << i;
    EXPECT_EQ(scale.rows[i].value, log[i]["loss_scale"].get<double>()) << i;
  }
  // Evaluation after step 2 (eval_every) and at the end.
  ASSERT_EQ(eval.rows.size(), 2u);
  EXPECT_EQ(eval.rows[0].step, 2 * kBatch);
  EXPECT_EQ(eval.rows[1].step, 4 * kBatch);

  // TensorBoard: one events file with the same scalars, as float32.
  const auto files = event_files(tb_dir());
  ASSERT_EQ(files.size(), 1u);
  const std::vector<Scalar> all = read_scalars(files[0].string());
  EXPECT_EQ(all.size(), 4u * 3 + 2);
  const auto check = [&](std::string_view tag, const CsvFile& csv) {
    const std::vector<Scalar> tb = scalars_tagged(all, tag);
    ASSERT_EQ(tb.size(), csv.rows.size()) << tag;
    for (size_t i = 0; i < tb.size(); ++i) {
      EXPECT_EQ(tb[i].step, csv.rows[i].step) << tag << " " << i;
      EXPECT_EQ(tb[i].value, static_cast<float>(csv.rows[i].value)) << tag << " " << i;
    }
  };
  check(kTrainLossMetric, loss);
  check(kLearningRateMetric, lr);
  check(kLossScaleMetric, scale);
  check(kEvalLossMetric, eval);
}

TEST_F(MonitorTest, WithoutFp16ThereIsNoLossScaleAndDefaultsFollowDeepSpeed) {
  // DeepSpeed's defaults: output_path "" and job_name "DeepSpeedJobName", i.e. a directory of
  // that name under the current directory.
  EXPECT_EQ(monitor_log_dir(config::FileMonitorConfig{}), fs::path("DeepSpeedJobName"));
  config::FileMonitorConfig absolute_job;
  absolute_job.output_path = "ignored";
  absolute_job.job_name = "/abs/job";  // os.path.join drops what comes before an absolute part
  EXPECT_EQ(monitor_log_dir(absolute_job), fs::path("/abs/job"));
  const EngineSettings s = settings();
  TrainerOptions options;
  options.steps = 2;
  train(s, options);
  EXPECT_TRUE(fs::exists(csv_dir() / "Train_Samples_lr.csv"));
  EXPECT_FALSE(fs::exists(csv_dir() / "Train_Samples_loss_scale.csv"));
  EXPECT_TRUE(scalars_tagged(read_scalars(event_files(tb_dir()).at(0).string()), kLossScaleMetric).empty());
}

TEST_F(MonitorTest, FilesChangeOnlyAtPrintSteps) {
  EngineSettings s = settings();
  s.steps_per_print = 3;
  auto source = std::make_shared<data::MarkovSource>(41, 2, 3, 5);
  SyntheticData inner(source, 0, 1, 0);
  WatchingData watching(inner, csv_dir() / "Train_Samples_lr.csv");
  TrainerOptions options;
  options.steps = 7;
  train(s, options, &watching);
  // Two micro-batches per step: the lines seen while steps 1..7 fetch their data.
  const std::vector<int64_t> expected = {0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 7, 7};
  EXPECT_EQ(watching.seen_lines, expected);
  EXPECT_EQ(read_csv(csv_dir() / "Train_Samples_lr.csv").rows.size(), 7u);
}

TEST_F(MonitorTest, ResumeAddsToTheRunDirectoryWithoutDamagingIt) {
  EngineSettings s = settings();
  s.steps_per_print = 2;
  TrainerOptions first;
  first.steps = 3;
  first.save_dir = (dir_ / "ckpt").string();
  train(s, first);
  // A crash of an earlier run left half a row behind: the resumed run starts a new line.
  std::ofstream(csv_dir() / "Train_Samples_lr.csv", std::ios::app) << "99,0.00";
  TrainerOptions second = first;
  second.steps = 5;
  second.resume_dir = first.save_dir;
  train(s, second);

  const CsvFile loss = read_csv(csv_dir() / "Train_Samples_train_loss.csv");
  EXPECT_EQ(loss.header, "step,train_loss");
  ASSERT_EQ(loss.rows.size(), 5u);  // one header, rows of both runs
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(loss.rows[i].step, static_cast<int64_t>(i) * kBatch);
  const CsvFile lr = read_csv(csv_dir() / "Train_Samples_lr.csv");
  ASSERT_EQ(lr.rows.size(), 6u);
  EXPECT_EQ(lr.rows[3].step, 99);
  EXPECT_EQ(lr.rows[4].step, 4 * kBatch);

  // Two events files, each whole; the second starts where the checkpoint left off.
  const auto files = event_files(tb_dir());
  ASSERT_EQ(files.size(), 2u);
  std::vector<int64_t> loss_steps;
  for (const fs::path& file : files) {
    for (const Scalar& scalar : scalars_tagged(read_scalars(file.string()), kTrainLossMetric)) {
      loss_steps.push_back(scalar.step);
    }
  }
  std::sort(loss_steps.begin(), loss_steps.end());
  EXPECT_EQ(loss_steps, (std::vector<int64_t>{0, 4, 8, 12, 16}));
}

TEST_F(MonitorTest, AnUnwritableOutputPathIsRefusedBeforeTheFirstStep) {
  const std::string file = (dir_ / "a_file").string();
  std::ofstream(file) << "not a directory";
  for (const char* section : {"tensorboard", "csv_monitor"}) {
    EngineSettings s = settings();
    (std::string(section) == "tensorboard" ? s.tensorboard : s.csv_monitor).output_path = file;
    TrainerOptions options;
    options.steps = 2;
    try {
      train(s, options);
      ADD_FAILURE() << section << ": trained with output_path under a regular file";
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string(section) + ".output_path"), std::string::npos) << message;
      EXPECT_NE(message.find(file + "/job"), std::string::npos) << message;
      EXPECT_EQ(steps_before_error_, 0) << section;
    }
  }
  // No permission (root writes anywhere, so only as another user).
  if (::geteuid() != 0) {
    fs::create_directories(dir_ / "locked");
    fs::permissions(dir_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    EngineSettings s = settings();
    s.tensorboard.output_path = (dir_ / "locked").string();
    TrainerOptions options;
    options.steps = 2;
    try {
      train(s, options);
      ADD_FAILURE() << "trained with an output_path without write permission";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("tensorboard.output_path"), std::string::npos) << e.what();
      EXPECT_EQ(steps_before_error_, 0);
    }
  }
}

TEST_F(MonitorTest, OnlyRankZeroWrites) {
  EngineSettings s = settings();
  EXPECT_TRUE(create_monitors(s, 1)->empty());
  EXPECT_FALSE(fs::exists(dir_ / "tb"));
  EXPECT_FALSE(fs::exists(dir_ / "csv"));
  EXPECT_FALSE(create_monitors(s, 0)->empty());
  EXPECT_TRUE(fs::is_directory(tb_dir()));
  EXPECT_TRUE(fs::is_directory(csv_dir()));
}

}  // namespace monitors_test
}  // namespace zero::engine
