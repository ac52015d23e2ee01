// DeepSpeed's flops_profiler config section for the training loop: at global step
// `profile_step` (DeepSpeed's count: the step that runs after `profile_step` optimizer steps have
// completed, so the default 1 leaves the first step as a warm-up) rank 0 times every unit's
// forward and backward and writes a report (engine/flops_report.h) to stdout or to
// `output_file`. FLOP counts come from the model's formula table (model/model_flops.h), the one
// the MFU figure uses.
//
// Timing: the profiler is a model::UnitObserver added only for the profiled step (no cost on
// other steps). It synchronises the backend before reading the clock, so a unit's time is its
// own work even on an asynchronous device. It runs inside the sharding observer, so ZeRO-3's
// parameter gathers and ZeRO-2/3's gradient reductions around a unit are not part of the unit's
// latency; they are in the step's iteration latency. Profiling does not change any number the
// model computes (only when the clock is read).
//
// Ownership: holds a reference to the model, which must outlive the profiler.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/monitor_config.h"
#include "engine/flops_report.h"
#include "model/model.h"

namespace zero::engine {

// The shape of the run's steps, which the FLOP counts depend on.
struct FlopsProfilerRun {
  int rank = 0;
  int world_size = 1;
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t seq_len = 0;  // tokens per whole sequence
  // Ulysses: each rank of a sequence group computes 1/sp of every sequence's work (its T/sp
  // tokens through the projections, H/sp heads of attention over the whole sequence).
  int sequence_parallel_size = 1;
};

class FlopsProfiler final : public model::UnitObserver {
 public:
  // Checks the section when it is enabled: values in range (ConfigError naming the key), a
  // model built from a transformer config (the formula table needs its shape), and on rank 0
  // that `output_file` can be written (its directory is created; ConfigError naming
  // flops_profiler.output_file, the path and the reason otherwise), so a bad path stops the run
  // before the first step instead of at the profile step. Disabled: does nothing, ever.
  FlopsProfiler(const config::FlopsProfilerConfig& config, model::Model& model,
                const FlopsProfilerRun& run);
  ~FlopsProfiler() override;
  FlopsProfiler(const FlopsProfiler&) = delete;
  FlopsProfiler& operator=(const FlopsProfiler&) = delete;

  // Around one optimizer step of the training loop; `completed_steps` is the engine's
  // global_steps() before the step. At the profile step (rank 0) before_step starts timing and
  // after_step writes the report (FileError when output_file cannot be written after all).
  void before_step(int64_t completed_steps);
  void after_step();
  // At the end of the run: a warning on stderr (rank 0) when the profile step was never reached
  // (DeepSpeed silently never profiles), e.g. profile_step >= the run's steps or a resume past it.
  void finish(int64_t completed_steps) const;

  bool enabled() const { return config_.enabled; }
  bool profiled() const { return profiled_; }
  // The last profile taken (tests read the numbers behind the text).
  const std::optional<FlopsProfile>& last_profile() const { return profile_; }

  // model::UnitObserver (only while a profiled step runs).
  void before_forward(size_t unit) override;
  void after_forward(size_t unit) override;
  void before_backward(size_t unit) override;
  void after_backward(size_t unit) override;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point synchronized_now() const;
  void write_report(const std::string& text) const;

  config::FlopsProfilerConfig config_;
  model::Model& model_;
  FlopsProfilerRun run_;
  bool active_ = false;    // a profiled step is running: the observer is added
  bool profiled_ = false;
  std::optional<int64_t> first_step_;  // completed steps when the run's first step began
  Clock::time_point step_started_;
  Clock::time_point unit_started_;
  std::optional<FlopsProfile> profile_;
};

}  // namespace zero::engine
