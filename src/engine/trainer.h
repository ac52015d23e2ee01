// The training loop behind `zero train`: builds the engine, pulls micro-batches, logs step lines
// (and one JSON object per logged step), evaluates, saves and resumes checkpoints, and prints a
// summary. A library function so tests drive it exactly as the command line does.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/kernel_profile_step.h"
#include "engine/training_data.h"

namespace zero::engine {

// The longest sequence the trainer accepts (tokens per sequence, `zero train --seq-len`).
inline constexpr int64_t kMaxSeqLen = (int64_t{1} << 31) - 1;

struct TrainerOptions {
  int64_t steps = 100;           // optimizer steps to reach (counting steps already in --resume),
                                 // at most kMaxTrainingCounter (engine_state.h)
  int64_t seq_len = 64;          // 2 .. kMaxSeqLen
  std::string save_dir;          // empty: no checkpoints
  int64_t save_every = 0;        // 0: only at the end (when save_dir is set)
  std::string resume_dir;        // empty: fresh start; else loads <dir>/latest
  int64_t eval_every = 0;        // 0: evaluate only at the end (when eval data is given)
  int64_t eval_batches = 4;
  std::string log_json_path;     // empty: no JSON log
  bool quiet = false;            // no step lines (tests)
  double peak_flops = 0.0;       // FLOP/s of one rank that MFU divides by; <= 0: not reported
  std::string peak_flops_dtype = "f32";  // the dtype it was measured in (engine/peak_flops.h)
  // --profile-kernels: the per-kernel table of one step (engine/kernel_profile_step.h); needs
  // the model's backend to be `kernel_profiler`.
  KernelProfileRequest kernel_profile;
  backend::ProfilingBackend* kernel_profiler = nullptr;
  // Test hook (ZERO_TEST_FAULT="RANK:STEP" on the command line): rank `fault_rank` throws after
  // finishing step `fault_step`, so tests can check that one failing rank brings the job down.
  int fault_rank = -1;
  int64_t fault_step = -1;
};

struct TrainingSummary {
  int64_t steps = 0;
  double final_loss = 0.0;       // mean training loss of the last logged window
  std::optional<double> final_eval_loss;
  std::optional<double> entropy_floor;
  double tokens_per_second = 0.0;
  double seconds = 0.0;
};

// Trains `engine` on `data` (and evaluates on `eval_data` when given) per `options`. Every rank
// of the engine's group calls it; rank 0 alone prints and writes the JSON log and the monitors'
// files (tensorboard, csv_monitor: engine/monitor.h), and the losses it
// reports are averaged over ranks. Before training it checks that the whole run fits the stated
// limits — options in range, tokens per step and per micro-batch representable, and the step,
// sample and micro-step counters at the end of the run at most kMaxTrainingCounter — and throws
// ConfigError naming the flag or config key otherwise, so no counter can overflow mid-run. A
// failed resume changes nothing on disk.
TrainingSummary run_training(Engine& engine, TrainingData& data, TrainingData* eval_data,
                             const TrainerOptions& options);

}  // namespace zero::engine
