// The pipeline section: DeepSpeed's pipeline-parallel settings (runtime/config.py
// get_pipeline_config; the pipe engine reads them). Keys and defaults are DeepSpeed 0.19's, except
// where noted:
//   stages                          "auto" or an integer >= 1. "auto" (the default) is read as
//                                   unset: the size then comes from the command line
//                                   (`zero train --pipeline-parallel-size`), else 1.
//   partition                       "parameters" | "uniform" | "type:REGEX" (pipeline/
//                                   stage_partition.h). DeepSpeed's parser defaults to "best",
//                                   a name its PipelineModule does not implement; zero.cpp
//                                   defaults to PipelineModule's own default, "parameters", and
//                                   reads "best" as that.
//   seed_layers                     a different random seed per layer at construction
//   activation_checkpoint_interval  0 = off; N > 0: each stage checkpoints its transformer
//                                   blocks in consecutive groups of N, a group keeping only its
//                                   input and recomputing its forward in backward
//                                   (PipelineEngine::set_activation_checkpoint_interval; blocks
//                                   counted from the stage's first block, where DeepSpeed counts
//                                   from its first layer)
//   pipe_partitioned                split activations sent between stages over the tensor-
//                                   parallel group (only matters with tensor parallelism)
//   grad_partitioned                the same for the gradients sent back
//   use_reentrant                   DeepSpeed's checkpoint function choice; unset = true
// DeepSpeed keeps any other key in the block without complaint; zero.cpp warns about unknown
// keys and rejects near-misses of these (a typo would lose the setting).
// The pipeline engine (engine/pipeline_engine.h) acts on stages, partition and
// activation_checkpoint_interval; the keys it does not act on yet are errors naming them
// (engine::check_pipeline_settings).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/field_spec.h"

namespace zero::config {

struct PipelineConfig {
  std::optional<int64_t> stages;  // unset: "auto"
  std::string partition = "parameters";
  bool seed_layers = false;
  int64_t activation_checkpoint_interval = 0;
  bool pipe_partitioned = true;
  bool grad_partitioned = true;
  std::optional<bool> use_reentrant;

  template <class V>
  void visit(V& v) {
    v.field("stages", stages, Limits::at_least(1));
    v.field("partition", partition);
    v.field("seed_layers", seed_layers);
    v.field("activation_checkpoint_interval", activation_checkpoint_interval, Limits::at_least(0));
    v.field("pipe_partitioned", pipe_partitioned);
    v.field("grad_partitioned", grad_partitioned);
    v.field("use_reentrant", use_reentrant);
  }
  bool operator==(const PipelineConfig&) const = default;

  // Checks the partition method: a known name, or "type:" and a regex that compiles (whether it
  // matches a unit is known when the model is partitioned). Throws ConfigError naming
  // 'pipeline.partition' (`source` prefixes the message).
  void validate(const std::string& source) const;
  // The keys set away from their defaults, as JSON, when the section asks for a pipeline: more
  // than one stage, or any other setting changed (each only matters to a pipeline). Nothing for
  // an absent or all-default section, or one that only says "stages": 1.
  std::optional<nlohmann::json> settings_in_use() const;
};

// Reads "pipeline": {"stages": "auto"} as unset, before the section readers (which reject any
// "auto" they do not resolve), and records what it became in the notes.
class ReadContext;
void resolve_pipeline_auto(nlohmann::json& config, const ReadContext& context);

}  // namespace zero::config
