// The `tensorboard` section: scalars in a TensorBoard event file under output_path/job_name,
// which is where DeepSpeed's TensorBoardMonitor points PyTorch's SummaryWriter. Each run (a
// --resume included) starts a new events file beside the earlier ones; TensorBoard merges them.
#pragma once
#include <filesystem>

#include "engine/monitor.h"
#include "io/tensorboard_events.h"

namespace zero::engine {

class TensorBoardMonitor : public Monitor {
 public:
  // `log_dir` must exist (prepare_monitor_log_dir). Throws FileError when no file can be made.
  explicit TensorBoardMonitor(const std::filesystem::path& log_dir) : events_(log_dir.string()) {}
  // TensorBoard scalars are float32, as add_scalar stores them.
  void write_event(std::string_view name, double value, int64_t global_samples) override {
    events_.add_scalar(name, static_cast<float>(value), global_samples);
  }
  void flush() override { events_.flush(); }
  const std::string& path() const { return events_.path(); }

 private:
  io::EventFileWriter events_;
};

}  // namespace zero::engine
