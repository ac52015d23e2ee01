// Training monitors from the DeepSpeed config: the `csv_monitor` and `tensorboard` sections,
// behind one fan-out the trainer calls as DeepSpeed's engine calls its MonitorMaster, with
// (metric name, value, global samples) events. Only rank 0 writes, as in DeepSpeed. `wandb` and
// `comet` need a network and are refused by the feature-support table.
//
// Both writers buffer events and write them at flush(), which the trainer calls at every print
// step (and at the end), so a crash loses at most the events of one print window; each file only
// ever holds whole rows or records.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "config/monitor_config.h"
#include "engine/engine_settings.h"

namespace zero::engine {

// DeepSpeed's metric names (runtime/engine.py; eval_loss from runtime/pipe/engine.py, whose
// eval_batch is the one DeepSpeed engine that logs evaluation). The x axis of every metric is
// the number of samples trained on, all ranks together.
inline constexpr std::string_view kTrainLossMetric = "Train/Samples/train_loss";
inline constexpr std::string_view kLearningRateMetric = "Train/Samples/lr";
inline constexpr std::string_view kLossScaleMetric = "Train/Samples/loss_scale";  // fp16 only
inline constexpr std::string_view kEvalLossMetric = "Train/Samples/eval_loss";

class Monitor {
 public:
  virtual ~Monitor() = default;
  // Buffers one event; `global_samples` is its step on the x axis.
  virtual void write_event(std::string_view name, double value, int64_t global_samples) = 0;
  // Writes what is buffered; throws FileError when the disk refuses.
  virtual void flush() = 0;
};

// Every enabled monitor behind one Monitor (DeepSpeed's MonitorMaster).
class MonitorFanout : public Monitor {
 public:
  void add(std::unique_ptr<Monitor> monitor) { monitors_.push_back(std::move(monitor)); }
  bool empty() const { return monitors_.empty(); }
  void write_event(std::string_view name, double value, int64_t global_samples) override;
  void flush() override;

 private:
  std::vector<std::unique_ptr<Monitor>> monitors_;
};

// A monitor's log directory: output_path/job_name, joined as DeepSpeed's os.path.join does (an
// empty output_path puts job_name under the current directory; an absolute job_name wins).
std::filesystem::path monitor_log_dir(const config::FileMonitorConfig& config);

// Creates the log directory of `section` ("tensorboard", "csv_monitor") and checks that files
// can be made in it; returns it. Throws ConfigError naming `<section>.output_path`, the
// directory and the system's reason otherwise (a file where a directory is needed, no
// permission, a read-only disk).
std::filesystem::path prepare_monitor_log_dir(const config::FileMonitorConfig& config,
                                              std::string_view section);

// The monitors `settings` enable, for this rank: rank 0 gets one writer per enabled section,
// every other rank an empty fan-out. Directories and files are created here, so an unwritable
// output_path fails (ConfigError, see above) before any training step.
std::unique_ptr<MonitorFanout> create_monitors(const EngineSettings& settings, int rank);

}  // namespace zero::engine
