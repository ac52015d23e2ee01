#include "engine/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "comm/comms_logger.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "engine/checkpoint_dir.h"
#include "engine/engine_state.h"
#include "engine/flops_profiler.h"
#include "engine/memory_report.h"
#include "engine/offload_report.h"
#include "engine/monitor.h"
#include "model/model_flops.h"

namespace zero::engine {
namespace {

using Clock = std::chrono::steady_clock;

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

nlohmann::json memory_json(const MemoryStats& m) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t c = 0; c < kNumMemoryCategories; ++c) {
    out[memory_category_name(static_cast<MemoryCategory>(c))] = m.live_bytes[c];
  }
  out["peak_total"] = m.total_peak_bytes;
  return out;
}

// Mean over ranks of a per-rank value (one scalar all-reduce).
double rank_mean(Engine& engine, double value) {
  comm::Comm& comm = engine.comm();
  if (comm.world_size() == 1) return value;
  return comm.all_reduce_scalar(value, comm::ReduceOp::kSum) / comm.world_size();
}

// The comms_logger section: per-operation communication summary of this rank.
void print_comm_summary(Engine& engine, const char* when) {
  const auto& logger = engine.settings().comms_logger;
  const std::vector<std::string> ops =
      logger.prof_all ? std::vector<std::string>{} : logger.prof_ops;
  std::printf("communication (rank 0, %s):\n%s", when,
              comm::format_comm_summary(engine.comm().stats(), engine.comm().world_size(), ops).c_str());
  // ZeRO++'s hpZ gathers run in rank 0's secondary group: their own table.
  if (const comm::Comm* group = engine.zero_stage().hpz_group()) {
    std::printf("communication within rank 0's hpZ group of %d ranks (%s):\n%s",
                group->world_size(), when,
                comm::format_comm_summary(group->stats(), group->world_size(), ops).c_str());
  }
  // hpZ with qgZ: the gradients' second hop, across the hpZ groups.
  if (const comm::Comm* column = engine.zero_stage().qgz_column_group()) {
    std::printf("communication across the hpZ groups, rank 0's place in each (%s):\n%s", when,
                comm::format_comm_summary(column->stats(), column->world_size(), ops).c_str());
  }
}

// An evaluation as its own --log-json line ({"step", "eval_loss"}), which `zero plot` draws.
void log_eval_loss(std::ofstream* log, int64_t step, double eval_loss) {
  if (log == nullptr) return;
  *log << nlohmann::json{{"step", step}, {"eval_loss", eval_loss}}.dump() << "\n";
  log->flush();
}

// Every evaluation reads the same held-out batches (the eval data's position is put back
// afterwards), as a Hugging Face Trainer evaluates its whole eval set each time: eval losses of
// one run compare step to step, and a resumed run evaluates what the uninterrupted one does.
double evaluate(Engine& engine, TrainingData& data, const TrainerOptions& options) {
  const nlohmann::json position = data.state();
  double total = 0.0;
  for (int64_t i = 0; i < options.eval_batches; ++i) {
    total += engine.eval_batch(data.next(engine.settings().micro_batch_size, options.seq_len));
  }
  data.restore(position);
  return rank_mean(engine, total / static_cast<double>(options.eval_batches));
}

void draw_progress(int64_t step, int64_t total, double loss) {
  const int width = 30;
  const double done = std::clamp(static_cast<double>(step) / static_cast<double>(std::max<int64_t>(total, 1)), 0.0, 1.0);
  const int filled = static_cast<int>(width * done);
  std::printf("\r[%.*s%*s] %lld/%lld loss %.4f", filled, "==============================",
              width - filled, "", static_cast<long long>(step), static_cast<long long>(total), loss);
  std::fflush(stdout);
}

