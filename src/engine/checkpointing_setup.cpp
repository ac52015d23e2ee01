#include "engine/checkpointing_setup.h"

#include <cstdio>

namespace zero::engine {

std::optional<std::string> configure_activation_checkpointing(
    model::Model& model, const config::ActivationCheckpointingConfig& section) {
  const std::vector<std::string> keys = section.keys_in_use();
  if (!model.activation_checkpointing()) {
    if (keys.empty()) return std::nullopt;
    std::string list;
    for (const auto& key : keys) list += (list.empty() ? "" : ", ") + key;
    return "the activation_checkpointing section sets " + list +
           ", but the model does not checkpoint activations, so it has no effect; turn "
           "checkpointing on with `zero train --gradient-checkpointing true` "
           "(Model::set_activation_checkpointing in C++) or remove the section";
  }
  model::CheckpointingOptions options = model.activation_checkpointer().options();
  options.partition_activations = section.partition_activations;
  // DeepSpeed partitions over its model-parallel group: the ranks that hold identical block
  // inputs, which here are the tensor-parallel ranks (Ulysses and data-parallel ranks hold
  // different tokens). Without a tensor group the option keeps everything (DeepSpeed with
  // model-parallel size 1).
  if (section.partition_activations && model.tensor_group() != nullptr) {
    model.set_activation_partition_group(model.tensor_group());
  }
  options.cpu_checkpointing = section.cpu_checkpointing;
  options.contiguous_memory_optimization = section.contiguous_memory_optimization;
  options.number_checkpoints = section.number_checkpoints;
  options.synchronize_checkpoint_boundary = section.synchronize_checkpoint_boundary;
  options.profile = section.profile;
  model.set_checkpointing_options(options);
  return std::nullopt;
}

std::string checkpoint_profile_table(const model::Model& model,
                                     const model::CheckpointProfile& profile) {
  std::string out = "  unit                 forwards  forward ms  recomputes  recompute ms\n";
  double forward_total = 0.0;
  double recompute_total = 0.0;
  char line[160];
  for (const auto& t : profile.units) {
    const std::string& name = model.units().at(t.unit)->name();
    std::snprintf(line, sizeof(line), "  %-20s %8lld  %10.3f  %10lld  %12.3f\n", name.c_str(),
                  static_cast<long long>(t.forwards), 1e3 * t.forward_seconds,
                  static_cast<long long>(t.recomputes), 1e3 * t.recompute_seconds);
    out += line;
    forward_total += t.forward_seconds;
    recompute_total += t.recompute_seconds;
  }
  std::snprintf(line, sizeof(line), "  %-20s %8s  %10.3f  %10s  %12.3f\n", "total", "",
                1e3 * forward_total, "", 1e3 * recompute_total);
  out += line;
  return out;
}

void report_checkpoint_profile(model::Model& model, int64_t step, int64_t steps_per_print,
                               bool print) {
  const model::CheckpointProfile profile = model.activation_checkpointer().take_profile();
  if (!print || steps_per_print <= 0 || step % steps_per_print != 0) return;
  std::printf("[step %lld] activation checkpointing profile (this step, synchronized timings):\n%s",
              static_cast<long long>(step), checkpoint_profile_table(model, profile).c_str());
  std::fflush(stdout);
}

}  // namespace zero::engine
