// Monitoring and profiling sections: csv_monitor, tensorboard, wandb, comms_logger and
// flops_profiler. Defaults are DeepSpeed 0.19's (monitor/config.py, comm/config.py,
// profiling/constants.py).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/field_spec.h"

namespace zero::config {

// csv_monitor and tensorboard share their keys; rank 0 writes under output_path/job_name
// (engine/monitor.h).
struct FileMonitorConfig {
  bool enabled = false;
  std::string output_path;  // empty: under the launch directory
  std::string job_name = "DeepSpeedJobName";

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("output_path", output_path);
    v.field("job_name", job_name);
  }
  bool operator==(const FileMonitorConfig&) const = default;
};

struct WandbConfig {
  bool enabled = false;
  std::optional<std::string> group;
  std::optional<std::string> team;
  std::string project = "deepspeed";

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("group", group);
    v.field("team", team);
    v.field("project", project);
  }
  bool operator==(const WandbConfig&) const = default;
};

struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;
  bool prof_all = true;
  bool debug = false;
  std::vector<std::string> prof_ops;  // with prof_all false: the only operations logged

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("verbose", verbose);
    v.field("prof_all", prof_all);
    v.field("debug", debug);
    v.field("prof_ops", prof_ops);
  }
  bool operator==(const CommsLoggerConfig&) const = default;
};

struct FlopsProfilerConfig {
  bool enabled = false;
  double recompute_fwd_factor = 0.0;
  int64_t profile_step = 1;
  int64_t module_depth = -1;  // -1: every depth
  int64_t top_modules = 1;
  bool detailed = true;
  std::optional<std::string> output_file;  // unset: stdout

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("recompute_fwd_factor", recompute_fwd_factor);
    v.field("profile_step", profile_step);
    v.field("module_depth", module_depth);
    v.field("top_modules", top_modules);
    v.field("detailed", detailed);
    v.field("output_file", output_file);
  }
  bool operator==(const FlopsProfilerConfig&) const = default;
};

}  // namespace zero::config