void check_options(const TrainerOptions& o) {
  auto require = [](bool ok, const std::string& flag, const std::string& range, int64_t value) {
    if (!ok) {
      throw ConfigError(flag + " must be " + range + ", got " + std::to_string(value));
    }
  };
  require(o.steps >= 0 && o.steps <= kMaxTrainingCounter, "--steps",
          "from 0 to " + std::to_string(kMaxTrainingCounter) + " (2^53, the most steps a run counts)",
          o.steps);
  require(o.seq_len >= 2 && o.seq_len <= kMaxSeqLen, "--seq-len",
          "from 2 to " + std::to_string(kMaxSeqLen), o.seq_len);
  require(o.save_every >= 0, "--save-every", ">= 0 (0: save at the end only)", o.save_every);
  require(o.eval_every >= 0, "--eval-every", ">= 0 (0: evaluate at the end only)", o.eval_every);
  require(o.eval_batches >= 1 && o.eval_batches <= kMaxTrainingCounter, "eval_batches",
          "from 1 to 2^53", o.eval_batches);
}

// `base + count * per_step`, or nothing past kMaxTrainingCounter.
std::optional<int64_t> counter_after(int64_t base, int64_t count, int64_t per_step) {
  const std::optional<int64_t> added = mul_if_fits(count, per_step);
  if (!added) return std::nullopt;
  const std::optional<int64_t> total = add_if_fits(base, *added);
  if (!total || *total > kMaxTrainingCounter) return std::nullopt;
  return total;
}

// The sizes and counters of the whole run, checked before the first step (after a resume, so the
// restored counters count): a run that would overflow one is refused up front with the flag or
// key to change, instead of wrapping after hours of training. Returns the tokens per step.
int64_t check_run_fits(Engine& engine, const TrainerOptions& o) {
  const EngineSettings& s = engine.settings();
  // Data-parallel replicas (the ranks of a sequence-parallel group share their sequences).
  const int64_t world = engine.data_parallel_size();
  const std::string batch = "train_micro_batch_size_per_gpu " + std::to_string(s.micro_batch_size) +
                            " x gradient_accumulation_steps " +
                            std::to_string(s.gradient_accumulation_steps);
  const std::string sizes = batch + " x --seq-len " + std::to_string(o.seq_len) + " x " +
                            std::to_string(world) + " data-parallel ranks";
  const std::optional<int64_t> micro_tokens = mul_if_fits(s.micro_batch_size, o.seq_len + 1);
  std::optional<int64_t> tokens = mul_if_fits(s.micro_batch_size, s.gradient_accumulation_steps);
  if (tokens) tokens = mul_if_fits(*tokens, o.seq_len);
  if (tokens) tokens = mul_if_fits(*tokens, world);
  if (!micro_tokens || !tokens) {
    throw ConfigError("tokens per step (" + sizes +
                      ") overflow a 64-bit integer; lower train_micro_batch_size_per_gpu "
                      "(zero train --micro-batch), gradient_accumulation_steps or --seq-len");
  }
  const int64_t remaining = std::max<int64_t>(0, o.steps - engine.global_steps());
  const auto refuse = [&](const std::string& counter, int64_t now, const std::string& per_step) {
    throw ConfigError("--steps " + std::to_string(o.steps) + ": training " + std::to_string(remaining) +
                      " more steps from " + counter + " " + std::to_string(now) + " at " + per_step +
                      " per step would take " + counter + " past " +
                      std::to_string(kMaxTrainingCounter) +
                      " (2^53, the most a run counts); lower --steps or the batch size");
  };
  if (!counter_after(engine.global_samples(), remaining, s.train_batch_size)) {
    refuse("global_samples", engine.global_samples(),
           "train_batch_size " + std::to_string(s.train_batch_size));
  }
  if (!counter_after(engine.micro_steps(), remaining, s.gradient_accumulation_steps)) {
    refuse("micro_steps", engine.micro_steps(),
           "gradient_accumulation_steps " + std::to_string(s.gradient_accumulation_steps));
  }
  return *tokens;
}

