// `zero train --profile-kernels STEP [--profile-kernels-json FILE]`: the per-kernel time table
// (backend/profiling/kernel_profile.h) of one training step, printed by rank 0 after that step
// and written as JSON for bench/ (the GPU speed work reads it). The step is the global step as
// step lines number it (1 = the first step of a fresh run), so a few warm-up steps come first.
//
// The step is bracketed by backend synchronisations, so its wall time is its own work; every
// rank profiles (the ops are the same), rank 0 reports. Ownership: holds a reference to the
// ProfilingBackend, which must outlive it.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "backend/profiling/profiling_backend.h"

namespace zero::engine {

struct KernelProfileRequest {
  int64_t step = 0;       // 0: no profile
  std::string json_path;  // empty: the table on standard output only
  size_t table_rows = 30; // rows printed (the JSON has them all)
};

class KernelProfileStep {
 public:
  // Checks the request before the run: step >= 0 and at most `last_step` (ConfigError naming
  // --profile-kernels), and on the reporting rank that json_path can be written (ConfigError
  // naming --profile-kernels-json). `profiler` may be null only when no profile is requested.
  // `reports`: this rank writes the JSON (and warns); `prints`: it also prints the table.
  KernelProfileStep(const KernelProfileRequest& request, backend::ProfilingBackend* profiler,
                    int64_t last_step, bool reports, bool prints);

  // Around one optimizer step; `completed_steps` is the engine's global_steps() before it.
  void before_step(int64_t completed_steps);
  void after_step();
  // A warning on stderr (reporting rank) when the step was never reached (a resume past it).
  void finish() const;

  const std::optional<backend::KernelProfile>& profile() const { return profile_; }

 private:
  using Clock = std::chrono::steady_clock;
  KernelProfileRequest request_;
  backend::ProfilingBackend* profiler_;
  bool reports_;
  bool prints_;
  bool active_ = false;
  Clock::time_point started_;
  std::optional<backend::KernelProfile> profile_;
};

}  // namespace zero::engine
