#include "engine/monitor.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "core/error.h"
#include "engine/csv_monitor.h"
#include "engine/tensorboard_monitor.h"

namespace zero::engine {
namespace {

[[noreturn]] void refuse_log_dir(const config::FileMonitorConfig& config, std::string_view section,
                                 const std::filesystem::path& dir, const std::string& reason) {
  const std::string key(section);
  throw ConfigError(key + ".output_path: cannot write the monitor's log directory '" +
                    dir.string() + "' (output_path '" + config.output_path +
                    "' joined with job_name '" + config.job_name + "'): " + reason + "; point " + key +
                    ".output_path at a writable directory, or set " + key + ".enabled to false");
}

}  // namespace

void MonitorFanout::write_event(std::string_view name, double value, int64_t global_samples) {
  for (const auto& monitor : monitors_) monitor->write_event(name, value, global_samples);
}

void MonitorFanout::flush() {
  for (const auto& monitor : monitors_) monitor->flush();
}

std::filesystem::path monitor_log_dir(const config::FileMonitorConfig& config) {
  return std::filesystem::path(config.output_path) / config.job_name;
}

std::filesystem::path prepare_monitor_log_dir(const config::FileMonitorConfig& config,
                                              std::string_view section) {
  const std::filesystem::path dir = monitor_log_dir(config);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) refuse_log_dir(config, section, dir, error.message());
  if (!std::filesystem::is_directory(dir, error)) {
    refuse_log_dir(config, section, dir, "it exists and is not a directory");
  }
  // Writes happen later and only on print steps: ask now, so the run stops before training.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    refuse_log_dir(config, section, dir, std::strerror(errno));
  }
  return dir;
}

std::unique_ptr<MonitorFanout> create_monitors(const EngineSettings& settings, int rank) {
  auto fanout = std::make_unique<MonitorFanout>();
  if (rank != 0) return fanout;
  if (settings.tensorboard.enabled) {
    const std::filesystem::path dir = prepare_monitor_log_dir(settings.tensorboard, "tensorboard");
    try {
      fanout->add(std::make_unique<TensorBoardMonitor>(dir));
    } catch (const FileError& e) {
      refuse_log_dir(settings.tensorboard, "tensorboard", dir, e.what());
    }
  }
  if (settings.csv_monitor.enabled) {
    const std::filesystem::path dir = prepare_monitor_log_dir(settings.csv_monitor, "csv_monitor");
    fanout->add(std::make_unique<CsvMonitor>(dir));
  }
  return fanout;
}

}  // namespace zero::engine
