// The engine's side of DeepSpeed's activation_checkpointing section: configuring the model's
// ActivationCheckpointer (model/activation_checkpointer.h) from the section, and printing the
// section's profile (nothing in src/model prints).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/activation_checkpointing_config.h"
#include "model/model.h"

namespace zero::engine {

// When the model checkpoints (Model::activation_checkpointing()), applies `section` to it
// (ConfigError for options the model cannot honour, e.g. number_checkpoints below its block
// count). When it does not, the section changes nothing, as in DeepSpeed, where the model
// decides whether to checkpoint: the returned warning names the keys set and how to turn
// checkpointing on. Nothing to say: nullopt.
//
// partition_activations partitions over the model's tensor-parallel group (Model::tensor_group:
// the ranks holding identical block inputs, DeepSpeed's model-parallel group); without one it
// is a no-op, as in DeepSpeed with model-parallel size 1. Data-parallel and sequence-parallel
// ranks hold different activations, so they are never partitioned over.
std::optional<std::string> configure_activation_checkpointing(
    model::Model& model, const config::ActivationCheckpointingConfig& section);

// The per-unit table of one profile: unit name, forwards, forward ms, recomputes, recompute ms.
std::string checkpoint_profile_table(const model::Model& model,
                                     const model::CheckpointProfile& profile);

// Called once per optimizer step when the section's profile is on: takes the step's numbers
// from the model and, on print steps (steps_per_print) of the printing rank, prints the table
// headed "[step N] activation checkpointing profile".
void report_checkpoint_profile(model::Model& model, int64_t step, int64_t steps_per_print,
                               bool print);

}  // namespace zero::engine
