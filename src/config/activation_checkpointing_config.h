// The activation_checkpointing section (DeepSpeed's checkpointing module: recompute activations
// in backward instead of keeping them). Defaults are DeepSpeed 0.19's: everything off.
// As in DeepSpeed, the section says HOW checkpointing works; WHETHER the model checkpoints is the
// model's choice (`zero train --gradient-checkpointing true`, Model::set_activation_checkpointing).
// The engine hands it to model/activation_checkpointer.h, which documents each key; options set
// while checkpointing is off draw a warning (keys_in_use()).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/field_spec.h"
#include "core/error.h"

namespace zero::config {

struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  // Buffer count for contiguous_memory_optimization; unset lets DeepSpeed count them.
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;

  template <class V>
  void visit(V& v) {
    v.field("partition_activations", partition_activations);
    v.field("cpu_checkpointing", cpu_checkpointing);
    v.field("contiguous_memory_optimization", contiguous_memory_optimization);
    v.field("number_checkpoints", number_checkpoints, Limits::at_least(0));
    v.field("synchronize_checkpoint_boundary", synchronize_checkpoint_boundary);
    v.field("profile", profile);
  }
  bool operator==(const ActivationCheckpointingConfig&) const = default;

  // DeepSpeed's rule: the contiguous buffer holds partitioned activations. Throws ConfigError
  // naming both keys (`source` prefixes the message).
  void validate(const std::string& source) const {
    if (contiguous_memory_optimization && !partition_activations) {
      throw ConfigError(source +
                        ": key 'activation_checkpointing.contiguous_memory_optimization' = true "
                        "needs 'activation_checkpointing.partition_activations' = true (as in "
                        "DeepSpeed); enable partition_activations or remove "
                        "contiguous_memory_optimization");
    }
  }
  // The keys set away from their defaults ("activation_checkpointing.<key>"), in order.
  std::vector<std::string> keys_in_use() const {
    std::vector<std::string> keys;
    auto note = [&keys](bool set, const char* key) {
      if (set) keys.push_back(std::string("activation_checkpointing.") + key);
    };
    note(partition_activations, "partition_activations");
    note(cpu_checkpointing, "cpu_checkpointing");
    note(contiguous_memory_optimization, "contiguous_memory_optimization");
    note(number_checkpoints.has_value(), "number_checkpoints");
    note(synchronize_checkpoint_boundary, "synchronize_checkpoint_boundary");
    note(profile, "profile");
    return keys;
  }
};

}  // namespace zero::config
