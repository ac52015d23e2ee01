// Splitting a model's ordered unit list into pipeline stages, by DeepSpeed's PipelineModule
// partition methods (runtime/pipe/module.py _partition_layers, runtime/utils.py), so the stage
// boundaries equal DeepSpeed's for the same weights:
//   "parameters"  balance the units' trainable parameter counts (partition_balanced); the default
//   "uniform"     balance the number of units (partition_uniform)
//   "type:REGEX"  balance the units whose type name matches REGEX (weight 1, else 0), searched
//                 case-insensitively anywhere in the name (Python's re.search with IGNORECASE;
//                 here std::regex ECMAScript, which agrees on ordinary patterns)
// "best" (the default DeepSpeed's config parser writes for pipeline.partition, a name its
// PipelineModule does not implement) is read as "parameters", PipelineModule's own default.
// The method name is matched case-insensitively and, as DeepSpeed lower-cases the whole method
// string, so is the regex text (it matters only for escapes such as \D); "type:a:b" uses "a".
//
// Boundaries are returned as DeepSpeed's `parts`: stages + 1 non-decreasing unit indices from 0 to
// the unit count; stage s owns units [parts[s], parts[s + 1]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::pipeline {

// One unit of the model as the partitioner sees it.
struct LayerInfo {
  std::string name;        // for messages ("layers.3")
  std::string type;        // the unit's kind ("transformer_block"), what "type:REGEX" matches
  int64_t parameters = 0;  // trainable parameter count (elements)
};

enum class PartitionKind { kParameters, kUniform, kType };

struct PartitionMethod {
  PartitionKind kind = PartitionKind::kParameters;
  std::string type_regex;  // kType only: the pattern, lower-cased as DeepSpeed does

  // Parses a pipeline.partition value. Throws ConfigError naming `key` (the config key or flag
  // the text came from) for an unknown method, "profile" (DeepSpeed does not implement it) and
  // an empty or invalid regex.
  static PartitionMethod parse(const std::string& text,
                               const std::string& key = "pipeline.partition");
  std::string to_string() const;  // "parameters", "uniform", "type:<regex>"
};

// DeepSpeed's ds_utils.partition_uniform: `num_items` split into `num_parts` runs whose sizes
// differ by at most one, the longer runs first; with num_items <= num_parts the first
// num_items parts get one item each. num_parts >= 1.
std::vector<int64_t> partition_uniform(int64_t num_items, int64_t num_parts);

// DeepSpeed's ds_utils.partition_balanced: contiguous non-empty runs chosen by its dynamic
// program, which minimises (heaviest run - lightest run) extending the best split of each
// prefix, ties going to the latest cut; float64 sums as numpy's. With weights.size() <=
// num_parts it is partition_uniform. Weights >= 0; num_parts >= 1. O(n^2 * parts) time.
std::vector<int64_t> partition_balanced(const std::vector<double>& weights, int64_t num_parts);

// The stage boundaries of `layers` over `stages` stages by `method`. Throws ConfigError naming
// pipeline.stages when stages < 1 or there are more stages than units (a stage would be empty),
// and naming `key` when a type regex matches no unit (listing the unit types there are).
std::vector<int64_t> partition_layers(const std::vector<LayerInfo>& layers, int64_t stages,
                                      const PartitionMethod& method,
                                      const std::string& key = "pipeline.partition");

// The stage that owns unit `layer` under `parts` (InternalError when out of range).
int64_t stage_owner(const std::vector<int64_t>& parts, int64_t layer);

// The stages holding any of `layers` (sorted, each once): for units that share a tied parameter
// (a token embedding and the LM head that reads it), the stages whose gradients ReduceTiedGrads
// all-reduces, as DeepSpeed's PipelineModule groups them. One stage: nothing to reduce.
std::vector<int64_t> stages_holding(const std::vector<int64_t>& parts,
                                    const std::vector<int64_t>& layers);

}  // namespace zero::pipeline
