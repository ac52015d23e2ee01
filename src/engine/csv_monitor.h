// The `csv_monitor` section in DeepSpeed's layout (monitor/csv_monitor.py): one CSV file per
// metric in output_path/job_name, named after the metric with '/' and ' ' turned into '_'
// ("Train/Samples/train_loss" -> Train_Samples_train_loss.csv), a header row
// "step,<last part of the name>" and one "step,value" row per event.
//
// Differences from DeepSpeed, on purpose: the header is written when a file is new or empty
// rather than once per process, so a resumed run appending to its directory does not put a second
// header in the middle of the file; rows end in "\n" (Python's csv module writes "\r\n"); values
// are the shortest text that reads back as the same double.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "engine/monitor.h"

namespace zero::engine {

// "Train/Samples/lr" -> "Train_Samples_lr.csv".
std::string csv_metric_file_name(std::string_view metric);
// "Train/Samples/lr" -> "lr".
std::string csv_metric_header(std::string_view metric);

class CsvMonitor : public Monitor {
 public:
  // `log_dir` must exist (prepare_monitor_log_dir).
  explicit CsvMonitor(std::filesystem::path log_dir) : dir_(std::move(log_dir)) {}
  ~CsvMonitor() override;  // writes what is pending; errors are dropped
  CsvMonitor(const CsvMonitor&) = delete;
  CsvMonitor& operator=(const CsvMonitor&) = delete;

  void write_event(std::string_view name, double value, int64_t global_samples) override;
  void flush() override;  // appends each file's pending rows; throws FileError

 private:
  struct MetricFile {
    std::string header;   // the metric's header cell
    std::string pending;  // rows not yet written
  };
  void append_rows(const std::filesystem::path& path, MetricFile& file);

  std::filesystem::path dir_;
  std::map<std::string, MetricFile> files_;  // by file name
};

}  // namespace zero::engine
