#include "engine/flops_profiler.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/writable_file.h"
#include "model/model_flops.h"

namespace zero::engine {
namespace {

void require(bool ok, const std::string& key, const std::string& rule, const std::string& value) {
  if (!ok) {
    throw ConfigError("flops_profiler." + key + " must be " + rule + ", got " + value);
  }
}

void check_values(const config::FlopsProfilerConfig& c) {
  require(c.profile_step >= 0, "profile_step",
          ">= 0 (the global step to profile; DeepSpeed's default 1 leaves step 0 as a warm-up)",
          std::to_string(c.profile_step));
  require(c.module_depth >= -1, "module_depth", ">= -1 (-1: every depth)",
          std::to_string(c.module_depth));
  require(c.top_modules >= 0, "top_modules", ">= 0 (modules listed per depth)",
          std::to_string(c.top_modules));
  require(std::isfinite(c.recompute_fwd_factor) && c.recompute_fwd_factor >= 0.0,
          "recompute_fwd_factor", "a number >= 0 (the fraction of the forward recomputed in backward)",
          std::to_string(c.recompute_fwd_factor));
}

[[noreturn]] void refuse_output_file(const std::string& path, const std::string& reason) {
  throw ConfigError("flops_profiler.output_file: cannot write the profile to '" + path + "': " +
                    reason + "; point flops_profiler.output_file at a writable file, or remove the "
                    "key (null) to print the profile to standard output");
}

// The profile is written once, many steps into the run: find out now whether it can be.
void check_output_file(const std::string& path) {
  if (const auto reason = io::unwritable_file_reason(path)) refuse_output_file(path, *reason);
}

}  // namespace

FlopsProfiler::FlopsProfiler(const config::FlopsProfilerConfig& config, model::Model& model,
                             const FlopsProfilerRun& run)
    : config_(config), model_(model), run_(run) {
  if (!config_.enabled) return;
  check_values(config_);
  if (!model_.config()) {
    throw ConfigError("flops_profiler.enabled: the FLOP counts come from the transformer formula "
                      "table, and this model was not built from a transformer config; set "
                      "flops_profiler.enabled to false");
  }
  if (run_.rank == 0 && config_.output_file) check_output_file(*config_.output_file);
}

FlopsProfiler::~FlopsProfiler() {
  if (active_) model_.remove_observer(this);
}

FlopsProfiler::Clock::time_point FlopsProfiler::synchronized_now() const {
  model_.backend().synchronize();
  return Clock::now();
}

void FlopsProfiler::before_step(int64_t completed_steps) {
  if (!first_step_) first_step_ = completed_steps;
  if (!config_.enabled || run_.rank != 0 || profiled_ || active_ ||
      completed_steps != config_.profile_step) {
    return;
  }
  const model::TransformerConfig& shape = *model_.config();
  std::vector<model::UnitFlops> table = model::unit_flops(
      shape, run_.micro_batch_size * run_.gradient_accumulation_steps, run_.seq_len);
  const auto& units = model_.units();
  if (table.size() != units.size()) {
    throw Error("flops_profiler: the model has " + std::to_string(units.size()) +
                " units but its transformer config describes " + std::to_string(table.size()));
  }
  FlopsProfile profile;
  profile.model_name = shape.architecture;
  profile.profile_step = completed_steps;
  profile.world_size = run_.world_size;
  profile.sequence_parallel_size = run_.sequence_parallel_size;
  profile.micro_batch_size = run_.micro_batch_size;
  profile.gradient_accumulation_steps = run_.gradient_accumulation_steps;
  profile.seq_len = run_.seq_len;
  for (size_t i = 0; i < units.size(); ++i) {
    if (table[i].name != units[i]->name()) {
      throw Error("flops_profiler: unit " + std::to_string(i) + " is '" + units[i]->name() +
                  "' but the transformer formula table expects '" + table[i].name + "'");
    }
    // This rank's share: every product divides evenly over the sequence group (projections by
    // tokens, attention by heads).
    for (model::OpFlops& op : table[i].ops) {
      op.forward_macs /= static_cast<double>(run_.sequence_parallel_size);
    }
    profile.units.push_back({units[i]->kind(), std::move(table[i]), 0.0, 0.0});
  }
  profile_ = std::move(profile);
  model_.add_observer(this);
  active_ = true;
  step_started_ = synchronized_now();
}

void FlopsProfiler::after_step() {
  if (!active_) return;
  profile_->iter_seconds = std::chrono::duration<double>(synchronized_now() - step_started_).count();
  model_.remove_observer(this);
  active_ = false;
  profiled_ = true;
  write_report(format_flops_report(*profile_, config_));
}

void FlopsProfiler::finish(int64_t completed_steps) const {
  if (!config_.enabled || run_.rank != 0 || profiled_) return;
  const long long first = first_step_.value_or(completed_steps);
  std::fprintf(stderr,
               "zero: warning: flops_profiler: no profile was taken: profile_step is %lld but this "
               "run trained from %lld to %lld completed steps (the profile step is the one that "
               "starts after profile_step steps, as DeepSpeed counts; train at least profile_step "
               "+ 1 steps)\n",
               static_cast<long long>(config_.profile_step), first,
               static_cast<long long>(completed_steps));
}

void FlopsProfiler::write_report(const std::string& text) const {
  if (!config_.output_file) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  const std::string& path = *config_.output_file;
  io::write_file_atomically(path, [&](std::FILE* f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      throw FileError(path + ": cannot write the flops profile: " + std::strerror(errno));
    }
  });
}

void FlopsProfiler::before_forward(size_t /*unit*/) { unit_started_ = synchronized_now(); }

void FlopsProfiler::after_forward(size_t unit) {
  profile_->units[unit].forward_seconds +=
      std::chrono::duration<double>(synchronized_now() - unit_started_).count();
}

void FlopsProfiler::before_backward(size_t /*unit*/) { unit_started_ = synchronized_now(); }

void FlopsProfiler::after_backward(size_t unit) {
  profile_->units[unit].backward_seconds +=
      std::chrono::duration<double>(synchronized_now() - unit_started_).count();
}

}  // namespace zero::engine