// Restores one data source from the checkpoint's client state; messages name the file and field.
void restore_data(TrainingData& data, const nlohmann::json& client, const char* key,
                  const std::string& state_file) {
  if (!client.is_object()) {
    throw FileError(state_file + ": field \"client_state\" must be a JSON object holding the data "
                    "position (zero train writes {\"data\": ...}); the checkpoint is damaged or was "
                    "edited by hand");
  }
  if (!client.contains(key)) return;
  const std::string field = state_file + ": field \"client_state." + key + "\": ";
  try {
    data.restore(client.at(key));
  } catch (const FileError& e) {
    throw FileError(field + e.what());
  } catch (const ConfigError& e) {
    throw ConfigError(field + e.what());
  }
}

}  // namespace

TrainingSummary run_training(Engine& engine, TrainingData& data, TrainingData* eval_data,
                             const TrainerOptions& options) {
  check_options(options);
  // Rank 0 of the group, or of the world when the engine is a pipeline stage.
  const bool leader = engine.reporting_rank();
  const int report_rank = leader ? 0 : std::max(1, engine.comm().rank());
  const bool quiet = options.quiet || !leader;
  if (!options.resume_dir.empty()) {
    const std::string tag = resolve_checkpoint_tag(options.resume_dir, "");
    const std::string state_file =
        (std::filesystem::path(options.resume_dir) / tag / "engine_state.json").string();
    const nlohmann::json client = engine.load_checkpoint(options.resume_dir, tag);
    restore_data(data, client, "data", state_file);
    if (eval_data != nullptr) restore_data(*eval_data, client, "eval_data", state_file);
    if (!quiet) {
      std::printf("resumed from %s at step %lld\n", options.resume_dir.c_str(),
                  static_cast<long long>(engine.global_steps()));
    }
  }
  std::unique_ptr<std::ofstream> log;
  if (!options.log_json_path.empty() && leader) {
    log = std::make_unique<std::ofstream>(options.log_json_path, std::ios::app);
    if (!*log) throw FileError(options.log_json_path + ": cannot open the --log-json file for writing");
  }
  const EngineSettings& s = engine.settings();
  const int world = engine.comm().world_size();
  // Tokens of the global batch; FLOPs of one rank's share (MFU is per device).
  const int64_t tokens_per_step = check_run_fits(engine, options);
  // csv_monitor / tensorboard (rank 0): directories and files exist before the first step, so an
  // unwritable output_path stops the run here.
  const std::unique_ptr<MonitorFanout> monitor = create_monitors(s, report_rank);
  // flops_profiler (rank 0): output_file is checked here; one step is profiled in the loop.
  FlopsProfiler profiler(s.flops_profiler, engine.model(),
                         {report_rank, world, s.micro_batch_size,
                          s.gradient_accumulation_steps, options.seq_len,
                          static_cast<int>(s.sequence_parallel_size)});
  KernelProfileStep kernel_profile(options.kernel_profile, options.kernel_profiler, options.steps,
                                   leader, !quiet);
  if (s.curriculum_learning.enabled &&
      s.curriculum_learning.max_difficulty.value_or(0) > options.seq_len) {
    throw ConfigError("curriculum_learning.max_difficulty " +
                      std::to_string(*s.curriculum_learning.max_difficulty) +
                      " is above --seq-len " + std::to_string(options.seq_len) +
                      ": the curriculum cuts sequences and would never reach its last length; "
                      "set --seq-len to max_difficulty or lower max_difficulty");
  }
  // One step's FLOPs at a sequence length (the curriculum's, else --seq-len).
  auto flops_at = [&](int64_t length) {
    if (!engine.model().config()) return 0.0;
    double flops = model::training_flops(*engine.model().config(),
                                         s.micro_batch_size * s.gradient_accumulation_steps,
                                         length).total();
    // Sequence parallelism: a rank computes its 1/sp share of every sequence.
    flops /= static_cast<double>(s.sequence_parallel_size);
    // Tensor parallelism: about 1/tp of every matmul (norms and the loss's few are ignored).
    if (const comm::Comm* tensor_group = engine.model().tensor_group()) {
      flops /= static_cast<double>(tensor_group->world_size());
    }
    return flops;
  };
  const double full_length_flops = flops_at(options.seq_len);
  // The progress bar only for a single process on a terminal: mpirun hands its ranks a
  // pseudo-terminal even when the job's output goes to a log file.
  const bool terminal = ::isatty(STDOUT_FILENO) != 0 && !quiet && world == 1;
  auto save = [&](const char* why) {
    nlohmann::json client = {{"data", data.state()}};
    if (eval_data != nullptr) client["eval_data"] = eval_data->state();
    engine.save_checkpoint(options.save_dir, "", client);
    if (!quiet) {
      std::printf("%ssaved checkpoint %s/global_step%lld (%s)\n", terminal ? "\n" : "",
                  options.save_dir.c_str(), static_cast<long long>(engine.global_steps()), why);
    }
  };

  TrainingSummary summary;
  summary.entropy_floor = data.entropy_floor();
  const auto start = Clock::now();
  auto window_start = start;
  double window_loss = 0.0;
  int64_t window_steps = 0;
  int64_t window_tokens = 0;
  double window_flops = 0.0;
  int64_t steps_run = 0;
  int64_t tokens_run = 0;
  // ZeRO-Offload / ZeRO-Infinity: where the bytes live, then each window's traffic.
  const bool offloaded = offloads(engine);
  if (offloaded && !quiet) std::printf("%s\n", offload_placement_line(engine).c_str());
  OffloadTraffic window_traffic = offloaded ? offload_traffic(engine) : OffloadTraffic{};
  while (engine.global_steps() < options.steps) {
    const int64_t samples_before_step = engine.global_samples();
    profiler.before_step(engine.global_steps());
    kernel_profile.before_step(engine.global_steps());
    const double rank_loss =
        engine.train_batch([&] { return data.next(s.micro_batch_size, options.seq_len); });
    profiler.after_step();
    const double loss = rank_mean(engine, rank_loss);
    kernel_profile.after_step();
    if (!std::isfinite(loss)) {
      throw Error("the training loss became " + std::to_string(loss) + " at step " +
                  std::to_string(engine.global_steps()) + "; lower the learning rate or check the data");
    }
    ++steps_run;
    // The step's length: the curriculum's cut, else --seq-len (tokens_per_step is a multiple).
    const int64_t length = engine.curriculum_length() > 0
                               ? std::min(engine.curriculum_length(), options.seq_len)
                               : options.seq_len;
    const int64_t step_tokens = tokens_per_step / options.seq_len * length;
    tokens_run += step_tokens;
    window_tokens += step_tokens;
    window_flops += length == options.seq_len ? full_length_flops : flops_at(length);
    if (engine.comm().rank() == options.fault_rank && engine.global_steps() == options.fault_step) {
      throw Error("test fault injected by ZERO_TEST_FAULT on rank " +
                  std::to_string(options.fault_rank) + " after step " +
                  std::to_string(options.fault_step));
    }
    // DeepSpeed's events: the loss from backward(), before the step counts its samples; the
    // learning rate and loss scale after it (the values the next step uses).
    monitor->write_event(kTrainLossMetric, loss, samples_before_step);
    monitor->write_event(kLearningRateMetric, engine.get_lr(), engine.global_samples());
    if (s.fp16.enabled) {
      monitor->write_event(kLossScaleMetric, engine.loss_scale(), engine.global_samples());
    }
    window_loss += loss;
    ++window_steps;
    const int64_t step = engine.global_steps();
    const bool last = step >= options.steps;
    const bool print = last || (s.steps_per_print > 0 && step % s.steps_per_print == 0);
    if (print) {
      const double seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double tokens_per_s = static_cast<double>(window_tokens) / seconds;
      const double mean_loss = window_loss / static_cast<double>(window_steps);
      const double achieved = window_flops / seconds;
      const double mfu = options.peak_flops > 0 ? achieved / options.peak_flops : 0.0;
      const MemoryStats mem = engine.model().backend().allocator().stats();
      summary.final_loss = mean_loss;
      if (!quiet) {
        if (terminal) std::printf("\r\033[K");
        std::printf("step %6lld | loss %.4f | lr %.3e | grad norm %.3f | %8.0f tok/s | %.1f GFLOP/s",
                    static_cast<long long>(step), mean_loss, engine.get_lr(), engine.last_grad_norm(),
                    tokens_per_s, achieved / 1e9);
        if (s.fp16.enabled || engine.skipped_steps() > 0) {
          std::printf(" | loss scale %g | skipped %lld", engine.loss_scale(),
                      static_cast<long long>(engine.skipped_steps()));
        }
        if (mfu > 0) std::printf(" | MFU %.1f%%", 100.0 * mfu);
        if (engine.curriculum_length() > 0) {
          std::printf(" | seqlen %lld", static_cast<long long>(length));
        }
        std::printf(" | mem %.1f MiB, peak %.1f (params %.1f, grads %.1f, optim %.1f, act peak %.1f)",
                    mib(mem.total_live_bytes), mib(mem.total_peak_bytes),
                    mib(mem.live(MemoryCategory::kParams)),
                    mib(mem.live(MemoryCategory::kGrads)), mib(mem.live(MemoryCategory::kOptimizer)),
                    mib(mem.peak(MemoryCategory::kActivations)));
        if (offloaded) {
          std::printf("%s", offload_traffic_text(window_traffic, offload_traffic(engine), window_steps).c_str());
        }
        std::printf("\n");
        if (s.memory_breakdown) std::printf("%s\n", memory_breakdown_line(mem).c_str());
      }
      // memory_breakdown reports peaks per print window, as DeepSpeed resets its peak counters.
      if (s.memory_breakdown) engine.model().backend().allocator().reset_peaks();
      if (log) {
        nlohmann::json line = {{"step", step},
                               {"loss", mean_loss},
                               {"lr", engine.get_lr()},
                               {"loss_scale", engine.loss_scale()},
                               {"skipped_steps", engine.skipped_steps()},
                               {"grad_norm", engine.last_grad_norm()},
                               {"tokens_per_s", tokens_per_s},
                               {"window_steps", window_steps},
                               {"window_seconds", seconds},
                               {"window_tokens", window_tokens},
                               {"mfu", mfu},
                               {"peak_flops", options.peak_flops},
                               {"peak_flops_dtype", options.peak_flops_dtype},
                               {"memory_bytes", memory_json(mem)}};
        *log << line.dump() << "\n";
        log->flush();
      }
      monitor->flush();
      if (!quiet && s.comms_logger.enabled && s.comms_logger.verbose) {
        print_comm_summary(engine, ("after step " + std::to_string(step)).c_str());
      }
      window_loss = 0.0;
      window_steps = 0;
      window_tokens = 0;
      window_flops = 0.0;
      window_start = Clock::now();
      if (offloaded) window_traffic = offload_traffic(engine);
    } else if (terminal) {
      draw_progress(step, options.steps, loss);
    }
    if (eval_data != nullptr && options.eval_every > 0 && step % options.eval_every == 0 && !last) {
      const double eval_loss = evaluate(engine, *eval_data, options);
      if (!quiet) std::printf("eval   %6lld | loss %.4f\n", static_cast<long long>(step), eval_loss);
      monitor->write_event(kEvalLossMetric, eval_loss, engine.global_samples());
      monitor->flush();
      log_eval_loss(log.get(), step, eval_loss);
    }
    if (!options.save_dir.empty() && options.save_every > 0 && step % options.save_every == 0 && !last) {
      save("--save-every");
    }
  }
  profiler.finish(engine.global_steps());
  kernel_profile.finish();
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  summary.steps = engine.global_steps();
  summary.tokens_per_second =
      summary.seconds > 0
          ? static_cast<double>(tokens_run) / summary.seconds
          : 0.0;
  if (eval_data != nullptr) {
    summary.final_eval_loss = evaluate(engine, *eval_data, options);
    monitor->write_event(kEvalLossMetric, *summary.final_eval_loss, engine.global_samples());
    log_eval_loss(log.get(), engine.global_steps(), *summary.final_eval_loss);
  }
  monitor->flush();
  if (!options.save_dir.empty() && steps_run > 0) save("end of training");
  if (!quiet && s.comms_logger.enabled) print_comm_summary(engine, "whole run");
  return summary;
}

}  // namespace zero::engine
